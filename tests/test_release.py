"""course/ is nbgrader's release of solutions/: no drift, no leaks, well-formed graded cells."""
import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from grader.autograde import SCRATCH_CONFIG, chapters_in, release
from grader.nbgrader_settings import CPP_STUB, CourseClearSolutions

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("*/*.ipynb"))
CHAPTERS = chapters_in(ROOT)


def code_cells(path: Path) -> list:
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def test_there_is_a_lesson():
    assert SOLUTIONS, "no solution notebooks found"


def test_regenerating_course_changes_nothing(tmp_path):
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    (tmp_path / "nbgrader_config.py").write_text(SCRATCH_CONFIG)
    release(root=tmp_path, chapters=CHAPTERS)
    fresh = sorted(p.relative_to(tmp_path / "course") for p in (tmp_path / "course").rglob("*") if p.is_file())
    committed = sorted(p.relative_to(ROOT / "course") for p in (ROOT / "course").rglob("*")
                       if p.is_file() and ".ipynb_checkpoints" not in p.parts)
    assert fresh == committed, "course/ and a fresh release list different files: run `python -m grader release`"
    for rel in fresh:
        assert (tmp_path / "course" / rel).read_bytes() == (ROOT / "course" / rel).read_bytes(), (
            f"course/{rel} differs from a fresh release of solutions/: run `python -m grader release`")


@pytest.mark.parametrize("nb", SOLUTIONS, ids=lambda p: p.name)
def test_no_solution_or_hidden_test_reaches_the_learner(nb):
    released = ROOT / "course" / nb.parent.name / nb.name
    assert released.exists(), f"{nb.name} was never released"
    text = released.read_text()
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in text
    region_re = r"(?:###|//) BEGIN (SOLUTION|HIDDEN TESTS)\n(.*?)(?:###|//) END \1"
    course_lines = {l.strip() for c in code_cells(released) for l in c.source.splitlines()}
    # lines the lesson shows openly elsewhere (e.g. a given v1 kernel) are not leaks
    public = {l.strip() for c in code_cells(nb) for l in re.sub(region_re, "", c.source, flags=re.S).splitlines()}
    for cell in code_cells(nb):
        for region in re.findall(region_re, cell.source, re.S):
            for line in region[1].splitlines():
                line = line.strip()
                if len(line) > 15 and not line.startswith(("#", "//")) and line not in public:
                    assert line not in course_lines, f"{nb.name}: solution/hidden line leaked: {line!r}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_graded_cells_have_unique_ids_and_points(chapter):
    """Ids are unique within each notebook (nbgrader's rule); graded and exercise cells across
    the whole chapter (one gradebook column each); every graded cell is locked and has points."""
    graded = []
    for nb in sorted((ROOT / "solutions" / chapter).glob("*.ipynb")):
        ids = []
        for cell in nbformat.read(nb, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if not meta:
                continue
            ids.append(meta["grade_id"])
            if meta.get("grade") or meta.get("solution"):
                graded.append(meta["grade_id"])
            if meta.get("grade"):
                assert float(meta.get("points", 0)) > 0, f"{nb.name}:{meta['grade_id']} has no points"
                assert meta.get("locked"), f"{nb.name}:{meta['grade_id']} must be locked"
        assert len(ids) == len(set(ids)), f"{nb.name}: duplicate ids"
    dupes = {i for i in graded if graded.count(i) > 1}
    assert not dupes, f"{chapter}: graded/exercise ids used twice {dupes}"


@pytest.mark.parametrize("nb", SOLUTIONS, ids=lambda p: p.name)
def test_notebooks_are_committed_without_outputs(nb):
    data = json.loads(nb.read_text())
    assert all(not c.get("outputs") for c in data["cells"] if c["cell_type"] == "code")


def test_cpp_solution_region_becomes_a_cpp_stub():
    cell = nbformat.v4.new_code_cell(
        '%%cuda add\n__global__ void add(float* c) {\n    // BEGIN SOLUTION\n    c[0] = 1;\n'
        '    // END SOLUTION\n}\nx = 1\n### BEGIN SOLUTION\ny = 2\n### END SOLUTION')
    cell.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "k", "locked": False,
                                 "schema_version": 3}
    pre = CourseClearSolutions()
    pre._replace_solution_region(cell, "python")
    assert f"    {CPP_STUB}\n}}" in cell.source
    assert "c[0] = 1" not in cell.source and "y = 2" not in cell.source
    assert "raise NotImplementedError()" in cell.source      # the Python region keeps Python's stub
