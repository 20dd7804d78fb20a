"""The nbgrader round trip, as an instructor runs it, on every lesson (simulator: no GPU).

Per chapter, in a scratch course directory: the solution notebooks earn every
correctness point (speed cells score 0 and say "no GPU"); the untouched
student copies earn 0 on every graded cell. For lesson 01.01 also: a wrong
submission loses exactly that cell with a readable reason, and a kernel that
never returns costs its cells but the rest is graded and the run exits cleanly.
"""
import shutil
from pathlib import Path

import nbformat
import pytest

from grader.autograde import autograde, chapters_in, make_scratch_course

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = chapters_in(ROOT)
SIM_ENV = {"GRADER_FORCE_SIM": "1", "NUMBA_ENABLE_CUDASIM": "1", "GRADER_SIM_TIMEOUT": "60"}


def speed_cells(nb_path: Path) -> set:
    """Cells that need a GPU to earn points: speed cells, and correctness cells of problems the
    simulator cannot run (compiled CUDA C++: ``Problem.simulator`` is False)."""
    import importlib
    import re

    nb = nbformat.read(nb_path, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    module = re.search(r"from grader\.problems import (\w+) as P", text)
    problems = importlib.import_module(f"grader.problems.{module.group(1)}") if module else None

    def needs_gpu(source):
        if "grader.speed(" in source:
            return True
        names = re.findall(r"grader\.check\(\s*\w+\s*,\s*P\.(\w+)", source)
        return bool(names) and problems is not None and not getattr(problems, names[0]).simulator

    return {c.metadata["nbgrader"]["grade_id"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade") and needs_gpu(c.source)}


@pytest.fixture(scope="module", params=CHAPTERS)
def graded_chapter(request, tmp_path_factory):
    ch = request.param
    course = make_scratch_course(ch, tmp_path_factory.mktemp(ch))
    solutions = sorted((ROOT / "solutions" / ch).glob("*.ipynb"))
    released = sorted((course / "course" / ch).glob("*.ipynb"))
    reference = autograde(solutions, ch, course, student="reference", env=SIM_ENV)
    untouched = autograde(released, ch, course, student="untouched", env=SIM_ENV)
    return ch, solutions, reference, untouched


def test_solutions_earn_every_correctness_point(graded_chapter):
    ch, solutions, reference, _ = graded_chapter
    speed = set().union(*(speed_cells(nb) for nb in solutions))
    # a chapter may so far hold only ungraded demo notebooks: they must still run cleanly
    for g in reference:
        if g.cell in speed:
            assert g.score == 0 and ("not graded: no GPU" in g.reason or
                                     "not graded: compiled and inspected only" in g.reason), g
        else:
            assert g.score == g.max_score, f"{g.notebook}:{g.cell} {g.score}/{g.max_score}: {g.reason}"


def test_untouched_stubs_earn_nothing(graded_chapter):
    ch, _, _, untouched = graded_chapter
    for g in untouched:
        assert g.score == 0, f"{g.notebook}:{g.cell} scored {g.score} untouched"
        assert g.reason, f"{g.notebook}:{g.cell} lost its points without a reason"


LEARNER_KERNEL = """
@cuda.jit
def vector_add(a, b, c):
    i = cuda.grid(1)
    BODY


def launch_vector_add(a, b, c):
    vector_add[(c.size + 255) // 256, 256](a, b, c)
"""


def _submission(tmp_path: Path, body: str) -> Path:
    """Lesson 01.01 as a learner might hand it in, with ``body`` as the kernel's body."""
    src = ROOT / "solutions" / "01_elementwise" / "01_threads_and_blocks.ipynb"
    nb = nbformat.read(src, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "v1_vector_add")
    cell.source = LEARNER_KERNEL.replace("BODY", body)
    out = tmp_path / src.name
    nbformat.write(nb, out)
    return out


@pytest.fixture(scope="module")
def lesson_0101_course(tmp_path_factory):
    return make_scratch_course("01_elementwise", tmp_path_factory.mktemp("l0101"))


def test_wrong_submission_loses_that_cell_with_a_reason(tmp_path, lesson_0101_course):
    wrong = _submission(tmp_path, "if i < c.size:\n        c[i] = a[i] - b[i]")
    grades = {g.cell: g for g in autograde([wrong], "01_elementwise", lesson_0101_course,
                                           student="wrong", env=SIM_ENV)}
    assert grades["test_vector_add_visible"].score == 0
    assert "values are wrong" in grades["test_vector_add_visible"].reason
    assert grades["test_vector_add_hidden"].score == 0


def test_hung_kernel_costs_its_cells_and_the_rest_is_graded(tmp_path, lesson_0101_course):
    hung = _submission(tmp_path, "while i < c.size:\n        c[i] = a[i] + b[i]")   # i never advances
    grades = autograde([hung], "01_elementwise", lesson_0101_course, student="hung",
                       env={**SIM_ENV, "GRADER_SIM_TIMEOUT": "3"})
    by_cell = {g.cell: g for g in grades}
    assert set(by_cell) == {"test_vector_add_visible", "test_vector_add_hidden", "speed_vector_add"}
    assert by_cell["test_vector_add_visible"].score == 0
    assert "did not finish within 3 s" in by_cell["test_vector_add_visible"].reason
    assert "not graded: no GPU" in by_cell["speed_vector_add"].reason   # later cells still ran
