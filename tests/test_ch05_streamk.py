"""Chapter 05, lesson 04 (schedules): a data-parallel + Stream-K GEMM and a fused bias + GELU epilogue.

On the CPU: the plan (which tiles are whole; never more split tiles than the
workspace's slots) and the wave arithmetic of the lesson's shape; the
workspace bound (the kernel's workspace fits, a split-K with an fp32 C per split does not); the
problems (shapes TMA can describe, split tiles with empty and two-tile ranges, the peer); the fused
reference and tolerance (an fp32 emulation passes, a missing bias or a bias from the wrong column
fails); the launch refuses other shapes and tiles; the cell compiles for sm_90a (both epilogues, no
spills, setmaxnreg in effect); the rubric passes for the reference and fails for the released stub
and for setmaxnreg without launch bounds; every mistake of tests/wrong/ch05_streamk.py applies and
compiles. Marked ``gpu``: the reference passes at every visible and hidden shape (both problems),
and each value mistake is caught in a process of its own.
"""
from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

import grader  # noqa: F401  (simulator first)
from grader.compare import compare
from grader.cuda.launch import LaunchShape
from grader.formats import bf16_to_f64, f32_to_bf16
from grader.notebooks import cell_source, run_cells
from grader.problems import hopper_streamk as P
from grader.problems.gemm import Shape
from tests.cells import check_in_own_process, compile_cell, run_rubric
from tests.conftest import ROOT, solution
from tests.wrong import ch05_streamk as W

CH, NB, CELL, RUBRIC, KERNEL, FUSED = W.CHAPTER, W.NOTEBOOK, W.CELL, W.RUBRIC, W.KERNEL, W.FUSED


def reference() -> str:
    return cell_source(solution(CH, NB), CELL)


def _compile(source: str, name: str = "sk", only: str | None = KERNEL):
    return compile_cell(source, name, only)


def _rubric(module):
    run_rubric(CH, NB, RUBRIC, sk=module)


