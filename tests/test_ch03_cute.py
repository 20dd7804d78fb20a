"""Lesson 03.05 (CuTe) on the CPU: the GEMM compiles and its machine-code rubric passes for the
reference and fails for a stub and for a variant without ldmatrix; the layout exercise's checks pass
for the reference and fail for wrong answers.

The kernel and the checks are the solution notebook's own cells (tests/ch03_cells.py). Correctness
and speed of the kernel need a GPU (tests/gpu/measure_ch03.py).
"""
import re
import sys
from pathlib import Path

import pytest

import grader  # noqa: F401  (simulator first)
from grader import cuda_cells as cc
from grader import sass

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ch03_cells import cell_source, load  # noqa: E402

NB = "05_cute.ipynb"
GRADED = "cute_gemm_bf16"


def kernel_source() -> str:
    src = cell_source(NB, "v_cute")
    assert src.startswith("%%cuda cg")
    return src.split("\n", 1)[1]


def graded_only(src: str) -> str:
    # variants: compile only the graded kernel (half the build time)
    out = re.sub(r"^CUTE_GEMM_KERNEL\(cute_v1.*$", "", src, flags=re.M)
    assert out != src
    return out


def rubric(module):
    # the notebook's graded SASS cell, run against `module`
    exec(cell_source(NB, "test_cute_sass"), {"sass": sass, "cg": module})


# ---------------------------------------------------------------- the GEMM's machine code
def test_reference_compiles_and_passes_the_rubric():
    mod = cc.compile_cuda(kernel_source(), name="cg")
    assert {"cute_v1", GRADED, "pad"} <= set(mod.kernel_names)
    rubric(mod)
    res = mod[GRADED].resources
    assert res["spill_stores"] == 0 and res["stack"] == 0


def test_stub_fails_the_rubric():
    stub, n = re.subn(r"// BEGIN SOLUTION\n.*?// END SOLUTION", "// YOUR CODE HERE", kernel_source(), flags=re.S)
    assert n == 1
    mod = cc.compile_cuda(graded_only(stub), name="cg_stub")    # the learner's copy compiles…
    with pytest.raises(sass.RubricFailed, match="HMMA"):          # …and earns nothing
        rubric(mod)


def test_without_ldmatrix_fails_the_rubric():
    src = kernel_source()
    wrong = src.replace("Copy_Atom<SM75_U32x4_LDSM_N, T>", "Copy_Atom<UniversalCopy<T>, T>")
    assert wrong != src
    mod = cc.compile_cuda(graded_only(wrong), name="cg_no_ldsm")
    with pytest.raises(sass.RubricFailed, match="LDSM.16.M88.4"):
        rubric(mod)


# ---------------------------------------------------------------- the layout exercise
VISIBLE, HIDDEN = "test_layout_visible", "test_layout_hidden"


@pytest.fixture()
def ns():
    return load(NB, ["layout_functions"])


def run_check(ns, cell_id):
    exec(cell_source(NB, cell_id), ns)


def test_reference_layout_functions_pass(ns):
    run_check(ns, VISIBLE)
    run_check(ns, HIDDEN)


def test_row_major_integer_coordinate_is_caught(ns):
    good = ns["crd2idx"]

    def wrong(coord, shape, stride):   # reads an integer coordinate last-mode-fastest (NumPy's order)
        if isinstance(coord, int) and isinstance(shape, tuple):
            sizes = [ns["size"](s) for s in shape]
            crd = []
            for s in reversed(sizes):
                crd.append(coord % s)
                coord //= s
            coord = tuple(reversed(crd))
        return good(coord, shape, stride)

    ns["crd2idx"] = wrong
    with pytest.raises(AssertionError):
        run_check(ns, VISIBLE)
    with pytest.raises(AssertionError):
        run_check(ns, HIDDEN)


def test_flat_only_crd2idx_is_caught(ns):
    ns["crd2idx"] = lambda coord, shape, stride: sum(c * d for c, d in zip(coord, stride))   # no nesting, no integers
    with pytest.raises((AssertionError, TypeError)):
        run_check(ns, VISIBLE)


@pytest.mark.parametrize("wrong", [
    lambda off, B, M, S: off ^ ((off >> S) & (((1 << B) - 1) << M)) ^ 1,               # off by one bit
    lambda off, B, M, S: off ^ ((off & (((1 << B) - 1) << M)) << S),                   # XOR in the wrong direction
    lambda off, B, M, S: off ^ ((off >> (M + S)) & ((1 << B) - 1)),                    # forgets the shift to bit M
])
def test_wrong_swizzle_is_caught(ns, wrong):
    ns["swizzle"] = wrong
    with pytest.raises(AssertionError):
        run_check(ns, VISIBLE)
    with pytest.raises(AssertionError):
        run_check(ns, HIDDEN)
