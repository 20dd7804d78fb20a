"""integrity: in-notebook checks a learner's code cannot quietly switch off (within reason).

Advisory: points come from the judge (grader.judge), which runs no learner code. In the notebook
the learner's cells and the grader share one Python process, so nothing here is tamper-proof;
it catches honest mistakes and casual patches early, for instant feedback:

* **No kernel launched.** Every top-level kernel launch (Numba on a GPU, Numba's
  simulator, ``%%cuda`` kernels) is counted; ``check`` fails a launch function that
  launched none ("no kernel was launched"): computing the answer with NumPy or torch
  on the host and copying it in earns nothing.
* **A patched grader.** At ``import grader`` (the lesson's first cell, before any
  learner code) we record the functions checking and timing rely on -- the grader's
  own, and ``time``, ``secrets``, NumPy's and Numba's that they call -- with their
  code objects and defaults, and each course Problem's fields when first checked. ``verify``
  (run by ``check`` and ``speed`` after the learner's launch function returns) raises
  :class:`GraderModified` naming what changed.

What it cannot catch (a cell that rebinds ``grader`` or replaces ``grader.check`` itself never
reaches this code) does not matter for points: the judge grades from its own process.
"""
from __future__ import annotations

import sys

from .errors import GraderModified
from .launches import launch_count, note_launch  # noqa: F401  (check reads the count here)

_counting = False
_recorded: dict = {}          # (owner name, attribute) -> (object, code, defaults, kwdefaults)
_problems: dict = {}          # id(problem) -> (problem, fingerprint)


# ---------------------------------------------------------------- launch counting
def _is_stub(dispatcher, depth: int = 0, seen=None) -> bool:
    """Whether a Numba kernel (or a device function it calls) still holds the exercise's
    ``raise NotImplementedError()``: on a GPU a non-debug kernel ignores ``raise``, so the stub would run."""
    seen = set() if seen is None else seen
    fn = getattr(dispatcher, "py_func", None)
    code = getattr(fn, "__code__", None)
    if code is None or id(dispatcher) in seen or depth > 4:
        return False
    seen.add(id(dispatcher))
    if "NotImplementedError" in code.co_names:
        return True
    scope = getattr(fn, "__globals__", {})
    return any(_is_stub(scope[name], depth + 1, seen) for name in code.co_names
               if hasattr(scope.get(name), "py_func"))


def refuse_numba_stubs() -> None:
    """On a GPU, a Numba kernel whose code still raises NotImplementedError is refused at launch with
    the one-line "not implemented yet" (grader.check.explain), never launched. Installed at import."""
    from .backend import SIMULATOR

    if SIMULATOR:
        return                          # the simulator raises the kernel's own NotImplementedError
    from numba.cuda.dispatcher import _LaunchConfiguration

    original = _LaunchConfiguration.__call__
    if getattr(original, "_refuses_stubs", False):
        return
    verdicts: dict = {}

    def launch(self, *args):
        key = id(self.dispatcher)
        if key not in verdicts:
            verdicts[key] = _is_stub(self.dispatcher)
        if verdicts[key]:
            name = getattr(self.dispatcher, "__name__", None) or getattr(self.dispatcher.py_func, "__name__", "kernel")
            from .errors import NotWrittenYet

            raise NotWrittenYet(f"the kernel `{name}` still raises NotImplementedError (the exercise's stub): "
                                "write it and run its cell again; it is not launched until then.")
        return original(self, *args)

    launch._refuses_stubs = True
    _LaunchConfiguration.__call__ = launch


def count_launches() -> None:
    """Count Numba launches on a real GPU (the simulator and %%cuda kernels count themselves)."""
    global _counting
    if _counting:
        return
    from .backend import SIMULATOR

    if not SIMULATOR:
        from numba.cuda.dispatcher import _LaunchConfiguration

        original = _LaunchConfiguration.__call__

        def counted(self, *args):
            note_launch()
            return original(self, *args)

        _LaunchConfiguration.__call__ = counted
    _counting = True