def _tiles(s):
    return -(-s.M // 128) * -(-s.N // 256)


# ---------------------------------------------------------------- the schedule
def test_plan_splits_a_mostly_empty_last_wave_only():
    assert P.streamk_plan(144, 128, 132) == 132                 # 132 + 12: the 12 are split
    assert P.streamk_plan(512, 64, 132) == 512                  # 3·132 + 116: the last wave is 88% full
    assert P.streamk_plan(132, 64, 132) == 132 and P.streamk_plan(5, 1, 132) == 5    # full waves; one k step
    assert P.streamk_plan(512, 64, 132, "tail") == 396 and P.streamk_plan(144, 128, 132, "all") == 12
    assert P.streamk_plan(144, 128, 132, "none") == 144 and P.streamk_plan(1, 129, 132) == 0
    assert P.streamk_plan(100, 64, 132, "all") == 0                   # never more split tiles than CTAs (slots)
    for tiles in range(1, 700):
        for split in ("auto", "tail", "all", "none"):
            assert 0 <= tiles - P.streamk_plan(tiles, 64, 132, split) <= 132
    with pytest.raises(ValueError):
        P.streamk_plan(144, 128, 132, "sometimes")


def test_wave_shape_is_quantized_and_its_split_ranges_cover_every_iteration():
    assert _tiles(P.WAVE_SHAPE) == 132 + 4 and P.WAVE_SHAPE.K == 16384
    assert _tiles(P.WAVE_SHAPE_2) == 132 + 12 and P.WAVE_SHAPE_2 in P.STREAMK_SIZES
    empty = spans = False
    for shape in P.STREAMK_SIZES + P.STREAMK_HIDDEN:
        tiles, k_tiles = _tiles(shape), -(-shape.K // 64)
        iters = (tiles - P.streamk_plan(tiles, k_tiles, 132)) * k_tiles
        begin = [c * iters // 132 for c in range(133)]
        assert begin[0] == 0 and begin[-1] == iters and all(b <= e for b, e in zip(begin, begin[1:]))
        if shape in P.STREAMK_SIZES and iters:
            # split tiles with empty ranges (fewer iterations than CTAs), and ranges spanning two tiles
            empty |= any(b == e for b, e in zip(begin, begin[1:]))
            spans |= any(b // k_tiles != (e - 1) // k_tiles for b, e in zip(begin, begin[1:]) if e > b)
    assert empty and spans


def test_workspace_fits_the_bound_and_a_split_k_copy_of_c_does_not():
    bound = P.streamk_scratch_bytes(P.WAVE_SHAPE)
    assert 132 * (128 * 256 * 4 + 4) <= bound <= 21 * 2**20
    s = P.WAVE_SHAPE
    assert 33 * s.M * s.N * 4 > bound                             # 33 splits, an fp32 C each
    assert P.streamk_gemm.max_scratch_bytes is P.streamk_scratch_bytes


# ---------------------------------------------------------------- the problems
def test_problems_shapes_peers_and_targets():
    from grader.problems import hopper as H

    sk, fu = P.streamk_gemm, P.fused_gemm
    assert sk.reference is H.ws_gemm.reference and sk.peer.label == "cuBLAS bf16" and sk.bench_size == P.WAVE_SHAPE
    assert (sk.target, sk.floor, fu.target, fu.floor) == (0.60, 0.30, 0.60, 0.06)
    assert fu.peer.label == "cuBLAS, then torch's bias + GELU" and len(fu.peer.choices) == 2
    for s in sk.sizes + sk.hidden_sizes + fu.sizes + fu.hidden_sizes:
        assert H.tma_gemm_shape_ok(s), s
    assert not set(sk.sizes) & set(sk.hidden_sizes) and not set(fu.sizes) & set(fu.hidden_sizes)
    assert any(s.K >= 8192 for s in fu.sizes) and any(s.M % 128 and s.N % 256 for s in fu.hidden_sizes)


def _emulate_fused(inp, mistake=None):
    """What the kernel computes: fp32 sums, the bias, GELU (tanh) in fp32, bf16 out."""
    a, b, bias = (bf16_to_f64(inp[k]).astype(np.float32) for k in ("a", "b", "bias"))
    acc = a @ b
    if mistake == "no_bias":
        x = acc
    elif mistake == "bias_of_tile_column":
        x = acc + bias[np.arange(acc.shape[1]) % 256][None, :]
    else:
        x = acc + bias[None, :]
    return f32_to_bf16(P.gelu_tanh(x).astype(np.float32))


@pytest.mark.parametrize("shape", [Shape(130, 520, 256), Shape(40, 264, 2048)])
def test_fused_tolerance_passes_fp32_and_fails_a_missing_or_misplaced_bias(shape):
    p = P.fused_gemm
    inp = p.make_inputs(np.random.default_rng(5), shape)
    want = p.reference(**inp)["c"]
    x = np.linspace(-6, 6, 13)
    assert np.allclose(P.gelu_tanh(x)[[0, 6, 12]], [0, 0, 6], atol=1e-6)
    out_dtype = p.outputs(shape, inp)["c"][1]
    rtol, atol = p.tolerances(shape, out_dtype)
    assert compare("c", _emulate_fused(inp), want, rtol, atol, out_dtype) == []
    for mistake in ("no_bias", "bias_of_tile_column"):
        lines = compare("c", _emulate_fused(inp, mistake), want, rtol, atol, out_dtype)
        assert lines and "elements wrong" in lines[0], mistake


def test_the_launch_refuses_shapes_and_tiles_it_cannot_take():
    kernel = SimpleNamespace(name=KERNEL, launch_shape=LaunchShape(384, 230400, 128, 256, 64, 4, 0))
    launch = P.streamk_gemm_launch(kernel)
    with pytest.raises(ValueError, match="multiples of 8"):
        launch(SimpleNamespace(shape=(64, 100)), SimpleNamespace(shape=(100, 64)), None)
    with pytest.raises(ValueError, match="128 × 256"):
        P.streamk_gemm_launch(SimpleNamespace(name="k", launch_shape=LaunchShape(384, 1, 128, 128, 64, 4, 0)))
    with pytest.raises(ValueError, match="TILE_M"):
        P.fused_gemm_launch(SimpleNamespace(name="k", launch_shape=None))


# ---------------------------------------------------------------- compiled here (no GPU)
@pytest.fixture(scope="module")
def module():
    return _compile(reference(), "sk_all", only=None)


def test_both_epilogues_compile_without_spills_and_with_setmaxnreg(module):
    from grader.cuda import sass

    assert set(module.kernel_names) == {KERNEL, FUSED}
    for k in module.kernel_names:
        sass.require(module, k, present=["HGMMA.64x256x16.F32.BF16", "UTMALDG.2D", "UTMASTG.2D"],
                     absent=["LDL", "STL", "HMMA"], no_spills=True)
        assert sass.require_setmaxnreg(module, k, threads=384)["registers"] == 168
    assert sass.opcodes(module, FUSED, full=True)["MUFU.TANH"] >= 128          # GELU's tanh, per element
    assert "MUFU.TANH" not in sass.opcodes(module, KERNEL, full=True)
    shape = module.launch_shape(KERNEL)
    assert (shape.threads, shape.tile_m, shape.tile_n, shape.tile_k, shape.stages) == (384, 128, 256, 64, 4)
    assert shape.smem_bytes == 4 * 48 * 1024 + 2 * 16 * 1024 + 1024 <= 227 * 1024


def test_rubric_passes_for_the_reference_and_fails_for_the_stub(module):
    from grader.cuda.sass import RubricFailed

    _rubric(module)
    stub = cell_source(ROOT / "course" / CH / NB, CELL)
    assert stub.count("// YOUR CODE HERE") == 4 and "BEGIN SOLUTION" not in stub
    with pytest.raises(RubricFailed):
        _rubric(_compile(stub, "sk_stub"))


@pytest.mark.parametrize("mistake", sorted(W.RUBRIC_CATCHES))
def test_rubric_catches(mistake):
    from grader.cuda.sass import RubricFailed

    with pytest.raises(RubricFailed, match=re.escape(W.RUBRIC_CATCHES[mistake])):
        _rubric(_compile(W.cpp_variant(reference(), W.STREAMK_MISTAKES[mistake]), f"wrong_{mistake}"))


@pytest.mark.parametrize("mistake", sorted(W.VALUE_CATCHES))
def test_value_mistakes_apply_and_compile(mistake):
    """Only running them shows them (below, on a GPU; dev/ch05_hopper/streamk_gpu.py). The rubric may
    or may not pass them (without the wait, ptxas schedules the slot's loads earlier and spills)."""
    which = FUSED if W.VALUE_CATCHES[mistake][0] == "fused" else KERNEL
    module = _compile(W.cpp_variant(reference(), W.STREAMK_MISTAKES[mistake]), f"wrong_{mistake}", only=which)
    assert module.kernel_names == [which]


# ---------------------------------------------------------------- on a GPU
@pytest.mark.gpu
def test_reference_passes_on_a_gpu():
    from grader.check import check

    ns = run_cells(solution(CH, NB), ["setup_sk", "v_sk", "launch_sk", "launch_fused"])
    for launch, problem in ((ns["launch_sk"], P.streamk_gemm), (ns["launch_fused"], P.fused_gemm)):
        check(launch, problem, quiet=True)
        check(launch, problem, hidden=True, quiet=True)


@pytest.mark.gpu
@pytest.mark.parametrize("mistake", sorted(W.VALUE_CATCHES))
def test_value_mistakes_are_caught_in_their_own_process(mistake):
    problem, shape = W.VALUE_CATCHES[mistake]
    line = check_in_own_process(f"""
        from grader.problems import hopper_streamk as P
        from tests.test_ch05_streamk import W, _compile, reference
        fused = {problem!r} == "fused"
        which = W.FUSED if fused else W.KERNEL
        module = _compile(W.cpp_variant(reference(), W.STREAMK_MISTAKES[{mistake!r}]), "wrong", only=which)
        launch = (P.fused_gemm_launch if fused else P.streamk_gemm_launch)(module[which])
    """, f"""
        for _ in range(3):              # a race may be lucky once
            check(launch, P.fused_gemm if fused else P.streamk_gemm, sizes=[P.Shape{shape}], quiet=True)
    """)
    print(mistake, line)
    assert "failed at shape" in line, line
    if mistake in W.MUST_TRAP:
        assert "did not finish" not in line, line
