"""`python -m grader grade`'s table: reasons wrapped under their row; an untouched C++ stub is
"not implemented yet" (grader/autograde.py: read_cell_grades, format_table)."""
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output
from nbgrader.utils import compute_checksum

from grader.autograde import REASON_WIDTH, CellGrade, format_table, read_cell_grades

STUB = '%%cuda mma\n#include "course.cuh"\nextern "C" __global__ void mma_tile(float* C) {\n  // YOUR CODE HERE\n}'
RUBRIC = ["RubricFailed: SASS rubric failed for mma_tile [sm_90a]:",
          "  - missing HMMA (no tensor-core mma: use mma.sync (course::mma_m16n8k16_*) or a CuTe MMA atom)",
          "  - missing LDSM (no ldmatrix: load the fragments with ldmatrix (course::ldmatrix_x4))"]


def _autograded(tmp_path: Path, exercise_source: str, ename: str = "RubricFailed") -> Path:
    """A notebook as nbgrader autograde leaves it: a released %%cuda exercise, then its graded check."""
    exercise = new_code_cell(STUB, metadata={"nbgrader": {
        "grade": False, "solution": True, "locked": False, "grade_id": "mma_tile_exercise", "schema_version": 3}})
    exercise.metadata.nbgrader["checksum"] = compute_checksum(exercise)      # as released
    exercise.source = exercise_source
    check = new_code_cell('sass.require(mma, "mma_tile", present=["HMMA", "LDSM"])', metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "points": 2, "grade_id": "test_mma_tile_sass",
        "schema_version": 3}})
    check.outputs = [new_output("error", ename=ename, evalue="…", traceback=RUBRIC)]
    path = tmp_path / "00_compiled_cells.ipynb"
    nbformat.write(new_notebook(cells=[exercise, check]), path)
    return path


def test_an_untouched_cpp_stub_is_not_implemented_yet(tmp_path):
    [row] = read_cell_grades(_autograded(tmp_path, STUB))
    assert row.score == 0 and row.reason.startswith("not implemented yet"), row.reason
    assert "%%cuda mma" in row.reason and "// YOUR CODE HERE" in row.reason


def test_an_edited_kernel_keeps_the_rubric_lines(tmp_path):
    edited = STUB.replace("// YOUR CODE HERE", "// YOUR CODE HERE\n  C[0] = 1.f;")
    [row] = read_cell_grades(_autograded(tmp_path, edited))
    assert row.reason.splitlines() == RUBRIC


def test_tampering_is_never_hidden_behind_the_stub(tmp_path):
    [row] = read_cell_grades(_autograded(tmp_path, STUB, ename="GraderModified"))
    assert row.reason.splitlines()[0] == RUBRIC[0]


def test_reasons_are_wrapped_under_their_row():
    rows = [CellGrade("nb", "test_mma_tile_sass", 0.0, 2.0, "\n".join(RUBRIC)),
            CellGrade("nb", "speed", 0.5, 1.0, "speed: " + "far below the target " * 12),
            CellGrade("nb", "test_ok", 2.0, 2.0, "")]
    lines = format_table(rows).splitlines()
    assert " | " not in "\n".join(lines)
    assert all(len(l) <= REASON_WIDTH for l in lines[1:])
    start = lines.index(next(l for l in lines if l.startswith("test_mma_tile_sass")))
    assert lines[start].split() == ["test_mma_tile_sass", "0.00", "/", "2"]
    assert lines[start + 1] == "    " + RUBRIC[0]
    assert lines[start + 2] == "      " + RUBRIC[1].strip()          # the rubric's own indent is kept
    speed = lines.index(next(l for l in lines if l.startswith("speed")))
    assert lines[speed + 1].startswith("    speed: far") and lines[speed + 2].startswith("      below")
    assert lines[-2].split() == ["test_ok", "2.00", "/", "2"] and lines[-1].startswith("total")


def test_the_released_cpp_exercise_grades_as_not_implemented_yet():
    """End to end through nbgrader autograde (the released checksum survives it)."""
    from grader.autograde import grade_notebook

    root = Path(__file__).resolve().parent.parent
    rows = grade_notebook(root / "course" / "03_gemm" / "00_compiled_cells.ipynb",
                          env={"GRADER_FORCE_SIM": "1", "NUMBA_ENABLE_CUDASIM": "1"})
    [sass] = [r for r in rows if r.cell == "test_mma_tile_sass"]
    assert sass.score == 0 and sass.reason.startswith("not implemented yet: the `%%cuda mma` cell"), sass.reason
