"""Chapter 05, lesson 06 (05.06): an FP8 e4m3 GEMM with DeepSeek-style block scaling.

On the CPU: e4m3 in NumPy (every code round-trips, ties to even, saturation at 448); the 1 × 128 and
128 × 128 quantizations (scale shapes, each block's largest element on 448, dequantization within
e4m3's rounding); the problem (shapes block scaling and TMA allow, K a multiple of 128; the reference
is the product of the dequantized operands; the tolerance passes an fp32 block-by-block computation
rounded to bf16 and fails the four scaling mistakes, emulated in NumPy); the scales k-block-major; the
launch refuses other shapes and scale layouts; the peer's arguments; the cell compiles for sm_90a (QGMMA, no spills, setmaxnreg in effect);
the rubric passes for the reference and fails for the released stub and for setmaxnreg without launch
bounds; every mistake of tests/wrong/ch05_fp8.py applies and compiles. Marked ``gpu``: the reference
passes at every visible and hidden shape, and each value mistake is caught at its shape.
"""
from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

import grader  # noqa: F401  (simulator first)
from grader.compare import compare
from grader.cuda import sass
from grader.cuda.launch import LaunchShape
from grader.formats import f32_to_bf16
from grader.notebooks import cell_source, run_cells
from grader.problems import hopper_fp8 as F
from grader.problems.gemm import Shape
from tests.cells import compile_cell, run_rubric
from tests.conftest import ROOT, solution
from tests.wrong import ch05_fp8 as W

CH, NB, CELL, RUBRIC, KERNEL = W.CHAPTER, W.NOTEBOOK, W.CELL, W.RUBRIC, W.KERNEL
TURNS = "fp8_gemm<Fp8<128, 192, 4, 1, 8, true>>"    # the cell's other configurations: the consumers' turns,
CLUSTERS = "fp8_gemm<Fp8<128, 192, 4, 2, 8>>"      # clusters of 2,
SMALL = "fp8_gemm<Fp8<128, 128, 5, 1, 8>>"          # 128 × 128 tiles


def reference() -> str:
    return cell_source(solution(CH, NB), CELL)


def _compile(source: str, name: str = "fp8", only: str | None = KERNEL):
    return compile_cell(source, name, only)


def _rubric(module):
    run_rubric(CH, NB, RUBRIC, fp8=module)


# ---------------------------------------------------------------- e4m3 and the scalings
def test_e4m3_codes_round_trip_and_round_to_nearest_even():
    codes = np.arange(256, dtype=np.uint8)
    vals = F.e4m3_decode(codes)
    finite = np.isfinite(vals)
    assert (~finite).sum() == 2 and np.nanmax(vals) == 448 and vals[1] == 2.0 ** -9 and vals[8] == 2.0 ** -6
    back = F.e4m3_encode(vals[finite])
    assert np.array_equal(back[codes[finite] != 0x80], codes[finite][codes[finite] != 0x80])   # -0 encodes as 0x80 or 0
    # halfway between 1.125 (m = 1) and 1.25 (m = 2): even mantissa; between 2^-9 and 2^-8: even; past 448: 448
    x = np.array([1.1875, -1.1875, 1.5 * 2.0 ** -9, 1000.0, -1e9, 0.0], np.float32)
    assert F.e4m3_decode(F.e4m3_encode(x)).tolist() == [1.25, -1.25, 2.0 ** -8, 448.0, -448.0, 0.0]
    rng = np.random.default_rng(1)
    y = rng.uniform(-448, 448, 10_000).astype(np.float32)
    err = np.abs(F.e4m3_decode(F.e4m3_encode(y)) - y)
    assert np.all(err <= np.maximum(np.abs(y) * 2.0 ** -4, 2.0 ** -10) + 1e-7)   # half a step: 2^-4 relative


