"""Chapter 05, lesson 03: pipelines and warp specialization.

On the CPU: the problem is 05.02's with persistent and odd-row shapes added; every shape is one TMA
can describe; the launch refuses others; the cell compiles for sm_90a with every configuration the
ladder uses, without spills, setmaxnreg in effect; the rubric passes for the reference and fails for
the released stub, for setmaxnreg without ``__launch_bounds__(THREADS, 1)`` and for the epilogue
without its proxy fence; every mistake of tests/wrong/ch05_pipelines.py applies and compiles; the
launch shape comes from the type; the pipeline helpers and the cluster launch configuration; the
CUTLASS cell's host library (built by nvcc when ``GRADER_TEST_CUTLASS=1``: about a minute).
Marked ``gpu``: the reference passes at every visible and hidden shape, and each mistake that can
hang is caught in a process of its own (the bounded wait traps within seconds).
"""
from __future__ import annotations

import os
import re
from types import SimpleNamespace

import pytest

import grader  # noqa: F401  (simulator first)
from grader.check import check
from grader.cuda.launch import LaunchShape
from grader.notebooks import cell_source, run_cells, run_source
from grader.problems import hopper as P
from grader.problems.gemm import Shape
from tests.cells import check_in_own_process, compile_cell, run_rubric
from tests.conftest import ROOT, solution
from tests.wrong import ch05_pipelines as W

CH, NB, CELL, RUBRIC, KERNEL = W.CHAPTER, W.NOTEBOOK, W.CELL, W.RUBRIC, W.KERNEL
LADDER = ["ws_gemm<Ws<128, 256, 4, 1, 0>>", "ws_gemm<Ws<128, 256, 4, 1, 8>>", KERNEL]


def reference() -> str:
    return cell_source(solution(CH, NB), CELL)


def _compile(source: str, name: str | None = None, only: str | None = KERNEL):
    """A %%cuda cell's source compiled as the magic would (sm_90a without a GPU); ``only``: just
    that kernel (half the build time)."""
    return compile_cell(source, name or "ws", only)


def _rubric(module):
    run_rubric(CH, NB, RUBRIC, ws=module)


