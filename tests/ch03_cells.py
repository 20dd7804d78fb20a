"""Run chosen code cells of a chapter-03 solution notebook and return their namespace.

The notebooks are the single source of truth for the reference kernels: the tests and
tests/gpu/measure_ch03.py execute their cells (by cell id) instead of keeping copies.
Lines starting with ``print(`` / ``grader.check(`` at top level are skipped (timings, demos).
"""
from __future__ import annotations

import linecache
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions" / "03_gemm"
_SKIP = ("print(grader.", "grader.check(", "print(grader.mode")


def cell_source(notebook: str, cell_id: str) -> str:
    nb = nbformat.read(SOLUTIONS / notebook, as_version=4)
    return next(c.source for c in nb.cells if c.get("id") == cell_id)


def load(notebook: str, cell_ids: list[str], setup: bool = True) -> dict:
    nb = nbformat.read(SOLUTIONS / notebook, as_version=4)
    by_id = {c.get("id"): c for c in nb.cells if c.cell_type == "code"}
    ns: dict = {"__name__": f"ch03_{Path(notebook).stem}"}
    for cid in (["setup"] if setup else []) + cell_ids:
        src = "\n".join(l for l in by_id[cid].source.splitlines() if not l.startswith(_SKIP))
        fname = f"{notebook}:{cid}"
        linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)   # inspect / grader.sass see it
        exec(compile(src, fname, "exec"), ns)
    return ns
