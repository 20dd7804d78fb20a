"""score: turn a speed measurement into nbgrader points.

A graded speed cell ends with the number this returns; nbgrader takes a test
cell's numeric result as partial credit. The rule is linear:

    fraction ≤ floor  → 0 points
    fraction ≥ full   → all points, where full = target × (1 − NOISE)
    in between        → points × (fraction − floor) / (full − floor), rounded to 0.01

NOISE (3 %) is the run-to-run spread of a graded figure on one GPU (dev/integrity/noise.py
measures it): a result within the noise below the target earns the full points, so
re-running a kernel that meets the target cannot take its point away. The rule is
continuous -- no step anywhere -- so a result near any boundary moves by at most
points × noise / (full − floor) between runs, never by a whole point.

The result is always a finite float in [0, points]: nbgrader gives FULL credit
for a negative or non-numeric result, and fails on one above the maximum, so
this function never returns anything else. Without a GPU it prints why and
returns 0.0 (no error: the cell is simply not earned).
"""
from __future__ import annotations

import math

from .timing import Measurement

NOISE = 0.03   # relative run-to-run spread of a graded figure: a grace band below the target


def points_for(fraction: float, target: float, floor: float, points: float) -> float:
    if not (0 <= floor < target):
        raise ValueError(f"need 0 ≤ floor < target, got floor={floor}, target={target}")
    if fraction is None or not math.isfinite(fraction) or fraction <= floor:
        return 0.0
    full = max(target * (1 - NOISE), floor + (target - floor) / 2)   # a narrow band keeps a slope
    share = min(1.0, (fraction - floor) / (full - floor))
    return round(points * share, 2)


def speed_points(m: Measurement, *, target: float, floor: float, points: float) -> float:
    """Print the measurement against the target and return the points it earns."""
    if not m.measured:
        where = "a CUDA GPU" if m.note == "no GPU" else "the GPU it needs"
        print(f"{m.label}: speed not graded: {m.note} (0 of {points:g} points). "
              f"Run this notebook on {where} for speed points.")
        return 0.0
    earned = points_for(m.fraction, target, floor, points)
    print(str(m))
    print(f"target {100 * target:.0f}% of {m.peer_name}, within {100 * NOISE:.0f}% noise "
          f"(floor {100 * floor:.0f}%): "
          f"{earned:g} of {points:g} points")
    return float(earned)