# ---------------------------------------------------------------- the problem
def test_problem_is_05_02s_with_persistent_and_odd_row_shapes():
    ws, wg = P.ws_gemm, P.wgmma_gemm
    assert ws.reference is wg.reference and ws.tolerance is wg.tolerance and ws.peer.label == "cuBLAS bf16"
    assert set(wg.sizes) < set(ws.sizes) and set(wg.hidden_sizes) < set(ws.hidden_sizes)
    assert (ws.target, ws.floor, ws.arch, ws.bench_size) == (0.70, 0.35, "sm_90a", Shape(4096, 4096, 4096))
    for s in ws.sizes + ws.hidden_sizes:
        assert P.tma_gemm_shape_ok(s), s
    tiles = lambda s: -(-s.M // 128) * -(-s.N // 256)                           # noqa: E731
    assert any(tiles(s) > 132 for s in ws.sizes) and any(tiles(s) > 132 for s in ws.hidden_sizes)
    assert any(-(-s.M // 128) % 2 for s in ws.sizes) and any(-(-s.M // 128) % 2 for s in ws.hidden_sizes)
    assert any(s.K > 8000 for s in ws.sizes) and any(s.K > 8000 for s in ws.hidden_sizes)


def test_the_launch_refuses_shapes_tma_cannot_describe():
    kernel = SimpleNamespace(name=KERNEL, launch_shape=LaunchShape(384, 230400, 128, 256, 64, 4, 2))
    launch = P.ws_gemm_launch(kernel)
    a, b = SimpleNamespace(shape=(64, 100)), SimpleNamespace(shape=(100, 64))
    with pytest.raises(ValueError, match="multiples of 8"):
        launch(a, b, None)
    with pytest.raises(ValueError, match="TILE_K"):
        P.ws_gemm_launch(SimpleNamespace(name="k", launch_shape=None))


def test_cluster_launch_configuration():
    pytest.importorskip("cuda.bindings")
    from cuda.bindings import driver

    from grader.cuda.driver_launch import launch_config

    c = launch_config((132,), 384, 230400, 2, driver.CUstream(0))
    assert (c.gridDimX, c.blockDimX, c.sharedMemBytes, c.numAttrs) == (132, 384, 230400, 1)
    assert c.attrs[0].id == driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    assert (c.attrs[0].value.clusterDim.x, c.attrs[0].value.clusterDim.y) == (2, 1)


# ---------------------------------------------------------------- compiled here (no GPU)
@pytest.fixture(scope="module")
def ladder_module():
    return _compile(reference(), "ws_all", only=None)


def test_every_configuration_compiles_without_spills_and_with_setmaxnreg(ladder_module):
    from grader.cuda import sass

    assert set(ladder_module.kernel_names) == set(LADDER)
    for k in LADDER:
        sass.require(ladder_module, k, present=["HGMMA.64x256x16.F32.BF16", "UTMASTG.2D"], absent=["LDL", "STL"],
                     no_spills=True)
        assert sass.require_setmaxnreg(ladder_module, k, threads=384)["registers"] == 168
    ops = sass.opcodes(ladder_module, LADDER[0], full=True)
    assert "UTMALDG.2D.MULTICAST" not in ops and "UTMALDG.2D" in ops                  # no cluster: plain loads
    assert sass.opcodes(ladder_module, KERNEL, full=True)["UTMALDG.2D.MULTICAST"] >= 1


def test_rubric_passes_for_the_reference_and_fails_for_the_stub(ladder_module):
    from grader.cuda.sass import RubricFailed

    _rubric(ladder_module)
    stub = cell_source(ROOT / "course" / CH / NB, CELL)
    assert stub.count("// YOUR CODE HERE") == 5 and "BEGIN SOLUTION" not in stub
    with pytest.raises(RubricFailed, match="not implemented yet"):
        _rubric(_compile(stub, "ws_stub"))


@pytest.mark.parametrize("mistake", sorted(W.RUBRIC_CATCHES))
def test_rubric_catches(mistake):
    from grader.cuda.sass import RubricFailed

    module = _compile(W.cpp_variant(reference(), W.PIPELINE_MISTAKES[mistake]), f"wrong_{mistake}")
    with pytest.raises(RubricFailed, match=re.escape(W.RUBRIC_CATCHES[mistake])) as err:
        _rubric(module)
    if mistake == "setmaxnreg_without_launch_bounds":
        assert "C7508" in str(err.value) and "__launch_bounds__(THREADS, 1)" in str(err.value)


@pytest.mark.parametrize("mistake", sorted(set(W.PIPELINE_MISTAKES) - set(W.RUBRIC_CATCHES)))
def test_mistakes_apply_to_the_cell_compile_and_pass_the_rubric(mistake):
    """The GPU-only mistakes compile and look right to the rubric: only running them shows them."""
    module = _compile(W.cpp_variant(reference(), W.PIPELINE_MISTAKES[mistake]), f"wrong_{mistake}")
    assert module.kernel_names == [KERNEL]
    _rubric(module)


def test_launch_shape_comes_from_the_type_and_agrees_with_the_release(ladder_module):
    shape = ladder_module.launch_shape(KERNEL)
    assert (shape.threads, shape.tile_m, shape.tile_n, shape.tile_k, shape.stages, shape.cluster) == \
        (384, 128, 256, 64, 4, 2)
    assert shape.smem_bytes == 4 * 48 * 1024 + 2 * 16 * 1024 + 1024 <= 227 * 1024
    assert shape.threads == ladder_module.elf.max_threads(ladder_module.symbol(KERNEL))
    src, course = (cell_source(ROOT / f / CH / NB, CELL) for f in ("solutions", "course"))
    stubbed = re.sub(r"(?m)^([ \t]*)// BEGIN SOLUTION\n.*?// END SOLUTION[^\n]*", r"\1// YOUR CODE HERE", src, flags=re.S)
    assert stubbed == course
    launch = cell_source(ROOT / "solutions" / CH / NB, "launch_ws")
    assert not re.search(r"\(\s*\d+\s*,\s*\d+|smem|threads\s*=", launch), launch   # nothing restated


def test_the_cutlass_cell_is_a_host_library_cell_the_judge_skips():
    from grader.judge.plan import build

    src = cell_source(solution(CH, NB), "cutlass_cell")
    assert src.startswith("%%nvcc cl\n")
    for piece in ("collective::CollectiveBuilder", "epilogue::collective::CollectiveBuilder",
                  "kernel::GemmUniversal", "device::GemmUniversalAdapter", 'extern "C" int cutlass_gemm'):
        assert piece in src, piece
    plan = build(solution(CH, NB), ROOT / "course" / CH / NB, None)
    assert [c["id"] for c in plan.cuda] == [CELL]                      # the judge compiles the kernel cell only
    assert sum(t["points"] for t in plan.tests) == 11                 # 9, and the CPU replay's 2 (issue 33)


@pytest.mark.skipif(os.environ.get("GRADER_TEST_CUTLASS") != "1", reason="builds CUTLASS with nvcc (about a minute): "
                    "GRADER_TEST_CUTLASS=1")
def test_the_cutlass_cell_builds_and_holds_warp_specialized_wgmma():
    from grader.cuda import sass

    ns: dict = {}
    run_source(cell_source(solution(CH, NB), "cutlass_cell"), "cutlass_cell", ns)
    report = sass.require(ns["cl"].module, "device_kernel", present=["HGMMA.64x256x16.F32.BF16", "UTMALDG.3D.MULTICAST",
                                                                     "UTMASTG", "USETMAXREG"], absent=["LDL", "STL"])
    assert report.ok
    assert ns["cl"].function("cutlass_gemm") is not None


# ---------------------------------------------------------------- on a GPU
@pytest.mark.gpu
def test_reference_passes_on_a_gpu():
    ns = run_cells(solution(CH, NB), ["setup_ws", "v_ws", "launch_ws"])
    check(ns["launch_ws"], P.ws_gemm, quiet=True)
    check(ns["launch_ws"], P.ws_gemm, hidden=True, quiet=True)


@pytest.mark.gpu
@pytest.mark.parametrize("mistake", sorted(W.HANGS))
def test_mistakes_are_caught_in_their_own_process(mistake):
    line = check_in_own_process(f"""
        from grader.problems import hopper as P
        from tests.test_ch05_pipelines import W, _compile, reference
        module = _compile(W.cpp_variant(reference(), W.PIPELINE_MISTAKES[{mistake!r}]), "wrong")
    """, "check(P.ws_gemm_launch(module[W.KERNEL]), P.ws_gemm, sizes=[P.Shape(1000, 1032, 1016)], quiet=True)")
    print(mistake, line)
    assert "failed at shape" in line, line
    if mistake in W.MUST_TRAP:
        assert "did not finish" not in line, line            # the kernel's own trap ended it, not the host's timeout


def test_the_judges_run_of_a_notebook_skips_host_library_builds(monkeypatch, capsys):
    from grader.cuda.host import nvcc_cell

    monkeypatch.setenv("GRADER_PRECOMPILED", "/nonexistent")
    ns: dict = {}
    assert nvcc_cell("cl", 'extern "C" int f() { return 0; }', ns) is None and "cl" not in ns
    assert "not built in the judge's run" in capsys.readouterr().out


def test_the_cutlass_launch_passes_pointers_and_reports_errors():
    calls = []

    class Lib:
        def function(self, name, restype, argtypes):
            assert name == "cutlass_gemm" and len(argtypes) == 7
            return lambda *args: calls.append(args) or (1002 if args[3] == 3 else 0)

    class T:
        def __init__(self, shape, ptr):
            self.shape, self.ptr = shape, ptr

        def data_ptr(self):
            return self.ptr

    import grader.cuda.module as mod

    real, mod._torch_stream_handle = mod._torch_stream_handle, lambda t: 7   # no torch here: a fake stream
    try:
        launch = P.cutlass_gemm_launch(Lib())
        launch(T((5, 16), 100), T((16, 8), 200), T((5, 8), 300))
        assert calls[-1] == (100, 200, 300, 5, 8, 16, 7)
        with pytest.raises(RuntimeError, match="returned 1002"):
            launch(T((3, 16), 100), T((16, 8), 200), T((3, 8), 300))
    finally:
        mod._torch_stream_handle = real
