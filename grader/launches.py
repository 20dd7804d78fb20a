"""A count of kernel launches, so a check can tell "a kernel ran" from "the host computed it".

Every launcher adds to it: Numba on a GPU (patched in by grader.integrity), Numba's simulator
(grader.sim) and compiled cells (grader.cuda.module). Imports nothing.
"""
from __future__ import annotations

_launches = 0


def note_launch() -> None:
    global _launches
    _launches += 1


def launch_count() -> int:
    return _launches
