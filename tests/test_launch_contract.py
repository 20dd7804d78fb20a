"""The launch contract: a compiled kernel's configuration is written once, in its C++ type.

The host reads block size, dynamic shared memory and tile from the compiled cubin
(``course::launch_shape<Cfg>``, grader.cuda.launch); nothing in a lesson keeps a second copy or
parses the source. For each tensor-core GEMM lesson, in the solution and in the released course
notebook alike: every kernel the cell instantiates has a launch shape, the shapes agree between
the two notebooks, the block size is the one ptxas compiled for (``__launch_bounds__``), and the
launch cell derives everything from the module.
"""
from __future__ import annotations

import re

import pytest

import grader  # noqa: F401  (simulator first)
from grader.cuda import compile_cuda
from grader.cuda.launch import LaunchShape, shape_expression
from grader.cuda.magic import parse_magic_line
from grader.notebooks import cell_source
from tests.conftest import ROOT

LESSONS = [("04_mma_sync_pipeline.ipynb", "v_hgemm", {"hgemm<V1>": (128, 128, 32, 128), "hgemm<V2>": (128, 128, 32, 128),
                                                     "hgemm<V3>": (128, 256, 32, 256)}),
           ("05_cute.ipynb", "v_cute", {"cute_gemm<V1>": (128, 128, 32, 128), "cute_gemm<V2>": (128, 256, 32, 256)})]


def compiled(folder: str, notebook: str, cell: str):
    src = cell_source(ROOT / folder / "03_gemm" / notebook, cell)
    line, _, body = src.partition("\n")
    args = parse_magic_line(line[len("%%cuda"):])
    return compile_cuda(body, name=args["name"], kernels=args["kernels"]), args["kernels"]


@pytest.mark.parametrize("notebook,cell,expected", LESSONS, ids=[n for n, _, _ in LESSONS])
def test_course_and_solution_launch_the_same_shapes(notebook, cell, expected):
    module, kernels = compiled("solutions", notebook, cell)
    assert sorted(kernels) == sorted(expected)
    for k in kernels:
        shape = module.launch_shape(k)
        assert shape is not None, f"{notebook}: {k} states no launch shape"
        assert (shape.tile_m, shape.tile_n, shape.tile_k, shape.threads) == expected[k], (k, shape)
        assert shape.threads == module.elf.max_threads(module.symbol(k)), \
            f"{k}: the host launches {shape.threads} threads, __launch_bounds__ says otherwise"
        assert 0 < shape.smem_bytes <= 227 * 1024
    # the learner's copy holds the same types: the release only replaced the solution region
    solution = cell_source(ROOT / "solutions" / "03_gemm" / notebook, cell)
    course = cell_source(ROOT / "course" / "03_gemm" / notebook, cell)
    stubbed = re.sub(r"(?m)^([ \t]*)// BEGIN SOLUTION\n.*?// END SOLUTION[^\n]*", r"\1// YOUR CODE HERE", solution, flags=re.S)
    assert stubbed == course, "course/ and solutions/ differ outside the solution region: release again"


@pytest.mark.parametrize("notebook", [n for n, _, _ in LESSONS])
def test_launch_cells_keep_no_second_copy(notebook):
    for folder in ("solutions", "course"):
        launch = cell_source(ROOT / folder / "03_gemm" / notebook, "launch")
        assert "tiled_launch(" in launch
        # no hand-kept tile tuples, shared-memory formulas or parsing of the kernel's source
        assert not re.search(r"CONFIGS|smem_bytes\s*\(|re\.(search|match|findall)|\.source\b|\(\s*\d+\s*,\s*\d+", launch), launch


def test_shape_expressions():
    assert shape_expression("gemm<V3>") == "&course::launch_shape<V3>"
    assert shape_expression("gemm<Config<128, 256, 32>>") == "&course::launch_shape<Config<128, 256, 32>>"
    assert shape_expression("tile<64, 32>") is None            # two arguments: not a configuration type
    assert shape_expression("tile<64>") is None and shape_expression("k<true>") is None
    assert shape_expression("plain") is None


def test_a_type_without_launch_fields_has_no_shape_and_a_non_type_argument_still_compiles():
    src = """#include "course.cuh"
struct Cfg { static constexpr int THREADS = 96, SMEM_BYTES = 4096, TILE_M = 32, CLUSTER = 2; };
struct Bare {};
constexpr int N = 4;
template <class C> __global__ void k(int* x) { x[threadIdx.x] = 1; }
template <int V> __global__ void v(int* x) { x[0] = V; }
"""
    m = compile_cuda(src, name="contract", kernels=["k<Cfg>", "k<Bare>", "v<N>"])
    assert m.launch_shape("k<Cfg>") == LaunchShape(96, 4096, 32, 0, 0, 0, 2)
    assert m.launch_shape("k<Bare>") is None                 # states nothing: launch it by hand
    assert m.launch_shape("v<N>") is None and "v<N>" in m.kernel_names
    with pytest.raises(Exception, match="states no launch shape"):
        m["k<Bare>"].launch(1)


def test_a_launch_shape_is_read_from_the_cubin_once(monkeypatch):
    """CudaKernel.launch asks for its shape on every launch; re-reading the cubin each time costs a CuTe
    cell (a 2 MB cubin) ~5 ms of host time per launch, which the speed cell's timer then counts."""
    import grader.cuda.module as module_py

    module, _ = compiled("solutions", "04_mma_sync_pipeline.ipynb", "v_hgemm")
    reads, real = [], module_py.read_launch_shape
    monkeypatch.setattr(module_py, "read_launch_shape", lambda *a: reads.append(a[-1]) or real(*a))
    first = module["hgemm<V3>"].launch_shape
    assert all(module["hgemm<V3>"].launch_shape == first for _ in range(100))
    assert reads == ["hgemm<V3>"]
