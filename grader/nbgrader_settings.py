"""The course's nbgrader settings, applied by the repo's nbgrader_config.py and by
``python -m grader`` when it grades in a scratch course directory.

* A solution region written with C++ comments (``// BEGIN SOLUTION`` …
  ``// END SOLUTION``, inside a ``%%cuda`` cell or a C++ string) becomes
  ``// YOUR CODE HERE`` in the learner's copy, not Python's ``raise``.
* Generous per-cell time limits: simulated kernels are bounded by the grader
  itself (grader.sim); the cell limit is the backstop.
"""
from __future__ import annotations

import re

from nbgrader.preprocessors import ClearSolutions

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


def apply(c) -> None:
    """Apply the course settings to an nbgrader config object ``c``."""
    from nbgrader.converters import GenerateAssignment

    c.ClearSolutions.code_stub = {"python": PYTHON_STUB}
    c.CourseClearSolutions.code_stub = {"python": PYTHON_STUB}
    c.GenerateAssignment.preprocessors = [
        CourseClearSolutions if p is ClearSolutions else p
        for p in GenerateAssignment.class_traits()["preprocessors"].default()
    ]
    c.Execute.timeout = CELL_TIMEOUT_S
    c.Execute.interrupt_on_timeout = True
