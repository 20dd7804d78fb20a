"""Lesson 03.05 (CuTe) on the CPU: the GEMM compiles and its machine-code rubric passes for the
reference and fails for a stub and for a variant without ldmatrix; the layout exercise's checks pass
for the reference and fail for wrong answers.

The kernel and the checks are the solution notebook's own cells (grader.notebooks). Correctness
and speed of the kernel need a GPU (dev/ch03_gemm/measure.py).
"""
import re

import pytest

import grader  # noqa: F401  (simulator first)
from grader import cuda as cc
from grader.cuda import sass
from grader.cuda.magic import parse_magic_line
from grader.notebooks import cell_source
from tests.conftest import lesson, solution

NB = solution("03_gemm", "05_cute.ipynb")
GRADED = "cute_gemm<V2>"


def kernel_source() -> str:
    src = cell_source(NB, "v_cute")
    assert src.startswith("%%cuda cg")
    return src.split("\n", 1)[1]


def kernels() -> list:
    return parse_magic_line(cell_source(NB, "v_cute").split("\n", 1)[0][len("%%cuda"):])["kernels"]


def graded_only(src: str):
    # variants: compile only the graded kernel (half the build time)
    return dict(source=src, kernels=[GRADED])


def rubric(module):
    # the notebook's graded SASS cell, run against `module`
    exec(cell_source(NB, "test_cute_sass"), {"sass": sass, "cg": module})


# ---------------------------------------------------------------- the GEMM's machine code
def test_reference_compiles_and_passes_the_rubric():
    mod = cc.compile_cuda(kernel_source(), name="cg", kernels=kernels())
    assert set(mod.kernel_names) == {"cute_gemm<V1>", GRADED}
    rubric(mod)
    res = mod[GRADED].resources
    assert res["spill_stores"] == 0 and res["stack"] == 0


def test_stub_fails_the_rubric():
    stub, n = re.subn(r"// BEGIN SOLUTION\n.*?// END SOLUTION", "// YOUR CODE HERE", kernel_source(), flags=re.S)
    assert n == 1
    mod = cc.compile_cuda(name="cg_stub", **graded_only(stub))  # the learner's copy compiles…
    with pytest.raises(sass.RubricFailed, match="not implemented yet"):   # …and earns nothing, saying why
        rubric(mod)


def test_without_ldmatrix_fails_the_rubric():
    src = kernel_source()
    wrong = src.replace("Copy_Atom<SM75_U32x4_LDSM_N, T>", "Copy_Atom<UniversalCopy<T>, T>")
    assert wrong != src
    mod = cc.compile_cuda(name="cg_no_ldsm", **graded_only(wrong))
    with pytest.raises(sass.RubricFailed, match="LDSM.16.M88.4"):
        rubric(mod)


# ---------------------------------------------------------------- the layout exercise
VISIBLE, HIDDEN = "test_layout_visible", "test_layout_hidden"


@pytest.fixture()
def ns():
    return lesson("03_gemm", "05_cute.ipynb", ["layout_functions"])


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


# ---------------------------------------------------------------- the pipeline's control flow
def _pipeline(KT, STAGES, KB=2):
    """The v_cute main loop's bookkeeping, step for step (prologue; steady loop that refills; drain loop
    that only multiplies), with cp.async groups modelled: returns the tiles loaded, in order. Asserts
    that every mma step multiplies tile kt from a stage whose copy group had completed at the last
    wait, and that each refill writes the stage read by tile kt - 1 (freed at the last barrier)."""
    groups, pending, landed, loads, frag = [], [], {}, [], {}

    def fence():
        groups.append(list(pending))
        pending.clear()

    def wait(n):   # cp_async_wait<n>: all but the n most recent groups are complete
        for g in groups[: len(groups) - n]:
            for s, t in g:
                landed[s] = t

    def issue(s, t):
        assert 0 <= t < KT, f"loads tile {t} of {KT}"
        pending.append((s, t))
        loads.append(t)

    for s in range(STAGES - 1):
        if s < KT:
            issue(s, s)
        fence()
    st = {"read": 0, "write": STAGES - 1, "src": STAGES - 1}
    wait(STAGES - 2)
    frag[0] = landed.get(0)

    def k_tile(kt, refill):
        for kb in range(KB):
            if kb == KB - 1:
                wait(STAGES - 2)
                st["read"] = (st["read"] + 1) % STAGES
            frag[(kb + 1) % KB] = landed.get(st["read"])
            if kb == 0:
                if refill:
                    assert st["write"] == (kt - 1) % STAGES
                    issue(st["write"], st["src"])
                    st["src"] += 1
                    st["write"] = (st["write"] + 1) % STAGES
                fence()
            assert frag[kb] == kt, f"KT={KT} S={STAGES}: k tile {kt} step {kb} multiplies tile {frag[kb]}"

    kt = 0
    while kt < KT - (STAGES - 1):
        k_tile(kt, True)
        kt += 1
    while kt < KT:
        k_tile(kt, False)
        kt += 1
    return loads


def test_main_loop_steady_and_drain_cover_every_k_tile():
    # the cell has the structure modelled above…
    src = kernel_source()
    assert "for (; kt < KT - (STAGES - 1); ++kt) k_tile(cute::true_type{});" in src
    assert "for (; kt < KT; ++kt) k_tile(cute::false_type{});" in src
    # …which loads each k tile once and multiplies it after it landed, for every stage count of the
    # config lines and every K, including KT < STAGES - 1 (K = 32 with 4 stages: the steady loop is empty)
    for stages in (2, 3, 4):
        for KT in range(1, 20):
            assert _pipeline(KT, stages) == list(range(KT))
