"""Wrong kernels kept on purpose: each must be caught by the grader (see the tests beside).

:func:`caught` is how a test asks whether one was: the first failure of a problem's graded checks.
:func:`lesson_variant` makes a wrong kernel from a lesson's own cell, loaded from its solution
notebook with a few lines changed, so the lesson's kernel text stays in one place (the notebook;
tests/test_one_source.py).
"""
from __future__ import annotations

from pathlib import Path

SOLUTIONS = Path(__file__).resolve().parents[2] / "solutions"


def caught(launch, problem) -> str | None:
    """The first failure of the problem's graded checks (visible, then hidden sizes), or None."""
    from grader.check import CheckFailed, check

    for hidden in (False, True):
        try:
            check(launch, problem, hidden=hidden, quiet=True)
        except CheckFailed as e:
            return str(e)
    return None


def lesson_variant(chapter: str, notebook: str, cell_id: str, replacements: list, before=("setup",)) -> dict:
    """The namespace of the solution notebook's cells ``before`` and then its Python cell ``cell_id`` with
    each (old, new) of ``replacements`` applied (each old text must occur exactly once)."""
    from grader.notebooks import cell_source, run_cells, run_source

    path = SOLUTIONS / chapter / notebook
    ns = run_cells(path, list(before))
    src = cell_source(path, cell_id)
    for old, new in replacements:
        assert src.count(old) == 1, f"{notebook}:{cell_id} changed: {old!r} occurs {src.count(old)} times, not once"
        src = src.replace(old, new)
    run_source(src, f"{notebook}:{cell_id} (a wrong variant)", ns)
    return ns
