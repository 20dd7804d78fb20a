"""Every lesson graded as a class is graded: through the judge, each notebook's code in its sandbox
(simulator: no GPU).

Per chapter: the solution notebooks earn every correctness point (cells that need a GPU score 0 and
say why); the untouched releases earn 0 on every graded cell, each with a reason. For lesson 01.01
also: a wrong submission loses exactly its cells with a readable reason, a kernel that never returns
costs its cells but the rest is graded, and the learner's executed notebook shows every verdict.
"""
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from grader.autograde import chapters_in, grade_lesson
from grader.judge.sandbox import choose

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = chapters_in(ROOT)
SIM_ENV = {"GRADER_SIM_TIMEOUT": "60"}
NOT_HERE = ("not graded: no GPU", "not graded: compiled and inspected only")


def lessons(ch: str) -> list[Path]:
    return sorted((ROOT / "solutions" / ch).glob("*.ipynb"))


def grade(ch: str, name: str, submission, **kw):
    return grade_lesson(ROOT / "solutions" / ch / name, ROOT / "course" / ch / name, submission, choose(),
                        feedback=kw.pop("feedback", False), env=kw.pop("env", SIM_ENV), **kw)


@pytest.fixture(scope="module", params=CHAPTERS)
def graded_chapter(request):
    """Each lesson's reference and its untouched release (the long way), two gradings at a time: each
    is its own sandboxed process, so on CI's 2 cores two run side by side as two students would."""
    ch = request.param
    jobs = [(nb, nb, True) for nb in lessons(ch)] + [(nb, None, False) for nb in lessons(ch)]
    with ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        results = list(pool.map(lambda job: grade(ch, job[0].name, job[1], shortcut=job[2])[0], jobs))
    n = len(lessons(ch))
    return ch, results[:n], results[n:]


def test_solutions_earn_every_correctness_point(graded_chapter):
    _, reference, _ = graded_chapter
    for result in reference:
        assert not [n for n in result.notes if "raised" in n], (result.notebook, result.notes)
        for v in result.verdicts:
            if any(why in v.reason for why in NOT_HERE):
                assert v.score == 0, v                          # a GPU cell: 0 here, saying why
            else:
                assert v.score == v.max_score, f"{result.notebook}:{v.grade_id} {v.score}/{v.max_score}: {v.reason}"


def test_untouched_stubs_earn_nothing(graded_chapter):
    """Graded the long way (built and run), an untouched release earns 0 on every graded cell: what the
    judge's shortcut for untouched notebooks gives without building or running anything."""
    from grader.judge.judge import UNTOUCHED

    ch, _, untouched = graded_chapter
    for result in untouched:
        for v in result.verdicts:
            assert v.score == 0, f"{result.notebook}:{v.grade_id} scored {v.score} untouched"
            assert v.reason, f"{result.notebook}:{v.grade_id} lost its points without a reason"
        quick = grade(ch, result.notebook, None)[0]
        assert [(v.grade_id, v.score) for v in quick.verdicts] == [(v.grade_id, v.score) for v in result.verdicts]
        assert all(v.reason == UNTOUCHED for v in quick.verdicts) and quick.seconds < 5


LEARNER_KERNEL = """
@cuda.jit
def vector_add(a, b, c):
    i = cuda.grid(1)
    BODY


def launch_vector_add(a, b, c):
    vector_add[(c.size + 255) // 256, 256](a, b, c)
"""
L0101 = "01_threads_and_blocks.ipynb"


def _submission(tmp_path: Path, body: str) -> Path:
    """Lesson 01.01 as a learner might hand it in, with ``body`` as the kernel's body."""
    src = ROOT / "solutions" / "01_elementwise" / L0101
    nb = nbformat.read(src, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "v1_vector_add")
    cell.source = LEARNER_KERNEL.replace("BODY", body)
    out = tmp_path / src.name
    nbformat.write(nb, out)
    return out


def test_wrong_submission_loses_that_cell_with_a_reason(tmp_path):
    wrong = _submission(tmp_path, "if i < c.size:\n        c[i] = a[i] - b[i]")
    verdicts = {v.grade_id: v for v in grade("01_elementwise", L0101, wrong)[0].verdicts}
    assert verdicts["test_vector_add_visible"].score == 0
    assert "values are wrong" in verdicts["test_vector_add_visible"].reason
    assert verdicts["test_vector_add_hidden"].score == 0


def test_hung_kernel_costs_its_cells_and_the_rest_is_graded(tmp_path):
    hung = _submission(tmp_path, "while i < c.size:\n        c[i] = a[i] + b[i]")   # i never advances
    result, _ = grade("01_elementwise", L0101, hung, env={"GRADER_SIM_TIMEOUT": "3"})
    by_cell = {v.grade_id: v for v in result.verdicts}
    assert set(by_cell) == {"test_vector_add_visible", "test_vector_add_hidden", "speed_vector_add"}
    assert by_cell["test_vector_add_visible"].score == 0
    assert "did not finish within 3 s" in by_cell["test_vector_add_visible"].reason
    assert "not graded: no GPU" in by_cell["speed_vector_add"].reason   # later cells still graded


def test_the_learner_sees_every_verdict_in_the_executed_notebook(tmp_path):
    wrong = _submission(tmp_path, "if i < c.size:\n        c[i] = a[i] - b[i]")
    result, nb = grade("01_elementwise", L0101, wrong, feedback=True)
    graded = {c["metadata"]["nbgrader"]["grade_id"]: c for c in nb["cells"]
              if c["cell_type"] == "code" and c.get("metadata", {}).get("nbgrader", {}).get("grade")}
    assert set(graded) == {v.grade_id for v in result.verdicts}
    visible = graded["test_vector_add_visible"]
    assert any(o["output_type"] == "error" and "values are wrong" in "\n".join(o["traceback"])
               for o in visible["outputs"])
    assert "grader.check(launch_vector_add" in "".join(visible["source"])   # the test as released
    ran = [c for c in nb["cells"] if c["cell_type"] == "code" and not c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    assert all(c.get("execution_count") for c in ran), "a cell of the learner's notebook did not run"
    # nbgrader reads the same points from these outputs as the judge gave
    from nbgrader.utils import determine_grade

    for cell in graded.values():
        got, _ = determine_grade(nbformat.from_dict(cell))
        want = next(v.score for v in result.verdicts if v.grade_id == cell["metadata"]["nbgrader"]["grade_id"])
        assert (got or 0.0) == want
