"""Wrong kernels kept on purpose: each must be caught by the grader (see the tests beside).

:func:`caught` is how a test asks whether one was: the first failure of a problem's graded checks.
"""
from __future__ import annotations


def caught(launch, problem) -> str | None:
    """The first failure of the problem's graded checks (visible, then hidden sizes), or None."""
    from grader.check import CheckFailed, check

    for hidden in (False, True):
        try:
            check(launch, problem, hidden=hidden, quiet=True)
        except CheckFailed as e:
            return str(e)
    return None
