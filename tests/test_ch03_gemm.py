"""Chapter 03 (gemm) on the CPU: Numba references pass in the simulator, wrong kernels are caught,
library calls are refused, compiled-cell lessons are graded 0 without a GPU (no error).

The reference kernels are the solution notebooks' own cells (grader.notebooks).
"""
import grader  # noqa: F401  (simulator first)

import numpy as np
import pytest

from grader.check import CheckFailed, check
from grader.integrity import trust
from grader.problems import gemm as P
from tests.conftest import ROOT as REPO
from tests.conftest import lesson
from tests.wrong import ch03_gemm as W


def load(notebook, cell_ids):
    return lesson("03_gemm", notebook, cell_ids)


S = P.Shape


@pytest.fixture(scope="module")
def l01():
    return load("01_naive_and_tiling.ipynb", ["v1_naive", "v2_tiled"])


@pytest.fixture(scope="module")
def l02():
    return load("02_register_tiling.ipynb", ["v1_1d", "v2_2d", "v3_quads"])


# ---------------------------------------------------------------- references pass
def test_naive_reference(l01):
    check(l01["launch_naive"], P.sgemm, sizes=[S(1, 1, 1), S(9, 20, 33), S(20, 1, 7)], quiet=True)


def test_tiled_reference(l01):
    check(l01["launch_tiled"], P.sgemm, sizes=[S(17, 18, 35), S(1, 17, 5)], quiet=True)


def test_register_tiled_reference(l02):
    check(l02["launch_2d"], P.sgemm, sizes=[S(20, 131, 9), S(129, 3, 17)], quiet=True)


def test_graded_v3_reference_handles_ragged_edges(l02):
    # M, N past one 128 tile, K neither a multiple of BK = 8 nor shorter than one tile
    check(l02["launch_v3"], P.sgemm, sizes=[S(129, 131, 17), S(1, 1, 1), S(3, 17, 9)], quiet=True)


def test_v3_compiles_to_what_the_lesson_says(l02):
    """The lesson's table: v2 scalar LDS and 156 registers; v3 LDS.128 only, 512 FFMA per tile, 128 registers."""
    from grader.cuda import numba_sass

    sig = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
    v2, v3 = numba_sass(l02["sgemm_2d"], sig), numba_sass(l02["sgemm_v3"], sig)
    if v3.error and any(w in v3.error for w in ("NVVM", "nvvm", "ptxas", "cuobjdump")):
        pytest.skip(f"no CUDA toolkit to compile with: {v3.error}")
    assert not v2.error and not v3.error, (v2.error, v3.error)
    assert v2.count("LDS.128") == 0 and v2.count("LDS") == 16 and v2.count("FFMA") == 64
    assert v3.count("LDS.128") == 32 and v3.count("LDS") == 32 and v3.count("FFMA") == 512
    assert v3.launch_bounds == (256, 2) and v3.registers <= 128 and v3.spill_bytes == 0
    assert v2.registers > 128


# ---------------------------------------------------------------- wrong kernels are caught
def _fails(launch, problem, sizes, match):
    with pytest.raises(CheckFailed, match=match):
        check(launch, problem, sizes=sizes, quiet=True)


def test_skipping_the_k_remainder_is_caught():
    check(W.tiled_skips_k_remainder, P.sgemm, sizes=[S(16, 16, 32)], quiet=True)   # K a tile multiple: passes
    _fails(W.tiled_skips_k_remainder, P.sgemm, [S(16, 16, 20)], "elements wrong")
    with pytest.raises(CheckFailed):
        check(W.tiled_skips_k_remainder, P.sgemm, quiet=True)                     # the visible shapes


def test_missing_barrier_is_caught():
    for _ in range(2):   # deterministic: the simulator's race check
        _fails(W.tiled_missing_barrier, P.sgemm, [S(16, 16, 16)], "race")


@pytest.mark.parametrize("mistake", sorted(W.V3_MISTAKES))
def test_graded_v3_mistakes_are_caught_by_the_graded_checks(mistake):
    """The graded cells of lesson 02 (visible, then hidden simulator shapes) catch each mistake."""
    launch = W.register_tiled_v3(mistake)
    with pytest.raises(Exception) as visible:
        check(launch, P.sgemm, quiet=True)
    with pytest.raises(Exception):
        check(launch, P.sgemm, hidden=True, quiet=True)
    if "barrier" in mistake:
        assert "race" in str(visible.value).lower()
    else:
        assert isinstance(visible.value, CheckFailed)


