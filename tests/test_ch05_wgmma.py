"""Chapter 05 (Hopper): lesson 02, WGMMA.

On the CPU: the problem keeps only shapes TMA can describe, ragged against the tiles, with long K;
the launch function refuses other shapes; the descriptor's bits (grader/include/wgmma.cuh) are
those of the PTX ISA, checked by the compiler; the lesson's picture of the accumulator fragment
agrees with CuTe's layout of it; the cell builds for sm_90a only (wgmma is Hopper's); the rubric
passes for the reference, fails for the released stub and for each mistake it must catch (the
missing fence, shallow and missing waits, serialized wgmmas), and every mistake of
tests/wrong/ch05_wgmma.py applies and compiles; the launch shape comes from the type. Marked
``gpu`` (a Hopper GPU): the reference passes, and each mistake the values must catch is caught.
"""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

import grader  # noqa: F401  (simulator first)
from grader.check import check
from grader.cuda.launch import LaunchShape
from grader.notebooks import cell_source, run_cells
from grader.problems import hopper as P
from grader.problems.gemm import Shape
from tests.cells import compile_cell, run_rubric
from tests.conftest import ROOT, solution
from tests.wrong import caught
from tests.wrong import ch05_wgmma as W

CH, NB, CELL, RUBRIC, KERNEL = W.CHAPTER, W.NOTEBOOK, W.CELL, W.RUBRIC, W.KERNEL


def reference() -> str:
    return cell_source(solution(CH, NB), CELL)


def _compile(source: str, name: str | None = None):
    return compile_cell(source, name)


def _rubric(module):
    run_rubric(CH, NB, RUBRIC, wg=module)


# ---------------------------------------------------------------- the problem
def test_sizes_are_what_tma_can_describe_ragged_and_long():
    p = P.wgmma_gemm
    for sizes in (p.sizes, p.hidden_sizes):
        assert all(P.tma_gemm_shape_ok(s) for s in sizes)
        assert any(s.M % 128 for s in sizes) and any(s.N % 256 for s in sizes) and any(s.K % 64 for s in sizes)
        assert any(s.K >= 8192 for s in sizes)                        # a bf16 accumulator fails there
        assert any(s.M == 1 for s in sizes) and any(s.N == 8 for s in sizes)
    assert set(p.sizes).isdisjoint(p.hidden_sizes)
    assert p.arch == "sm_90a" and not p.simulator and p.arrays == "torch" and p.library_free
    assert (p.target, p.floor) == (0.50, 0.05) and p.bench_size == Shape(4096, 4096, 4096)
    assert p.peer.label == "cuBLAS bf16"
    assert "Hopper GPU" in p.unavailable(True, None)
    assert "compute capability 10.0" in p.unavailable(False, (10, 0))      # Blackwell has no wgmma
    assert p.unavailable(False, (9, 0)) is None


def test_the_launch_refuses_shapes_tma_cannot_describe():
    kernel = SimpleNamespace(name=KERNEL, launch_shape=LaunchShape(256, 197632, 128, 256, 64, 4))
    launch = P.wgmma_gemm_launch(kernel)
    for m, k, n in ((64, 100, 64), (64, 64, 30)):
        with pytest.raises(ValueError, match="multiples of 8"):
            launch(SimpleNamespace(shape=(m, k)), SimpleNamespace(shape=(k, n)), None)
    with pytest.raises(ValueError, match="TILE_K"):
        P.wgmma_gemm_launch(SimpleNamespace(name="k", launch_shape=LaunchShape(256, 0, 128, 256)))


# ---------------------------------------------------------------- the header, checked by the compiler
def _desc(start, lbo, sbo, swizzle):
    """The PTX ISA's matrix descriptor: (x & 0x3FFFF) >> 4 for address, LBO, SBO; swizzle in bits 62-63."""
    enc = lambda x: (x & 0x3FFFF) >> 4  # noqa: E731
    return enc(start) | enc(lbo) << 16 | enc(sbo) << 32 | swizzle << 62


def test_descriptor_bits_are_the_ptx_isa_s():
    from grader.cuda import compile_cuda

    cases = [(0x400, 16, 1024, 1), (0x4400 + 2048, 8192, 1024, 1), (0x3FFF0, 0x3FFF0, 0x3FFF0, 3), (0x10, 0, 0, 2)]
    asserts = "\n".join(f"static_assert(course::make_smem_desc({s}u, {lbo}u, {sbo}u, {sw}u) == {_desc(s, lbo, sbo, sw):#x}ull);"
                        for s, lbo, sbo, sw in cases)
    asserts += f"\nstatic_assert(course::desc_advance({_desc(0x400, 16, 1024, 1):#x}ull, 32) == {_desc(0x420, 16, 1024, 1):#x}ull);"
    asserts += "\nstatic_assert(course::DESC_SWIZZLE_128B == 1 && course::DESC_SWIZZLE_64B == 2 && course::DESC_SWIZZLE_32B == 3);"
    compile_cuda('#include "wgmma.cuh"\n' + asserts + '\nextern "C" __global__ void k() {}', name="desc_bits", arch="sm_90a")
    with pytest.raises(Exception, match="static assertion"):
        compile_cuda('#include "wgmma.cuh"\nstatic_assert(course::make_smem_desc(0x400u, 16u, 1024u, 1u) == '
                     f'{_desc(0x400, 1024, 16, 1):#x}ull);\nextern "C" __global__ void k() {{}}', name="desc_bits_wrong",
                     arch="sm_90a")


