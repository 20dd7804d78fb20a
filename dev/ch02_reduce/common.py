"""What chapter 02's GPU experiment (measure.py) takes from the grader: the lessons' cells as the
solution notebooks define them (:func:`load`, grader.notebooks). Checking, timing and peers are the
grader's own (grader.check, grader.measure, grader.peers).

Import it first: it puts the repository on sys.path and imports grader (before numba).
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:          # run as a script: import the repository's grader
    sys.path.insert(0, str(ROOT))

import grader  # noqa: E402,F401  (before numba: it picks GPU or simulator)
from grader.notebooks import run_cells  # noqa: E402

SOL = ROOT / "solutions" / "02_reduce"


def load(notebook: str, cell_ids: list) -> dict:
    """Run the cells ``cell_ids`` of a chapter-02 solution notebook (its setup cell first)."""
    return run_cells(SOL / notebook, ["setup", *cell_ids])