def test_block_scalings_shapes_and_accuracy():
    rng = np.random.default_rng(2)
    a, b = F.fp8_data(rng, Shape(70, 200, 384))
    qa, sa = F.quantize_rows(a)
    qb, sb = F.quantize_blocks(b)
    assert qa.shape == (70, 384) and sa.shape == (70, 3) and qb.shape == (200, 384) and sb.shape == (2, 3)
    assert qa.dtype == qb.dtype == np.uint8 and sa.dtype == sb.dtype == np.float32
    # each block's largest magnitude lands on 448
    assert np.all(np.abs(F.e4m3_decode(qa)).reshape(70, 3, 128).max(axis=2) == 448)
    assert np.abs(F.e4m3_decode(qb)).max() == 448
    da, db = F.dequantize_rows(qa, sa), F.dequantize_blocks(qb, sb)
    assert np.all(np.abs(da - a) <= np.abs(a) * 2.0 ** -4 + np.repeat(sa, 128, axis=1) * 2.0 ** -10 + 1e-12)
    assert np.all(np.abs(db - b) <= np.abs(b) * 2.0 ** -4 + np.repeat(np.repeat(sb, 128, 0)[:200], 128, 1) * 2.0 ** -10)
    with pytest.raises(ValueError, match="multiple of 128"):
        F.fp8_data(rng, Shape(8, 8, 100))


def test_per_tensor_scaling_loses_ordinary_rows_next_to_outliers():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 256)).astype(np.float32)
    a[5] *= 1e6
    qt, st = F.quantize_tensor(a)
    lost = F.e4m3_decode(qt[:5]) * st
    kept = F.dequantize_rows(*F.quantize_rows(a))[:5]
    assert np.mean(lost == 0) > 0.9                                      # flushed to zero by the outlier's scale
    assert np.max(np.abs(kept - a[:5]) / np.abs(a[:5]).max()) < 2.0 ** -4


