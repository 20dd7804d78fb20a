"""What chapter 01's GPU experiment (measure.py) takes from the grader.

Checking, timing and peers are the grader's own: grader.check (correctness), grader.measure and
grader.bench (grader.timing: L2 flushed, head start, CUDA events, the median) and grader.peers (the
copy ceiling). This module only:

* loads the lessons' kernels as the solution notebooks define them (:func:`load`, grader.notebooks);
* makes a problem's device arguments as grader.speed makes them (:func:`device_args`, grader.arrays).

Import it first: it puts the repository on sys.path and imports grader (before numba).
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:          # run as a script: import the repository's grader
    sys.path.insert(0, str(ROOT))

import grader  # noqa: E402  (before numba: it picks GPU or simulator)
from grader.speed import TimedCase  # noqa: E402
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
