"""`python -m grader grade`'s table: reasons wrapped under their row (grader/autograde.py:
format_table); an untouched C++ stub, graded by the judge, is "not implemented yet"."""
from pathlib import Path

from grader.autograde import REASON_WIDTH, CellGrade, format_table, grade_notebook

ROOT = Path(__file__).resolve().parent.parent
RUBRIC = ["RubricFailed: SASS rubric failed for mma_tile [sm_90a]:",
          "  - missing HMMA (no tensor-core mma: use mma.sync (course::mma_m16n8k16_*) or a CuTe MMA atom)",
          "  - missing LDSM (no ldmatrix: load the fragments with ldmatrix (course::ldmatrix_x4))"]


def test_reasons_are_wrapped_under_their_row():
    rows = [CellGrade("nb", "test_mma_tile_sass", 0.0, 2.0, "\n".join(RUBRIC)),
            CellGrade("nb", "speed", 0.5, 1.0, "speed: " + "far below the target " * 12),
            CellGrade("nb", "test_ok", 2.0, 2.0, "")]
    lines = format_table(rows, notes=["a note"]).splitlines()
    assert " | " not in "\n".join(lines)
    assert all(len(l) <= REASON_WIDTH for l in lines[1:])
    start = lines.index(next(l for l in lines if l.startswith("test_mma_tile_sass")))
    assert lines[start].split() == ["test_mma_tile_sass", "0.00", "/", "2"]
    assert lines[start + 1] == "    " + RUBRIC[0]
    assert lines[start + 2] == "      " + RUBRIC[1].strip()          # the rubric's own indent is kept
    speed = lines.index(next(l for l in lines if l.startswith("speed")))
    assert lines[speed + 1].startswith("    speed: far") and lines[speed + 2].startswith("      below")
    assert lines[-3].split() == ["test_ok", "2.00", "/", "2"] and lines[-2].startswith("total")
    assert lines[-1] == "note: a note"


def test_the_released_cpp_exercise_grades_as_not_implemented_yet():
    """The released lesson, untouched, through the judge: the SASS rubric's cell says why it is 0."""
    graded = grade_notebook(ROOT / "course" / "03_gemm" / "00_compiled_cells.ipynb")
    sass = [r for r in graded.cells if r.cell == "test_mma_tile_sass"]
    assert sass, [r.cell for r in graded.cells]
    assert sass[0].score == 0 and "not implemented yet" in sass[0].reason, sass[0].reason
    assert sum(r.score for r in graded.cells) == 0
