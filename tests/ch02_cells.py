"""Run chosen code cells of a chapter-02 solution notebook and return their namespace.

The notebook is the single source of truth for the reference kernels: the tests
and tests/gpu/measure_ch02.py execute its cells (by nbgrader grade_id) instead of
keeping a copy of the code.
"""
from __future__ import annotations

from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions" / "02_reduce"


def load(notebook: str, cell_ids: list[str]) -> dict:
    nb = nbformat.read(SOLUTIONS / notebook, as_version=4)
    by_id = {c.get("id"): c for c in nb.cells if c.cell_type == "code"}
    ns: dict = {"__name__": f"ch02_{Path(notebook).stem}"}
    for cid in ["setup", *cell_ids]:
        src = by_id[cid].source
        src = "\n".join(l for l in src.splitlines() if not l.startswith("print(grader.mode"))
        exec(compile(src, f"{notebook}:{cid}", "exec"), ns)
    return ns
