"""What chapter 01's GPU experiments share (measure.py, perf01_variants.py, perf01_gelu_rows.py).

Checking, timing and peers are the grader's own: grader.check (correctness), grader.measure and
grader.bench (grader.timing: L2 flushed, head start, CUDA events, the median), grader.speed (the
graded cell) and grader.peers (the copy ceiling). This module only:

* loads the lessons' kernels as the solution notebooks define them (:func:`load`, grader.notebooks);
* makes a problem's device arguments as grader.speed makes them (:func:`device_args`, grader.arrays);
* reads the figure grader.speed measured, from the record it writes ($GRADER_RECORD) (:func:`graded`);
* keeps :class:`FixedHeadStart`, the timer perf01_variants.py's head-start study passes to
  grader.speed.timed_checked: the graded cells always use grader.timing.EventTimer() with its
  adaptive head start.

Import it first: it puts the repository on sys.path and imports grader (before numba).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:          # run as a script: import the repository's grader
    sys.path.insert(0, str(ROOT))

import grader  # noqa: E402  (before numba: it picks GPU or simulator)
from grader.speed import TimedCase  # noqa: E402
from grader import timing  # noqa: E402
from grader.notebooks import definitions  # noqa: E402

SOL = ROOT / "solutions" / "01_elementwise"


def load():
    """(lesson 02, lesson 03, lesson 04) namespaces: the kernels and launch functions the solution
    notebooks define (their definitions only: no checks, timings or plots)."""
    l02 = definitions(SOL / "02_bandwidth_and_roofline.ipynb", ["l02_setup", "l02_v1", "l02_v2", "l02_saxpy"])
    l03 = definitions(SOL / "03_coalescing_and_transpose.ipynb",
                      ["l03_v1", "l03_make_transpose", "l03_choose"],
                      prelude="import numpy as np\nfrom numba import cuda, float32\n"
                              "def cdiv(a, b):\n    return (a + b - 1) // b\n")
    l04 = definitions(SOL / "04_vectors_half_precision_fusion.ipynb",
                      ["l04_setup", "l04_formats", "l04_activations", "l04_v1", "l04_v2", "l04_bias_act"])
    return l02, l03, l04


def correct(launch, problem, sizes=None) -> str:
    """"ok", or "FAIL: " and the first line of grader.check's message."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            grader.check(launch, problem, sizes=sizes, quiet=True)
        return "ok"
    except grader.CheckFailed as exc:
        return "FAIL: " + str(exc).splitlines()[0][:80]


def device_args(problem, size, seed: int = 0):
    """(inputs on the host, their device views, poisoned outputs {name: (flat, view)}) at ``size``,
    as grader.speed makes them (grader.speed.TimedCase)."""
    case = TimedCase(problem, size, seed)
    return case.inputs, case.dev_in, case.outs


def args_of(dev_in: dict, outs: dict) -> list:
    """The launch function's arguments: inputs, then output views."""
    return list(dev_in.values()) + [view for _, view in outs.values()]


def graded(launch, problem, points: float = 2, **kw) -> tuple:
    """grader.speed itself (the graded cell: correctness first, outputs re-poisoned before each timed
    run, the problem's peer in the same run): (points, the measurement it recorded, as a dict)."""
    with tempfile.TemporaryDirectory(prefix="graded-") as tmp:
        path = Path(tmp) / "record.jsonl"
        before = os.environ.get("GRADER_RECORD")
        os.environ["GRADER_RECORD"] = str(path)
        try:
            pts = grader.speed(launch, problem, points=points, **kw)
        finally:
            if before is None:
                os.environ.pop("GRADER_RECORD", None)
            else:
                os.environ["GRADER_RECORD"] = before
        rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return pts, next((r for r in reversed(rows) if r.get("kind") == "speed"), {})


class FixedHeadStart(timing.EventTimer):
    """grader.timing's timer with a fixed head start (the graded timer adapts it to the host time)."""

    def __init__(self, microseconds: float):
        super().__init__(adaptive=False)
        self.microseconds = microseconds

    @property
    def head_start_us(self) -> float:
        return self.microseconds
