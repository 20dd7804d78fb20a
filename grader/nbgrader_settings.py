"""The course's nbgrader settings, applied by the repo's nbgrader_config.py and by scratch courses.

* A solution region written with C++ comments (``// BEGIN SOLUTION`` … ``// END SOLUTION``, inside
  a ``%%cuda`` cell or a C++ string) becomes ``// YOUR CODE HERE`` in the learner's copy, not
  Python's ``raise``.
* The release gives every lesson the metadata JupyterLab expects (kernelspec, language_info)
  and lets Run All go past failing checks: :mod:`grader.lesson_metadata`.
* ``nbgrader autograde`` is switched off: it would run every submission's code in the instructor's
  own process, with the instructor's permissions (gradebook, solutions, other students' files).
  This course grades with ``python -m grader autograde ASSIGNMENT`` (grader.autograde): each
  submission in its own sandbox, points from the judge.
"""
from __future__ import annotations

import re

from nbgrader.preprocessors import ClearSolutions, NbGraderPreprocessor

PYTHON_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
CPP_STUB = "// YOUR CODE HERE"


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


class RefuseInProcessAutograde(NbGraderPreprocessor):
    """Stops ``nbgrader autograde`` before it runs a submission's code in this process."""

    def preprocess(self, nb, resources):
        raise RuntimeError("this course grades with `python -m grader autograde ASSIGNMENT`: nbgrader "
                           "autograde would run each submission's code in your own process (README, "
                           "'Grading a class').")


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
    c.Autograde.sanitize_preprocessors = [RefuseInProcessAutograde]
    c.Autograde.autograde_preprocessors = [RefuseInProcessAutograde]
