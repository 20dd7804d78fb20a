"""What chapter 02's GPU experiments share (measure.py, perf.py, tune_rows.py).

Checking, timing and peers are the grader's own: grader.check and its halves run_case + verdict
(correctness), grader.measure / grader.speed.timed / grader.bench (grader.timing: L2 flushed, head
start, CUDA events, the median), grader.speed (the graded cell) and grader.peers (each problem's
peer, run on the problem's own inputs). This module only:

* runs the lessons' cells as the solution notebooks define them (:func:`load`, grader.notebooks);
* makes a problem's device arguments as grader.speed makes them (:func:`device_args`, grader.arrays);
* checks many launch functions against one reference (:func:`checker`: run_case + verdict, the
  reference of a large input computed once instead of once per check);
* reads the figure grader.speed measured, from the record it writes ($GRADER_RECORD) (:func:`graded`);
* the head-start study of perf.py times through grader.speed.timed_checked with another timer; the
  graded cells always use grader.timing.EventTimer() with its adaptive head start.

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

import numpy as np  # noqa: E402

import grader  # noqa: E402  (before numba: it picks GPU or simulator)
from grader.speed import TimedCase  # noqa: E402
from grader.notebooks import run_cells  # noqa: E402

SOL = ROOT / "solutions" / "02_reduce"


def load(notebook: str, cell_ids: list) -> dict:
    """Run the cells ``cell_ids`` of a chapter-02 solution notebook (its setup cell first)."""
    return run_cells(SOL / notebook, ["setup", *cell_ids])


def device_args(problem, size, seed: int = 0):
    """(inputs on the host, their device views, poisoned outputs {name: (flat, view)}) at ``size``,
    as grader.speed makes them (grader.speed.TimedCase)."""
    case = TimedCase(problem, size, seed)
    return case.inputs, case.dev_in, case.outs


def args_of(dev_in: dict, outs: dict) -> list:
    """The launch function's arguments: inputs, then output views."""
    return list(dev_in.values()) + [view for _, view in outs.values()]


def checker(problem, size, inputs: dict | None = None, seed: int = 0):
    """check(launch) -> [] or the verdict's failure lines: grader.check's run_case + verdict on the
    problem's inputs at ``size`` (``inputs``, or made from ``seed``; the reference computed once,
    shared by every launch checked)."""
    from grader.check import run_case, verdict

    inputs = problem.make_inputs(np.random.default_rng(seed), size) if inputs is None else inputs
    want = problem.reference(**inputs)

    def check(launch) -> list:
        return verdict(problem, size, inputs, run_case(launch, problem, size, inputs), want)
    return check


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
