"""Chapter 02 (reduce) in the simulator: the reference kernels pass, the wrong ones are caught.

The reference kernels are the solution notebooks' own cells (grader.notebooks).
"""
import grader  # noqa: F401  (simulator first)
import pytest

from grader.check import CheckFailed, check
from grader.problems import reduce as P
from tests.conftest import ROOT as REPO
from tests.conftest import lesson
from tests.wrong import ch02_reduce as W


def load(notebook, cell_ids):
    return lesson("02_reduce", notebook, cell_ids)


@pytest.fixture(scope="module")
def l01():
    return load("01_atomics_and_trees.ipynb", ["v1_atomic", "v3_sequential"])


@pytest.fixture(scope="module")
def l02():
    return load("02_warps.ipynb", ["v1_warp", "v2_block", "v3_grid_stride", "v4_two_pass", "v5_dot"])


@pytest.fixture(scope="module")
def l03():
    return load("03_softmax.ipynb", ["given", "v1_naive", "online_state", "v3_online", "v4_registers"])


@pytest.fixture(scope="module")
def l04():
    return load("04_norms.ipynb", ["welford", "v1_layernorm", "given", "v2_rmsnorm", "v3_registers"])


# ---------------------------------------------------------------- references pass
def test_block_sum_reference(l01):
    check(l01["launch_block_sum"], P.block_sum, sizes=[1, 257, 1000], quiet=True)


def test_sum_references(l02):
    check(l02["launch_sum"], P.total_sum, sizes=[1, 4099], quiet=True)
    check(l02["launch_two_pass"], P.total_sum, sizes=[2049], quiet=True)
    check(l02["launch_dot"], P.dot, sizes=[3001], quiet=True)


def test_softmax_references(l03):
    sizes = [P.Rows(3, 1), P.Rows(2, 127, P.LARGE), P.Rows(1, 2048, P.LARGE)]
    check(l03["launch_online"], P.softmax_bf16, sizes=sizes, quiet=True)
    check(l03["launch_registers"], P.softmax_bf16, sizes=sizes, quiet=True)


def test_norm_references(l04):
    sizes = [P.Rows(3, 1), P.Rows(2, 127, P.LARGE), P.Rows(1, 2048, P.LARGE)]
    check(l04["launch_rmsnorm_simple"], P.rmsnorm_bf16, sizes=sizes, quiet=True)
    check(l04["launch_rmsnorm_registers"], P.rmsnorm_bf16, sizes=sizes, quiet=True)
    check(l04["launch_layernorm"], P.layernorm, sizes=[P.Rows(2, 1031)], quiet=True)


def test_scan_reference():
    ns = load("05_scan_and_histogram.ipynb", ["v2_blelloch"])
    check(ns["launch_scan"], P.scan, sizes=[1, 513, 2049], quiet=True)


# ---------------------------------------------------------------- wrong kernels are caught
def _fails(launch, problem, sizes, match):
    with pytest.raises(CheckFailed, match=match):
        check(launch, problem, sizes=sizes, quiet=True)


def test_missing_syncthreads_is_caught():
    # deterministic: the simulator's race check, not the luck of the thread schedule
    for _ in range(2):
        _fails(W.block_sum_missing_syncthreads, P.block_sum, [256], "shared-memory race")


def test_shuffle_with_wrong_mask_is_caught():
    _fails(W.sum_wrong_mask, P.total_sum, [256], "mask")


def test_shuffle_with_wrong_width_is_caught():
    _fails(W.sum_wrong_width, P.total_sum, [256], "elements wrong")


def test_grid_reduction_dropping_last_block_is_caught():
    # 4 full blocks and 255 more: the dropped tail sums to ~127, far past the tolerance (~0.1). With
    # 1025 only one element was dropped, and a draw under the tolerance passed (~8% of seeds).
    _fails(W.sum_drops_last_block, P.total_sum, [4 * 256 + 255], "elements wrong")
    with pytest.raises(CheckFailed):                        # and somewhere among the hidden sizes
        check(W.sum_drops_last_block, P.total_sum, hidden=True, quiet=True)


def test_softmax_without_max_is_caught_on_large_rows():
    check(W.softmax_without_max, P.softmax_bf16, sizes=[P.Rows(2, 37)], quiet=True)   # small values pass…
    with pytest.raises(CheckFailed):                                                   # …hidden large rows do not
        check(W.softmax_without_max, P.softmax_bf16, hidden=True, quiet=True)


def test_fp16_accumulation_is_caught():
    check(W.rmsnorm_fp16_accumulation, P.rmsnorm_bf16, sizes=[P.Rows(2, 37)], quiet=True)
    with pytest.raises(CheckFailed):
        check(W.rmsnorm_fp16_accumulation, P.rmsnorm_bf16, hidden=True, quiet=True)


# ---------------------------------------------------------------- problems and release
def test_tolerances_scale_with_length():
    assert P.total_sum.tolerances(1 << 20, None)[0] > P.total_sum.tolerances(1000, None)[0]
    assert P.softmax_bf16.tolerances(P.Rows(1, 1 << 20), None)[0] > P.softmax_bf16.tolerances(P.Rows(1, 8), None)[0]


def test_course_has_no_solutions():
    course = sorted((REPO / "course" / "02_reduce").glob("*.ipynb"))
    assert len(course) == 5
    for nb in course:
        text = nb.read_text()
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text, nb.name
        assert "NotImplementedError" in text, nb.name


