"""Chapter 05, lesson 08 (05.08, 08_flash3_fp8): FP8 attention.

On the CPU: the problem's input contract (rotated, per-head e4m3, Vt transposed with NaN padding), its
reference (float64 of the decoded values: equal to attention of the rotated-back values, since the
rotation is orthogonal), the tolerance's derivation, the accuracy bound's (a NumPy emulation: FP8 with
the rotation within ACCURACY_BOUND on outlier inputs, without it outside — the "no rotation" mistake
of the preparation caught); the launch refuses what it cannot run; the cell compiles for sm_90a with
every switch setting, without local memory, with both QGMMA forms; the rubric passes for the reference
and fails for the released stub; every GPU mistake of tests/wrong/ch05_flash3_fp8.py applies, compiles
and passes the rubric (only running it shows it).
Marked ``gpu``: the reference passes at every visible and hidden size; each mistake is caught in a
process of its own; the accuracy check on the GPU (with the rotation within the bound, without not).
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

import grader  # noqa: F401  (simulator first)
from grader.check import check
from grader.cuda.launch import LaunchShape
from grader.notebooks import cell_source, run_cells
from grader.problems import flash3_fp8 as P
from grader.problems.attention import Attn, attention_f64
from grader.problems.hopper_fp8 import e4m3_decode
from tests.cells import check_in_own_process, compile_cell, run_rubric
from tests.test_ch05_flash3 import _ex2_under_pv
from tests.conftest import ROOT, solution
from tests.wrong import ch05_flash3_fp8 as W

CH, NB, CELL, RUBRIC, KERNEL = W.CHAPTER, W.NOTEBOOK, W.CELL, W.RUBRIC, W.KERNEL
SWITCHES = ["flash3_fp8<F8<0, 0, 1>>", "flash3_fp8<F8<0, 1, 0>>", "flash3_fp8<F8<0, 1, 1, 3>>", "flash3_fp8<F8<0, 1, 1, 0, 0, 128>>"]


def reference() -> str:
    return cell_source(solution(CH, NB), CELL)


# ---------------------------------------------------------------- the problem
def test_inputs_follow_the_contract():
    rng = np.random.default_rng(3)
    s = Attn(2, 4, 100, 128, Sk=77, Hkv=2)
    inp = P.fp8_inputs(rng, s)
    assert [inp[n].dtype for n in ("q", "k", "vt")] == [np.uint8] * 3
    assert inp["q"].shape == (2, 4, 100, 128) and inp["k"].shape == (2, 2, 77, 128)
    assert inp["vt"].shape == (2, 2, 128, 80)                                  # Sk rounded up to 16
    nat = P.unpermute(inp["vt"])
    assert (nat[..., 77:] == 0).all() and (inp["vt"] == 0).sum() == (nat == 0).sum()   # the padding: zeros
    assert inp["qd"].shape == (2, 4) and inp["kd"].shape == inp["vd"].shape == (2, 2)
    for x, d in (("q", "qd"), ("k", "kd"), ("vt", "vd")):                      # each head's largest code: ±448
        vals = np.abs(e4m3_decode(nat[..., :77] if x == "vt" else inp[x]))
        assert np.allclose(vals.reshape(*inp[d].shape, -1).max(-1), 448.0)


def test_vt_key_order_is_the_accumulators():
    """Column 4q + j of a group of 16 holds the key whose score lane q's accumulator holds as A-fragment
    byte j: accumulator columns 8c + 2q + {0, 1} (c = 0, 1), in that order (wgmma.cuh, flash3_fp8.cuh)."""
    for q in range(4):
        acc_cols = [8 * c + 2 * q + b for c in (0, 1) for b in (0, 1)]
        assert list(P.KEY_ORDER[4 * q:4 * q + 4]) == acc_cols
    assert sorted(P.KEY_ORDER) == list(range(16))
    cols = P.key_columns(48)
    assert sorted(cols) == list(range(48)) and list(cols[16:20]) == [16, 17, 24, 25]
    rng = np.random.default_rng(4)
    v = rng.normal(size=(1, 1, 37, 128)).astype(np.float32)
    inp = P.prepare_fp8(v, v, v, rng, rotate=False)
    # the stored column 2 holds key 8, column 4 key 2; unpermute restores the natural order
    assert np.array_equal(inp["vt"][..., 2], P.unpermute(inp["vt"])[..., 8])
    assert np.array_equal(inp["vt"][..., 4], P.unpermute(inp["vt"])[..., 2])
    assert np.array_equal(P.unpermute(inp["vt"])[..., :37].transpose(0, 1, 3, 2), P.quantize_heads(v)[0])


def test_the_rotation_keeps_the_scores_and_the_reference_is_the_decoded_values():
    rng = np.random.default_rng(0)
    m = P.hadamard(128, rng)
    assert np.allclose(m @ m.T, np.eye(128), atol=1e-6)
    s = Attn(1, 2, 200, 128, causal=True)
    q, k, v = P.fp32_inputs(rng, s)
    inp = P.prepare_fp8(q, k, v, np.random.default_rng(1))
    Q, K, V = P.decoded(**{n: inp[n] for n in ("q", "k", "vt", "qd", "kd", "vd")})
    got = P.flash3_fp8.reference(**inp, causal=1)["o"]
    assert np.array_equal(got, attention_f64(Q, K, V, True))
    # the decoded, rotated values give the unrounded inputs' attention to within FP8's rounding
    assert P.rms_error(got, attention_f64(q, k, v, True)) < P.ACCURACY_BOUND


def test_tolerance_is_the_e4m3_bound():
    rtol, atol = P.fp8_tolerance(Attn(1, 1, 10, 128, Sk=4096))
    assert rtol == 2.0 ** -7
    delta = 2.0 ** -13 * (1.07 * math.sqrt(3 * 128)) ** 2 * 1.4426950408889634 / math.sqrt(128)
    assert math.isclose(atol, 2.0 * (2.0 ** (2 * delta) * (1 + 2.0 ** -4) - 1 + 4096 * 2.0 ** -18))
    assert 2.0 * 2.0 ** -4 < atol - 2.0 * 4096 * 2.0 ** -18 < 2.0 * 0.08   # P's rounding, a little for the scores
    assert P.ACCURACY_BOUND == pytest.approx(0.0722, abs=1e-4)
    with pytest.raises(ValueError, match="peaked"):
        P.fp32_inputs(np.random.default_rng(0), Attn(1, 1, 8, 128, kind="large"))


def _worst_case_error(q, k, v, eps: float) -> np.ndarray:
    """|ΔO| when every score moves by ε·Σ|q_i k_i| (log2 units) and every P by 2^-4, each in the
    direction that pulls O[col] furthest from the exact (non-causal) value, per row and column."""
    l2 = (q @ k.T) * 1.4426950408889634 / math.sqrt(128)
    p = np.exp2(l2 - l2.max(-1, keepdims=True))
    o = p @ v / p.sum(-1, keepdims=True)
    delta = eps * (np.abs(q)[:, None, :] * np.abs(k)[None, :, :]).sum(-1) * 1.4426950408889634 / math.sqrt(128)
    worst = np.zeros_like(o)
    for sign in (1.0, -1.0):                                     # push O[col] up, then down
        up = sign * (v[None, :, :] - o[:, None, :]) > 0          # (row, key, col): a larger weight helps
        w = p[:, :, None] * np.exp2(np.where(up, delta[:, :, None], -delta[:, :, None]))
        num = (w * np.where(up, 1 + 2.0 ** -4, 1 - 2.0 ** -4) * v[None, :, :]).sum(1)
        worst = np.maximum(worst, np.abs(num / w.sum(1) - o))
    return worst


def test_tolerance_covers_the_tensor_cores_addition():
    # The judge's H100 run (2026-11-25): chapter 04's "large" inputs (integers in ±16), seed 1773799448,
    # one output 0.137 off where P's rounding alone allows 0.133: two keys 0.18 apart in log2 units.
    # The score error ε·Σ|q k| with ε = 2^-13 reaches that much; the P-only bound did not.
    s = Attn(2, 3, 1031, 128, causal=True, kind="large")
    rng = np.random.default_rng(1773799448)
    Q, K, V = P.decoded(**P.prepare_fp8(*P._qkv(rng, s), rng))
    row = 847
    err = _worst_case_error(Q[0, 0, row:row + 1], K[0, 0, :row + 1], V[0, 0, :row + 1], 2.0 ** -13)[0, 87]
    assert err > 0.137 > 2.0 * (2.0 ** -4 + 1031 * 2.0 ** -18)
    # the problem's own kinds: the worst case stays inside the tolerance
    for kind in ("peaked", "", "growing", "outlier"):
        s = Attn(1, 1, 192, 128, kind=kind)
        rng = np.random.default_rng(3)
        Q, K, V = P.decoded(**P.prepare_fp8(*P.fp32_inputs(rng, s), rng))
        rtol, atol = P.fp8_tolerance(s)
        assert _worst_case_error(Q[0, 0], K[0, 0], V[0, 0], 2.0 ** -13).max() < atol, kind


def test_problem_sizes_and_peer():
    f = P.flash3_fp8
    assert (f.arch, f.target, f.floor, f.bench_size) == ("sm_90a", 0.78, 0.078, Attn(4, 32, 4096, 128))
    assert f.peer.label == "SDPA cudnn bf16" and P.flash3_fp8_causal.peer.label == "SDPA cudnn bf16 causal"
    for sizes in (f.sizes, f.hidden_sizes):
        assert {s.d for s in sizes} == {128}
        assert any(s.keys % 16 and s.keys > 128 for s in sizes)                   # NaN padding inside a tile
        assert any(s.kind == "peaked" for s in sizes) and any(s.kind == "outlier" for s in sizes)
        assert any(s.kind == "growing" and s.keys > 1000 for s in sizes)
        assert any(s.keys == 0 for s in sizes) and any(s.causal and s.S % 128 for s in sizes)


def _emulated_error(rotate: bool, factor: float) -> float:
    """NumPy: attention of FP8-rounded (rotated or not) inputs, P rounded to e4m3 as the kernel does,
    against float64 of the unrounded inputs."""
    from grader.problems.hopper_fp8 import e4m3_encode

    rng = np.random.default_rng(0)
    s = Attn(1, 2, 256, 128)
    q, k, v = P._outlier_qkv(rng, s, factor)
    exact = attention_f64(q, k, v, False)
    Q, K, V = P.decoded(**P.prepare_fp8(q, k, v, rng, rotate=rotate))
    sc = Q @ K.transpose(0, 1, 3, 2) / math.sqrt(128)
    p = np.exp2((sc - sc.max(-1, keepdims=True)) * 1.4426950408889634 + 8)
    l = p.sum(-1, keepdims=True)
    pq = e4m3_decode(e4m3_encode(p.astype(np.float32))).astype(np.float64)
    return P.rms_error(pq @ V / l, exact)


def test_the_rotation_is_what_keeps_outlier_inputs_within_the_bound():
    assert _emulated_error(True, 1.0) < P.ACCURACY_BOUND
    assert _emulated_error(True, 30.0) < P.ACCURACY_BOUND
    assert _emulated_error(False, 30.0) > P.ACCURACY_BOUND            # the preparation without the rotation


def _kernel():
    return SimpleNamespace(name=KERNEL, launch_shape=LaunchShape(384, 148480, 128, 128, 128, 4, 0))


def test_the_launch_refuses_what_it_cannot_run():
    launch = P.flash3_fp8_launch(_kernel())
    t = lambda *shape: SimpleNamespace(shape=shape)  # noqa: E731
    with pytest.raises(ValueError, match="head dimension 64"):
        launch(t(1, 2, 100, 64), t(1, 2, 100, 64), t(1, 2, 64, 112), None, None, None, False, None)
    with pytest.raises(ValueError, match="as many queries as keys"):
        launch(t(1, 2, 100, 128), t(1, 2, 99, 128), t(1, 2, 128, 112), None, None, None, True, None)
    with pytest.raises(ValueError, match="evenly"):
        launch(t(1, 6, 100, 128), t(1, 4, 100, 128), t(1, 4, 128, 112), None, None, None, False, None)
    with pytest.raises(ValueError, match="vt must be"):
        launch(t(1, 2, 100, 128), t(1, 2, 100, 128), t(1, 2, 100, 128), None, None, None, False, None)


# ---------------------------------------------------------------- compiled here (no GPU)
@pytest.fixture(scope="module")
def module():
    return compile_cell(reference(), "f8_all")


def test_every_switch_compiles_clean(module):
    import re

    from grader.cuda import sass

    assert set(module.kernel_names) == {KERNEL, *SWITCHES}
    for k in module.kernel_names:
        sass.require(module, k, present=["QGMMA.64x128x32.F32.E4M3.E4M3", "UTMALDG.3D", "F2FP", "PRMT"],
                     absent=["LDL", "STL", "HGMMA", "HMMA"], no_spills=True)
        assert re.search(r"QGMMA\.64x128x32\.F32\.E4M3\.E4M3 R\d+, R\d+, gdesc", sass.disassemble(module, k))
        sass.require_wgmma(module, k, max_pending=1)
        assert sass.require_setmaxnreg(module, k, threads=384)["registers"] == 168
        bn = module.launch_shape(k).tile_n
        assert _ex2_under_pv(sass.disassemble(module, k)) >= bn // 2, k   # a tile's BN / 2 ex2 run while P V does
    s = module.launch_shape(KERNEL)
    assert (s.threads, s.tile_m, s.tile_n, s.tile_k, s.stages) == (384, 128, 192, 128, 4)
    assert s.smem_bytes == 128 * 128 + 2 * 4 * 192 * 128 + 1024 <= 227 * 1024
    assert [(module.launch_shape(k).tile_n, module.launch_shape(k).stages) for k in SWITCHES[2:]] == [(192, 3), (128, 5)]


def test_the_wait_after_the_softmax_overlaps_little():
    """The obvious form (P V_{j-1} waited for right after S_j's softmax): ptxas hoists the wait into
    the softmax's first exponentials -- at most a quarter of the tile's 96 under P V (17 with NVRTC 13.0
    and 13.5; 0 in the cell's first form), though the PTX has all of them there. The SASS test above
    tells the two apart."""
    from grader.cuda import sass

    old = compile_cell(W.cpp_variant(reference(), W.WAIT_AFTER_SOFTMAX), "f8_wait_after", KERNEL)
    text = sass.disassemble(old, KERNEL)
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in text and _ex2_under_pv(text) <= 192 // 8


def test_rubric_passes_for_the_reference_and_fails_for_the_stub(module):
    from grader.cuda.sass import RubricFailed

    run_rubric(CH, NB, RUBRIC, f8=module)
    stub = cell_source(ROOT / "course" / CH / NB, CELL)
    assert stub.count("// YOUR CODE HERE") == 3 and "BEGIN SOLUTION" not in stub
    with pytest.raises(RubricFailed, match="not implemented yet"):
        run_rubric(CH, NB, RUBRIC, f8=compile_cell(stub, "f8_stub", KERNEL))


@pytest.mark.parametrize("mistake", sorted(W.ON_GPU))
def test_gpu_mistakes_apply_compile_and_pass_the_rubric(mistake):
    """The mistakes compile and look right to the rubric: only running them shows them."""
    run_rubric(CH, NB, RUBRIC, f8=compile_cell(W.cpp_variant(reference(), W.FP8_MISTAKES[mistake]), f"f8_{mistake}", KERNEL))


# ---------------------------------------------------------------- on a GPU
@pytest.mark.gpu
def test_reference_passes_on_a_gpu():
    ns = run_cells(solution(CH, NB), ["setup_flash3_fp8", "v_flash3_fp8", "launch_flash3_fp8"])
    check(ns["launch_f8"], P.flash3_fp8, quiet=True)
    check(ns["launch_f8"], P.flash3_fp8, hidden=True, quiet=True)


@pytest.mark.gpu
def test_accuracy_on_a_gpu():
    ns = run_cells(solution(CH, NB), ["setup_flash3_fp8", "v_flash3_fp8", "launch_flash3_fp8"])
    acc = P.accuracy(ns["launch_f8"], factors=(1.0, 30.0))
    assert acc[("FP8 with the rotation", 30.0)] <= P.ACCURACY_BOUND < acc[("FP8 without the rotation", 30.0)]


@pytest.mark.gpu
@pytest.mark.parametrize("mistake", sorted(W.ON_GPU))
def test_mistakes_are_caught_in_their_own_process(mistake):
    line = check_in_own_process(f"""
        from grader.problems import flash3_fp8 as P
        from grader.problems.attention import Attn
        from tests.test_ch05_flash3_fp8 import W, compile_cell, reference
        m = compile_cell(W.cpp_variant(reference(), W.FP8_MISTAKES[{mistake!r}]), "wrong", W.KERNEL)
        launch = P.flash3_fp8_launch(m[W.KERNEL])
    """, """
        check(launch, P.flash3_fp8, sizes=[Attn(1, 2, 1000, 128, kind="peaked"), Attn(2, 3, 1000, 128)], quiet=True)
    """)
    print(mistake, line)
    assert f"{P.flash3_fp8.name} failed at B=" in line, line