# ---------------------------------------------------------------- the problem
def test_problem_shapes_peer_and_targets():
    p = F.fp8_gemm
    assert (p.target, p.floor, p.arch, p.arrays, p.simulator) == (0.60, 0.06, "sm_90a", "torch", False)
    assert p.bench_size == Shape(4096, 4096, 4096) and p.peer.label == "cuBLAS fp8 (tensorwise scales)"
    for s in p.sizes + p.hidden_sizes:
        assert F.fp8_shape_ok(s), s
    assert any(s.M % 128 and s.N % 128 for s in p.sizes) and any(s.M % 128 and s.N % 128 for s in p.hidden_sizes)
    assert any(s.K >= 8192 for s in p.sizes) and any(s.K >= 8192 for s in p.hidden_sizes)
    assert any(-(-s.M // 128) * -(-s.N // 128) > 132 for s in p.sizes)
    assert not set(p.sizes) & set(p.hidden_sizes)


def test_scales_come_k_block_major_padded_to_16_bytes():
    """A k tile's scales are one row of each: what a TMA box loads with the tile (rows 16-byte multiples)."""
    inp = F.fp8_gemm.make_inputs(np.random.default_rng(1), Shape(70, 200, 384))
    assert inp["sa"].shape == (3, 72) and inp["sb"].shape == (3, 4)
    assert not inp["sa"][:, 70:].any() and not inp["sb"][:, 2:].any() and (inp["sa"][:, :70] > 0).all()
    s = np.random.default_rng(2).random((70, 3)).astype(np.float32)
    assert np.array_equal(F.from_kb_major(F.kb_major(s), 70), s) and F.kb_major(s)[1, 5] == s[5, 1]


def _emulate(inp, mistake: str | None = None) -> np.ndarray:
    """What a kernel computes (fp32 partial sums per 128-wide k block, scaled, summed in fp32, bf16 out),
    right or with one of tests/wrong/ch05_fp8.py's mistakes."""
    A, B = F.e4m3_decode(inp["a"]), F.e4m3_decode(inp["b"])
    M, K = A.shape
    N = B.shape[0]
    sa, sb = F.from_kb_major(inp["sa"], M), F.from_kb_major(inp["sb"], -(-N // 128))   # (M, K/128), (⌈N/128⌉, K/128)
    nb = np.arange(N) // 128
    first_row, first_block = np.arange(M) // 128 * 128, np.arange(N) // 192 * 192 // 128   # of a 128 × 192 tile
    acc, total = np.zeros((M, N), np.float32), np.zeros((M, N), np.float32)
    for kb in range(K // 128):
        part = A[:, kb * 128:(kb + 1) * 128] @ B[:, kb * 128:(kb + 1) * 128].T
        if mistake == "per_tensor_scales":                         # the tile's first row's and block's
            acc += part * sa[first_row, kb][:, None] * sb[first_block, kb][None, :]
        elif mistake == "promotion_skipped":
            total += part
            acc = total * sa[:, kb:kb + 1] * sb[nb, kb][None, :]
        elif mistake == "b_scale_wrong_block":
            acc += part * sa[:, kb:kb + 1] * sb[nb, max(kb - 1, 0)][None, :]
        elif mistake == "b_scale_tile_block":                       # a 192-column tile's first block
            acc += part * sa[:, kb:kb + 1] * sb[first_block, kb][None, :]
        else:
            acc += part * sa[:, kb:kb + 1] * sb[nb, kb][None, :]
    return f32_to_bf16(acc)


@pytest.mark.parametrize("shape", [Shape(130, 136, 256), Shape(40, 264, 2048)])
def test_tolerance_passes_fp32_blocks_and_fails_each_scaling_mistake(shape):
    p = F.fp8_gemm
    rng = np.random.default_rng(4)
    inp = p.make_inputs(rng, shape)
    want = p.reference(**inp)["c"]
    A = F.dequantize_rows(inp["a"], F.from_kb_major(inp["sa"], shape.M)).astype(np.float64)
    B = F.dequantize_blocks(inp["b"], F.from_kb_major(inp["sb"], -(-shape.N // 128))).astype(np.float64)
    assert np.allclose(want, A @ B.T)
    out_dtype = p.outputs(shape, inp)["c"][1]
    rtol, atol = p.tolerances(shape, out_dtype)
    assert compare("c", _emulate(inp), want, rtol, atol, out_dtype) == []
    for mistake in W.VALUE_CATCHES:
        lines = compare("c", _emulate(inp, mistake), want, rtol, atol, out_dtype)
        assert lines and "elements wrong" in lines[0], mistake


def test_the_launch_refuses_shapes_block_scaling_or_tma_cannot_take():
    kernel = SimpleNamespace(name=KERNEL, launch_shape=LaunchShape(384, 230400, 128, 128, 128, 6, 2))
    launch = F.fp8_gemm_launch(kernel)
    with pytest.raises(ValueError, match="multiple of 128"):
        launch(SimpleNamespace(shape=(64, 100)), SimpleNamespace(shape=(64, 100)), None, None, None)
    with pytest.raises(ValueError, match="N of 8"):
        launch(SimpleNamespace(shape=(64, 128)), SimpleNamespace(shape=(63, 128)), None, None, None)
    with pytest.raises(ValueError, match="TILE_M"):
        F.fp8_gemm_launch(SimpleNamespace(name="k", launch_shape=None))
    # the scales must come k-block-major, rows padded to 4: (K/128, M₄) and (K/128, ⌈N/128⌉₄)
    a, b = SimpleNamespace(shape=(70, 256)), SimpleNamespace(shape=(200, 256))
    with pytest.raises(ValueError, match=r"sa must be k-block-major, 2 × 72"):
        launch(a, b, SimpleNamespace(shape=(70, 2)), SimpleNamespace(shape=(2, 4)), None)
    with pytest.raises(ValueError, match=r"sb must be k-block-major, 2 × 4"):
        launch(a, b, SimpleNamespace(shape=(2, 72)), SimpleNamespace(shape=(2, 2)), None)


def test_scaled_mm_peer_and_fp8_tensor_maps():
    from grader import peers
    from grader.cuda.tma import _torch_dtype_to_numpy

    assert peers.scaled_mm("rowwise").label == "cuBLAS fp8 (rowwise scales)"
    assert peers.scaled_mm("blockwise").label == "cuBLAS fp8 (blockwise scales)"
    with pytest.raises(ValueError):
        peers.scaled_mm("block")
    assert _torch_dtype_to_numpy(SimpleNamespace(dtype="torch.float8_e4m3fn")) == np.dtype(np.uint8)


def test_blockwise_scale_layouts_for_scaled_mm():
    """The problem's block scales in the layouts torch._scaled_mm takes on Hopper (checked against
    cuBLAS's output on an H100 by dev/ch05_hopper/fp8_cublas_block.py check, in git at 01311d4): sa
    M-contiguous, sb as (L4, N/128) with K/128 contiguous and zero-padded to a multiple of 4."""
    torch = pytest.importorskip("torch")
    from grader import peers

    sa = torch.arange(6 * 5, dtype=torch.float32).reshape(6, 5)          # M = 6, K/128 = 5
    sb = torch.arange(3 * 5, dtype=torch.float32).reshape(3, 5) + 100    # N/128 = 3
    sa_kb = torch.from_numpy(F.kb_major(sa.numpy()))                      # the problem's layouts: (5, 8), (5, 4)
    sb_kb = torch.from_numpy(F.kb_major(sb.numpy()))
    a, b = peers.blockwise_scales(sa_kb, sb_kb, 6, 3)
    assert a.shape == (6, 5) and a.stride() == (1, 6) and torch.equal(a, sa)
    assert b.shape == (8, 3) and b.stride() == (1, 8)
    assert torch.equal(b[:5], sb.t()) and not b[5:].any()


# ---------------------------------------------------------------- compiled here (no GPU)
@pytest.fixture(scope="module")
def module():
    return _compile(reference(), "fp8_all", only=None)


def test_every_configuration_compiles_to_qgmma_without_spills(module):
    assert set(module.kernel_names) == {KERNEL, TURNS, CLUSTERS, SMALL}
    for k in module.kernel_names:
        n = 128 if k == SMALL else 192
        sass.require(module, k, present=[f"QGMMA.64x{n}x32.F32.E4M3.E4M3", "UTMALDG.2D", "UTMASTG.2D"],
                     absent=["HGMMA", "LDG", "LDL", "STL"], no_spills=True)     # the scales come by TMA too
        assert sass.require_setmaxnreg(module, k, threads=384)["registers"] == 168
    ops = sass.opcodes(module, KERNEL, full=True)
    assert ops["QGMMA.64x192x32.F32.E4M3.E4M3"] == 4 and ops["UTMALDG.2D.MULTICAST"] == 0
    assert sass.opcodes(module, CLUSTERS, full=True)["UTMALDG.2D.MULTICAST"] >= 1
    # the reference's consumers issue when ready; with turns, bar.arrive on the other's barrier (the
    # first turn, then after each k tile)
    assert ops["BAR.ARV"] == 0 and sass.opcodes(module, TURNS, full=True)["BAR.ARV"] == 2
    # a 64 × 192 partial and a 64 × 192 fp32 sum: 192 registers, past the 168 at entry -- used, unspilled
    used = {int(r) for r in re.findall(r"\bR(\d+)\b", sass.disassemble(module, KERNEL))}
    assert 192 < max(used) + 1 <= 232
    shape = module.launch_shape(KERNEL)
    assert (shape.threads, shape.tile_m, shape.tile_n, shape.tile_k, shape.stages, shape.cluster) == (384, 128, 192, 128, 4, 1)
    assert shape.smem_bytes == 4 * 40 * 1024 + 2 * 16 * 1024 + 1024
    # and the scales' slots (static shared memory): within the 227 KiB a block may have, 128 × 128's 5 stages too
    for k in module.kernel_names:
        assert module.launch_shape(k).smem_bytes + module.resources[k]["smem"] <= 227 * 1024, k


def _k_loop(module, kernel=KERNEL) -> list[str]:
    """The consumers' k loop in the SASS: from the target of the branch that closes it (right after
    the last promotion FFMA) to that branch."""
    lines = sass.disassemble(module, kernel).splitlines()
    last = max(i for i, ln in enumerate(lines) if "FFMA" in ln)
    end = next(i for i in range(last, len(lines)) if re.search(r"\bBRA\b", lines[i]))
    top = "/*" + re.search(r"BRA (?:`\()?\S*?0x([0-9a-f]+)", lines[end]).group(1).rjust(4, "0")
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith(top))
    return lines[start:end + 1]


def test_the_descriptors_are_made_ahead_off_the_k_loops_critical_path(module):
    """The cell's opaque(): the next slot's wgmma descriptors are made while a k tile's wgmmas run, so
    nothing rebuilds them from the shared window's base (S2UR SR_CgaCtaId) between a promotion and the
    next k tile's first wgmma. (The cell before 2026-11-25, dev/ch05_hopper/fp8_variants/cell_v1.cu at
    commit 77d322b, rebuilt them there without opaque(); today's cell, its scales by TMA, compiled to the
    same k-loop head without it under NVRTC 13.5 on 2026-11-28.)"""
    def before_first_wgmma(loop):        # the loop's top, where a promotion ends, to its first wgmma
        return loop[:next(i for i, ln in enumerate(loop) if "QGMMA" in ln)]

    loop = _k_loop(module)
    assert sum("QGMMA" in ln for ln in loop) == 4 and sum("FFMA" in ln for ln in loop) == 96
    rebuilds = re.compile(r"\bS2UR\b.*SR_CgaCtaId")   # (the scales' slot addresses, made under the wgmmas, have one)
    assert not any(rebuilds.search(ln) for ln in before_first_wgmma(loop))


def test_a_trap_inlined_in_the_consumers_spills():
    """The cell's reason for mbar_wait_lean: with the trap of course::mbar_wait_or_trap inlined into
    the consumers' loop, ptxas keeps them within the 168 registers of launch time, and spills."""
    src = reference().replace("mbar_wait_lean(&full[", "course::mbar_wait_or_trap(&full[")
    assert src.count("course::mbar_wait_or_trap(&full[") == 2
    res = _compile(src, "fp8_trap").resources[KERNEL]
    assert res["spill_stores"] > 0 and res["stack"] > 0


def test_rubric_passes_for_the_reference_and_fails_for_the_stub(module):
    from grader.cuda.sass import RubricFailed

    _rubric(module)
    stub = cell_source(ROOT / "course" / CH / NB, CELL)
    assert stub.count("// YOUR CODE HERE") == 2 and "BEGIN SOLUTION" not in stub
    with pytest.raises(RubricFailed):
        _rubric(_compile(stub, "fp8_stub"))


@pytest.mark.parametrize("mistake", sorted(W.RUBRIC_CATCHES))
def test_rubric_catches(mistake):
    from grader.cuda.sass import RubricFailed

    with pytest.raises(RubricFailed, match=re.escape(W.RUBRIC_CATCHES[mistake])):
        _rubric(_compile(W.cpp_variant(reference(), W.FP8_MISTAKES[mistake]), f"wrong_{mistake}"))


@pytest.mark.parametrize("mistake", sorted(W.VALUE_CATCHES))
def test_value_mistakes_apply_compile_and_pass_the_rubric(mistake):
    """Only running them shows them (tests below, on a GPU; and emulated above)."""
    module = _compile(W.cpp_variant(reference(), W.FP8_MISTAKES[mistake]), f"wrong_{mistake}")
    assert module.kernel_names == [KERNEL]
    _rubric(module)


# ---------------------------------------------------------------- on a GPU
@pytest.mark.gpu
def test_reference_passes_on_a_gpu():
    from grader.check import check

    ns = run_cells(solution(CH, NB), ["setup_fp8", "v_fp8", "launch_fp8"])
    check(ns["launch_fp8"], F.fp8_gemm, quiet=True)
    check(ns["launch_fp8"], F.fp8_gemm, hidden=True, quiet=True)


@pytest.mark.gpu
@pytest.mark.parametrize("mistake", sorted(W.VALUE_CATCHES))
def test_value_mistakes_are_caught_on_a_gpu(mistake):
    from grader.check import CheckFailed, check

    module = _compile(W.cpp_variant(reference(), W.FP8_MISTAKES[mistake]), f"wrong_{mistake}")
    with pytest.raises(CheckFailed, match="elements wrong"):
        check(F.fp8_gemm_launch(module[KERNEL]), F.fp8_gemm, sizes=[Shape(*eval(W.VALUE_CATCHES[mistake]))], quiet=True)