def test_swapped_b_layout_is_caught():
    _fails(W.naive_b_transposed, P.sgemm, [S(5, 7, 3)], "elements wrong")


def test_fp16_accumulation_fails_the_long_k_case():
    # the lesson's kernel is compiled C++; a Numba stand-in with the same mistake runs in the simulator
    hgemm = P.hgemm_bf16.variant(simulator=True)
    trust(hgemm)
    # short K passes (a fixed seed: fp16 accumulation is only sometimes off by a tolerance at K=40)
    check(W.bf16_fp16_accumulation, hgemm, sizes=[S(6, 16, 40)], seed=1, quiet=True)
    with pytest.raises(CheckFailed):                                                  # …the hidden long K does not
        check(W.bf16_fp16_accumulation, hgemm, sizes=P.SIM_HIDDEN_LONG_K, quiet=True)
    assert P.SIM_HIDDEN_LONG_K[0] in P.hgemm_bf16.hidden_sim_sizes


# ---------------------------------------------------------------- library calls are refused
def test_numpy_on_host_is_refused():
    _fails(W.numpy_on_host, P.sgemm, [S(5, 7, 3)], "refused.*host")
    _fails(W.numpy_on_host_then_copy_kernel, P.sgemm, [S(5, 7, 3)], "refused.*host")


def test_without_the_guard_numpy_on_host_is_still_refused():
    # two independent defences: the library guard refuses the host copy, and without it
    # check still refuses a launch function that launched no kernel (grader.integrity)
    sgemm = P.sgemm.variant(library_free=False)
    trust(sgemm)
    _fails(W.numpy_on_host, sgemm, [S(5, 7, 3)], "no kernel was launched")


def test_guard_is_lifted_after_the_check(l01):
    from numba import cuda

    _fails(W.numpy_on_host, P.sgemm, [S(2, 2, 2)], "refused")
    d = cuda.to_device(np.arange(4, dtype=np.float32))
    assert d.copy_to_host()[3] == 3                 # copies work again outside check
    d.copy_to_device(np.zeros(4, np.float32))
    check(l01["launch_naive"], P.sgemm, sizes=[S(3, 4, 5)], quiet=True)


def test_torch_matmul_is_refused():
    pytest.importorskip("torch")
    _fails(W.torch_matmul, P.sgemm, [S(5, 7, 3)], "refused")


# ---------------------------------------------------------------- problems
def test_tolerances_scale_with_k():
    for prob in (P.sgemm, P.hgemm_bf16, P.wmma_fp16, P.wmma_bf16):
        assert prob.tolerances(S(8, 8, 8192), None)[1] > prob.tolerances(S(8, 8, 64), None)[1]


def test_bf16_reference_uses_the_rounded_inputs():
    inputs = P.hgemm_bf16.make_inputs(np.random.default_rng(1), S(3, 4, 5))
    assert inputs["a"].dtype == np.uint16
    from grader.formats import bf16_to_f64

    want = bf16_to_f64(inputs["a"]) @ bf16_to_f64(inputs["b"])
    np.testing.assert_array_equal(P.hgemm_bf16.reference(**inputs)["c"], want)


def test_every_problem_has_odd_and_degenerate_shapes():
    for prob in (P.sgemm, P.hgemm_bf16, P.wmma_fp16, P.wmma_bf16, P.cute_bf16):
        shapes = prob.sizes + prob.hidden_sizes
        assert any(s.M == 1 for s in shapes) and any(s.N == 1 for s in shapes)
        assert any(s.K % 8 and s.M % 8 and s.N % 8 for s in shapes)
        assert prob.library_free and prob.flops(S(2, 3, 4)) == 48


# ---------------------------------------------------------------- compiled cells without a GPU
def test_compiled_problem_check_scores_zero_without_error(capsys):
    called = []
    got = check(lambda *a: called.append(1), P.hgemm_bf16)
    assert got is None and not called
    out = capsys.readouterr().out
    assert "not graded: compiled and inspected only" in out and "Ampere GPU or newer" in out


def test_chapter_ladder_draws_every_version_of_the_recorded_run(tmp_path):
    import json

    from grader import plot

    report = json.loads((REPO / "results" / "ch03" / "measure_ch03.json").read_text())
    fig = plot.chapter_ladder(report)
    sizes = {r["size"] for r in report["rows"]}
    labels = {r["label"] for r in report["rows"]}
    assert len(fig.axes) == len(sizes)
    assert {t.get_text() for t in fig.axes[0].get_yticklabels()} == labels
    fig.savefig(tmp_path / "ladder.png")
