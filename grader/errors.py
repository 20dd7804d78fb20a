"""The grader's exceptions, in one place that imports nothing else of the grader.

Each renders in IPython as one red line and its message, without a traceback wall.
"""
from __future__ import annotations


class CheckFailed(AssertionError):
    """The kernel gave a wrong answer (or could not be checked). The message says where and why."""

    def _render_traceback_(self):
        return [f"\x1b[31m{type(self).__name__}\x1b[0m: " + str(self)]


class GraderModified(CheckFailed):
    """Something the grader relies on was replaced or changed in this notebook."""


class NotGradedHere(CheckFailed):
    """This machine cannot run the check (no GPU, or not the GPU the problem needs)."""


class KernelTimeout(RuntimeError):
    """A kernel ran past its time bound and was stopped (simulator) or given up on (GPU)."""

    def _render_traceback_(self):
        return [f"KernelTimeout: {self}"]


class LibraryCall(RuntimeError):
    """The launch function computed on the host or through a library, not with a kernel."""


class NotWrittenYet(NotImplementedError):
    """A kernel of an exercise not written yet was launched (a %%cuda cell that still holds
    ``// YOUR CODE HERE``, a Numba kernel that still raises NotImplementedError): refused, never run.
    Renders in IPython as the one-line verdict, wherever the launch came from (a check, a demo)."""

    def _render_traceback_(self):
        return [f"\x1b[31mnot implemented yet\x1b[0m: {self}"]
