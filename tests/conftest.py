"""Test set-up: the simulator unless GRADER_TEST_GPU=1 on a GPU machine.

CPU tests (the default, and CI) force Numba's CUDA simulator so they behave the
same on any machine. Tests marked ``gpu`` run only with GRADER_TEST_GPU=1 and a GPU.
"""
import os
import sys
from pathlib import Path

ON_GPU = os.environ.get("GRADER_TEST_GPU") == "1"
if not ON_GPU:
    os.environ["GRADER_FORCE_SIM"] = "1"
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if ON_GPU:
        import grader

        if not grader.SIMULATOR:
            return
    skip = pytest.mark.skip(reason="needs a GPU: run with GRADER_TEST_GPU=1 on a GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def lesson(chapter: str, notebook: str, cell_ids: list, setup: bool = True) -> dict:
    """Run cells of a solution notebook (its ``setup`` cell first) and return their namespace:
    tests use the reference kernels as the notebook defines them (grader.notebooks)."""
    from grader.notebooks import run_cells

    return run_cells(ROOT / "solutions" / chapter / notebook, (["setup"] if setup else []) + list(cell_ids))


def solution(chapter: str, notebook: str) -> Path:
    return ROOT / "solutions" / chapter / notebook