def test_the_fragment_picture_agrees_with_cute_s_accumulator_layout():
    """CuTe's CLayout_64xN (cute/atom/mma_traits_sm90_gmma.hpp): thread (4, 8, 4) : (128, 1, 16), value
    (2, 2, N/8) : (64, 8, 512), into a column-major 64 × N tile. The lesson's picture (and wgmma.cuh's
    comment) must place every element where that layout does."""
    ns: dict = {}
    src = cell_source(solution(CH, NB), "fragment_picture")
    exec(src[: src.index("fig, (ax, ax2)")], ns)                    # only the mapping, not the drawing
    N = 64
    for t in range(128):
        t0, t1, t2 = t % 4, (t // 4) % 8, t // 32
        for v in range(N // 2):
            v0, v1, v2 = v % 2, (v // 2) % 2, v // 4
            offset = 128 * t0 + t1 + 16 * t2 + 64 * v0 + 8 * v1 + 512 * v2
            row, col = offset % 64, offset // 64
            assert ns["acc_owner"](row, col) == (t, v), (t, v, row, col)


# ---------------------------------------------------------------- compiled here (no GPU)
def test_rubric_passes_for_the_reference_and_fails_for_the_stub():
    from grader.cuda.sass import RubricFailed

    _rubric(_compile(reference()))
    stub = cell_source(ROOT / "course" / CH / NB, CELL)
    assert stub.count("// YOUR CODE HERE") == 4 and "BEGIN SOLUTION" not in stub
    with pytest.raises(RubricFailed, match="not implemented yet"):
        _rubric(_compile(stub))


@pytest.mark.parametrize("mistake", sorted(W.RUBRIC_CATCHES))
def test_rubric_catches_what_the_values_may_not(mistake):
    from grader.cuda.sass import RubricFailed

    module = _compile(W.cpp_variant(reference(), W.WGMMA_MISTAKES[mistake]), name=f"r_{mistake}")
    with pytest.raises(RubricFailed, match=re.escape(W.RUBRIC_CATCHES[mistake])):
        _rubric(module)


def test_without_the_fence_the_sass_is_the_same():
    """Why the fence is read from the source: ptxas inserts the WARPGROUP.ARRIVE itself."""
    from grader.cuda import sass

    strip = lambda m: re.sub(r"/\*[0-9a-f]+\*/", "", sass.disassemble(m, KERNEL))  # noqa: E731
    with_fence = _compile(reference())
    without = _compile(W.cpp_variant(reference(), W.WGMMA_MISTAKES["no_wgmma_fence"]), name="nf")
    assert strip(with_fence) == strip(without)
    assert sass.opcodes(without, KERNEL)["WARPGROUP"] >= 1


@pytest.mark.parametrize("mistake", sorted(W.WGMMA_MISTAKES))
def test_mistakes_apply_to_the_cell_and_compile(mistake):
    module = _compile(W.cpp_variant(reference(), W.WGMMA_MISTAKES[mistake]), name=f"w_{mistake}")
    assert module.kernel_names == [KERNEL]
    if mistake in W.VALUES:                      # only the values can catch these: the rubric passes them
        _rubric(module)


@pytest.mark.parametrize("arch", ["sm_90", "sm_100a"])
def test_the_cell_needs_sm_90a(arch):
    from grader.cuda import compile_cuda
    from grader.cuda.compiler import CompileError
    from grader.cuda.magic import parse_magic_line

    first, _, body = reference().partition("\n")
    with pytest.raises(CompileError, match="wgmma"):
        compile_cuda(body, name=f"wg_{arch}", arch=arch, kernels=parse_magic_line(first[len("%%cuda"):])["kernels"])


def test_launch_shape_comes_from_the_type_and_agrees_with_the_release():
    module = _compile(reference())
    shape = module.launch_shape(KERNEL)
    assert (shape.threads, shape.tile_m, shape.tile_n, shape.tile_k, shape.stages) == (256, 128, 256, 64, 4)
    assert shape.threads == module.elf.max_threads(module.symbol(KERNEL))
    assert shape.smem_bytes == 4 * (128 * 64 * 2 + 64 * 256 * 2) + 1024
    src, course = (cell_source(ROOT / f / CH / NB, CELL) for f in ("solutions", "course"))
    stubbed = re.sub(r"(?m)^([ \t]*)// BEGIN SOLUTION\n.*?// END SOLUTION[^\n]*", r"\1// YOUR CODE HERE", src, flags=re.S)
    assert stubbed == course
    launch = cell_source(ROOT / "solutions" / CH / NB, "launch_wg")
    assert not re.search(r"\(\s*\d+\s*,\s*\d+|smem|threads\s*=", launch), launch   # nothing restated


# ---------------------------------------------------------------- on a GPU
def _launch(module):
    return P.wgmma_gemm_launch(module[KERNEL])


@pytest.mark.gpu
def test_reference_passes_on_a_gpu():
    ns = run_cells(solution(CH, NB), ["setup_wg", "launch_wg"], {"wg": _compile(reference())})
    check(ns["launch_wg"], P.wgmma_gemm, quiet=True)
    check(ns["launch_wg"], P.wgmma_gemm, hidden=True, quiet=True)


@pytest.mark.gpu
@pytest.mark.parametrize("mistake", sorted(W.WGMMA_MISTAKES))
def test_mistakes_are_caught_on_a_gpu(mistake):
    module = _compile(W.cpp_variant(reference(), W.WGMMA_MISTAKES[mistake]), name=f"g_{mistake}")
    why = caught(_launch(module), P.wgmma_gemm)
    print(f"{mistake}: {why.splitlines()[0] if why else 'NOT caught by the values'}")
    if mistake in W.RUBRIC_CATCHES:
        return                     # caught by the rubric on every machine; the values may not show it
    assert why and "failed at shape" in why, f"{mistake}: not caught"