# ---------------------------------------------------------------- what must not change
def _state(obj):
    fn = getattr(obj, "__func__", obj)
    return (obj, getattr(fn, "__code__", None), getattr(fn, "__defaults__", None),
            getattr(fn, "__kwdefaults__", None))


def _watch(owner, owner_name: str, names) -> None:
    for name in names:
        if hasattr(owner, name):
            _recorded[(owner_name, name)] = (owner, _state(getattr(owner, name)))
            attr = getattr(owner, name)
            if isinstance(attr, type):                # a class: its methods and properties too
                for k, v in vars(attr).items():
                    if callable(v) or isinstance(v, property):
                        target = v.fget if isinstance(v, property) else v
                        _recorded[(f"{owner_name}.{name}", k)] = (attr, _state(v), target)


def snapshot() -> None:
    """Record what checking and timing rely on. Called once, at ``import grader``."""
    import secrets
    import time

    import numpy as np

    from importlib import import_module

    # the modules (grader.check and grader.speed are also the names of the verbs)
    mods = [import_module(f"grader.{m}") for m in ("check", "speed", "timing", "score", "compare", "arrays", "peers")]
    grader = sys.modules["grader"]
    _watch(grader, "grader", ["check", "speed", "measure", "bench", "points_for", "speed_points",
                              "CheckFailed", "Problem"])
    for mod in (*mods, sys.modules[__name__]):
        names = [k for k, v in vars(mod).items() if callable(v) and not k.startswith("__")]
        _watch(mod, mod.__name__, names)
    _watch(time, "time", ["perf_counter", "perf_counter_ns", "time", "monotonic", "sleep"])
    _watch(secrets, "secrets", ["randbits"])
    _watch(np, "numpy", ["isfinite", "abs", "array_equal", "argwhere", "full", "prod", "median",
                         "percentile", "asarray", "allclose", "isclose"])
    _watch(np.random, "numpy.random", ["default_rng"])


def _numba_watch() -> None:
    """Numba's CUDA API is loaded by the lesson's first cell: record it on first use."""
    cuda = sys.modules.get("numba.cuda")
    if cuda is not None and ("numba.cuda", "to_device") not in _recorded:
        _watch(cuda, "numba.cuda", ["to_device", "device_array", "synchronize", "event",
                                    "event_elapsed_time"])


def trust(problem) -> None:
    """Accept a problem built outside grader.problems (a test's variant) from now on."""
    _problems[id(problem)] = (problem, _fingerprint(problem))


def record_problems(namespace: dict) -> None:
    """Record the fields of every Problem a grader.problems module defines, as it is imported
    (by the lesson's setup cell, before any learner code)."""
    from .problem import Problem

    for value in list(namespace.values()):
        if isinstance(value, Problem):
            trust(value)


def _fingerprint(problem) -> tuple:
    out = []
    for k, v in sorted(vars(problem).items()):
        if callable(v):
            out.append((k, _state(v)))
        else:
            out.append((k, repr(v)))
    return tuple(out)


def verify(problem=None) -> None:
    """Raise GraderModified if anything recorded was replaced or changed."""
    _numba_watch()
    changed = []
    for (owner_name, name), entry in _recorded.items():
        owner, state = entry[0], entry[1]
        try:
            now = vars(owner).get(name) if isinstance(owner, type) else getattr(owner, name)
        except AttributeError:
            now = None
        if now is None or _state(now) != state:
            changed.append(f"{owner_name}.{name}")
    if problem is not None:
        known = _problems.get(id(problem))
        if known is None or known[0] is not problem:
            changed.append(f"the problem `{getattr(problem, 'name', problem)}` (not one the course defines)")
        elif _fingerprint(problem) != known[1]:
            changed.append(f"the problem `{problem.name}` (its sizes, reference or tolerances)")
    if changed:
        raise GraderModified(
            f"the grader was modified in this notebook ({', '.join(changed[:3])}"
            f"{' …' if len(changed) > 3 else ''} changed): graded cells earn nothing. Restart the "
            "kernel and remove the code that changes the grader, NumPy, Numba or `time`.")
