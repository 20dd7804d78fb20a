"""The course's nbgrader settings, applied by the repo's nbgrader_config.py and by
``python -m grader`` when it grades in a scratch course directory.

* A solution region written with C++ comments (``// BEGIN SOLUTION`` …
  ``// END SOLUTION``, inside a ``%%cuda`` cell or a C++ string) becomes
  ``// YOUR CODE HERE`` in the learner's copy, not Python's ``raise``.
* The release gives every lesson the metadata JupyterLab expects (kernelspec, language_info)
  and lets Run All go past failing checks: :mod:`grader.lesson_metadata`.
* Generous per-cell time limits: simulated kernels are bounded by the grader
  itself (grader.sim); the cell limit is the backstop.
* Autograde puts back graded cells a learner deleted (``add_missing_cells``; nbgrader's
  default leaves them out, and the cell is not graded at all).
* Autograde, after running the notebook (both run in nbgrader's process, which the
  learner's code cannot reach):
  - :class:`StderrToStdout`: text a graded cell wrote to stderr (library warnings,
    a learner's debug prints) becomes stdout, so it no longer zeroes the cell
    (nbgrader scores 0 any graded cell with a stderr stream); errors still score 0.
  - :class:`FlagTampering`: a cell the learner may edit that assigns into the grader,
    the problems, or the timing tools (``grader.check = …``, ``setattr(…)``,
    ``sys.modules``, ``__code__``, ``time.perf_counter = …``) costs every graded cell,
    with a message naming the line.
"""
from __future__ import annotations

import re

from nbgrader.preprocessors import ClearSolutions, IgnorePattern, NbGraderPreprocessor, OverwriteCells
from nbgrader.utils import is_grade, is_locked

PYTHON_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
CPP_STUB = "// YOUR CODE HERE"
CELL_TIMEOUT_S = 600


class CourseClearSolutions(ClearSolutions):
    """ClearSolutions that picks the stub by the comment style of each solution region."""

    def _replace_solution_region(self, cell, language):
        lines = cell.source.split("\n")
        new_lines, in_solution, replaced = [], False, False
        for line in lines:
            if self.begin_solution_delimeter in line:
                if in_solution:
                    raise RuntimeError("encountered nested begin solution statements")
                in_solution = replaced = True
                indent = re.match(r"\s*", line).group(0)
                if cell.cell_type != "code":
                    stub = self.text_stub
                elif line.strip().startswith("//"):
                    stub = CPP_STUB
                else:
                    stub = self.code_stub[language]
                new_lines += [indent + s for s in stub.split("\n")]
            elif self.end_solution_delimeter in line:
                in_solution = False
            elif not in_solution:
                new_lines.append(line)
        if in_solution:
            raise RuntimeError("no end solution statement found")
        cell.source = "\n".join(new_lines)
        return replaced


class CourseOverwriteCells(OverwriteCells):
    """OverwriteCells whose deleted-cell restore works when a markdown cell precedes the test.

    nbgrader 0.9.6 puts a missing grade cell after the *previous source cell*, looked up among
    the submission's grade and solution cells only: a test cell after a locked markdown cell
    (most of ours) raises KeyError and the whole notebook fails to grade. Here the cell goes
    after the nearest earlier source cell the submission still has (else first).
    """

    def add_missing_grade_cells(self, nb, resources):
        import nbformat

        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        source_ids = [cell.name for cell in source_nb.source_cells]
        solution_ids = {cell.name for cell in source_nb.solution_cells}

        def present():
            return {c.metadata["nbgrader"]["grade_id"]: i for i, c in enumerate(nb.cells)
                    if "grade_id" in c.metadata.get("nbgrader", {})}

        for grade_cell in source_nb.grade_cells:
            where = present()
            if grade_cell.name in where:
                continue
            self.log.warning("Missing grade cell %s encountered, adding to notebook", grade_cell.name)
            idx = source_ids.index(grade_cell.name)
            cell = nbformat.from_dict(self.missing_cell_transform(
                source_nb.source_cells[idx], grade_cell.max_score, is_solution=grade_cell.name in solution_ids))
            at = next((where[p] + 1 for p in reversed(source_ids[:idx]) if p in where), 0)
            nb.cells.insert(at, cell)
        return nb, resources


