"""Whether this process is the judge's sandboxed runner: a leaf module (it imports nothing of the
grader), so that any module may ask without an import cycle."""
from __future__ import annotations

import os

RUNNER = os.environ.get("GRADER_RUNNER") == "1"     # the judge's runner executing a notebook for its feedback
                                                    # (the scoreboard's --in-notebook runs say 0: the learner's lab)


def in_judge() -> bool:
    """Inside the judge's sandboxed runner: ``GRADER_IN_JUDGE=1``, which grader.judge.remote sets on
    every run (the scoreboard's --in-notebook runs set ``GRADER_RUNNER=0`` but are judged all the same).
    Nsight Compute and compute-sanitizer do not run there: a notebook's grading time is dear."""
    return os.environ.get("GRADER_IN_JUDGE") == "1" or os.environ.get("GRADER_RUNNER") == "1"