def test_kernels_compile_for_sm90():
    # the GPU side without a GPU: every notebook kernel compiles to PTX for sm_90 (needs NVVM)
    import os
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    env.pop("GRADER_FORCE_SIM", None)
    r = subprocess.run([sys.executable, str(REPO / "dev" / "ch02_reduce" / "compile.py")], env=env,
                       capture_output=True, text=True, timeout=600)
    if r.returncode == 77:
        pytest.skip(r.stdout.strip() or "no NVVM to compile with")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


# ---------------------------------------------------------------- the online state (lesson 03's first graded cell)
WRONG_STATES = {
    "no rescale of l on a new max": ("return x, l * math.exp(m - x) + float32(1.0)", "return x, l + float32(1.0)"),
    "merge without the empty guard": ("    if m == NEG_INF:\n        return m, float32(0.0)                        # both empty\n", ""),
    "merge that drops the second stream": ("l_a * math.exp(m_a - m) + l_b * math.exp(m_b - m)", "l_a * math.exp(m_a - m)"),
}


@pytest.mark.parametrize("mistake", sorted(WRONG_STATES))
def test_wrong_online_state_is_caught(mistake):
    from grader.notebooks import cell_source
    from tests.conftest import solution

    nb = solution("02_reduce", "03_softmax.ipynb")
    old, new = WRONG_STATES[mistake]
    src = cell_source(nb, "online_state")
    assert src.count(old) == 1, f"the cell changed: {old!r}"
    ns = lesson("02_reduce", "03_softmax.ipynb", ["given"])
    exec(compile(src.replace(old, new), f"wrong-{mistake}", "exec"), ns)
    exec(compile(cell_source(nb, "online_state_launch"), "online_state_launch", "exec"), ns)
    with pytest.raises(CheckFailed):
        check(ns["launch_online_state"], P.online_state, quiet=True)


def test_online_state_reference_passes():
    ns = lesson("02_reduce", "03_softmax.ipynb", ["given", "online_state", "online_state_launch"])
    check(ns["launch_online_state"], P.online_state, quiet=True)
    check(ns["launch_online_state"], P.online_state, hidden=True, quiet=True)


# ---------------------------------------------------------------- the speed cells grade the best finished version
BEST = [  # lesson, its best version's cell, the launch it defines, the version before it, the name graded
    # for speed, the cells that define the version before it, the correctness cells of that version
    ("03_softmax.ipynb", "v4_registers", "launch_registers", "launch_online", "launch_softmax",
     ["given", "v1_naive", "online_state", "v3_online"], ["test_softmax_visible", "test_softmax_hidden"]),
    ("04_norms.ipynb", "v3_registers", "launch_rmsnorm_registers", "launch_rmsnorm_simple", "launch_rmsnorm",
     ["welford", "v1_layernorm", "given", "v2_rmsnorm"], ["test_rmsnorm_visible", "test_rmsnorm_hidden"]),
]


@pytest.mark.parametrize("notebook,cell,best,before,graded,cells,tests", BEST, ids=[b[0] for b in BEST])
def test_speed_cell_grades_the_best_finished_version(notebook, cell, best, before, graded, cells, tests):
    """Issue 32: the speed cell pointed at the last version whatever the learner wrote, so a learner who
    stopped one version earlier got no speed points (and, in the judge, which runs every cell before the
    tests, no correctness points either). Now the pick cell grades the last version that passes its
    check, and the correctness cells grade the version the exercise asks for."""
    from grader.notebooks import cell_source
    from tests.conftest import solution

    sol = solution("02_reduce", notebook)
    release = REPO / "course" / "02_reduce" / notebook
    pick = cell_source(sol, "pick_fastest")
    ns = load(notebook, cells + [cell])                       # the best version written: it is graded
    exec(compile(pick, "pick_fastest", "exec"), ns)
    assert ns[graded] is ns[best]
    ns = load(notebook, cells)                                # the best version left as released: the one before
    exec(compile(cell_source(release, cell), cell, "exec"), ns)
    exec(compile(pick, "pick_fastest", "exec"), ns)
    assert ns[graded] is ns[before]
    for test in tests:
        src = cell_source(sol, test)
        assert f"check({before}," in src and best not in src, f"{test} grades {before}, the exercise it follows"


# ---------------------------------------------------------------- the lessons' first hint is the check's hint
HINTED = [("01_atomics_and_trees.ipynb", "block_sum"), ("02_warps.ipynb", "total_sum"),
          ("03_softmax.ipynb", "online_state"), ("03_softmax.ipynb", "softmax_bf16"),
          ("04_norms.ipynb", "rmsnorm_bf16"), ("05_scan_and_histogram.ipynb", "scan")]


@pytest.mark.parametrize("notebook,problem", HINTED, ids=[f"{n[:2]}-{p}" for n, p in HINTED])
def test_first_hint_says_what_the_failing_check_says(notebook, problem):
    """A failing check prints the problem's hint; the lesson's first <details> hint opens with the same words."""
    from tests.hints import first_hints

    hint = " ".join(getattr(P, problem).hint.split())
    assert hint and any(hint in h for h in first_hints(REPO / "solutions" / "02_reduce" / notebook)), hint