class StderrToStdout(NbGraderPreprocessor):
    """Turn the stderr stream outputs of graded cells into stdout; errors are left alone."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and is_grade(cell):
            for out in cell.get("outputs", []):
                if out.output_type == "stream" and out.name == "stderr":
                    out.name = "stdout"
        return cell, resources


# Writes into the grader, the lesson's problems, the modules timing relies on, or Python's
# own machinery. Reading them (grader.plot.…, np.float32, time.perf_counter()) is fine.
_WATCHED = r"(?:grader|P|problems|np|numpy|cuda|numba|time|torch|secrets|random|builtins|sys|math)"
TAMPERING = [
    (re.compile(rf"^\s*(?:del\s+)?{_WATCHED}(?:\.\w+)+\s*(?:[-+*/|&]?=)(?!=)", re.M), "assigns into a module"),
    (re.compile(r"^\s*(?:grader|P)\s*(?:=(?!=)|\+=)", re.M), "rebinds `grader` or `P`"),
    (re.compile(r"\bas\s+grader\b|^\s*del\s+(?:grader|P)\b", re.M), "rebinds `grader`"),
    (re.compile(r"\b(?:setattr|delattr)\s*\("), "calls setattr/delattr"),
    (re.compile(r"sys\.modules|__code__|__globals__|__builtins__|\bbuiltins\b"), "reaches into Python's machinery"),
]


def find_tampering(source: str) -> tuple[str, str] | None:
    """(what, the offending line) for the first watched write in ``source``, else None."""
    for pattern, what in TAMPERING:
        m = pattern.search(source)
        if m:
            start = source.rfind("\n", 0, m.start()) + 1
            end = source.find("\n", m.end())
            return what, source[start:end if end >= 0 else None].strip()[:120]
    return None


class FlagTampering(NbGraderPreprocessor):
    """A learner-editable cell that writes into the grader costs every graded cell (error output)."""

    def preprocess(self, nb, resources):
        found = None
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and not is_locked(cell):
                hit = find_tampering(cell.source)
                if hit:
                    found = (i, *hit)
                    break
        if found is None:
            return nb, resources
        i, what, line = found
        from nbformat.v4 import new_output

        msg = (f"cell {i} {what} (`{line}`): a notebook that changes the grader or its tools "
               "earns no points. Remove that line; if it was innocent, ask your instructor to review.")
        for cell in nb.cells:
            if cell.cell_type == "code" and is_grade(cell):
                cell.outputs.insert(0, new_output("error", ename="GraderModified", evalue=msg,
                                               traceback=["GraderModified: " + msg]))
        return nb, resources


def apply(c) -> None:
    """Apply the course settings to an nbgrader config object ``c``."""
    from nbgrader.converters import GenerateAssignment

    c.ClearSolutions.code_stub = {"python": PYTHON_STUB}
    c.CourseClearSolutions.code_stub = {"python": PYTHON_STUB}
    from .lesson_metadata import LessonMetadata   # kernelspec, language_info, Run All keeps going

    c.GenerateAssignment.preprocessors = [
        CourseClearSolutions if p is ClearSolutions else p
        for p in GenerateAssignment.class_traits()["preprocessors"].default()
    ] + [LessonMetadata]
    from nbgrader.converters import Autograde

    steps = list(Autograde.class_traits()["autograde_preprocessors"].default())
    at = steps.index(IgnorePattern) + 1          # right after Execute and IgnorePattern
    c.Autograde.autograde_preprocessors = steps[:at] + [StderrToStdout, FlagTampering] + steps[at:]
    c.Autograde.sanitize_preprocessors = [
        CourseOverwriteCells if p is OverwriteCells else p
        for p in Autograde.class_traits()["sanitize_preprocessors"].default()
    ]
    c.OverwriteCells.add_missing_cells = True   # a deleted test cell is put back and graded
    c.Execute.timeout = CELL_TIMEOUT_S
    c.Execute.interrupt_on_timeout = True
