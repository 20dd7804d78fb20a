"""Load the definitions of a lesson notebook into a namespace, without running its checks.

Tests and GPU measurement scripts use the kernels *as the notebook defines them*, so the
notebook stays the one source of truth:

    ns = definitions("solutions/01_elementwise/02_bandwidth_and_roofline.ipynb")
    ns["launch_saxpy"]

From each code cell (all of them, or those whose id is in ``cells``) only the top-level
imports, function and class definitions and assignments run; expressions, loops and
``if`` blocks (checks, timings, plots) are skipped. An assignment that needs a name the
skipped statements would have made (NameError) is skipped too. ``prelude`` runs first:
e.g. the imports of a setup cell, without ``import grader``, to compile kernels for a GPU
on a machine without one.
"""
from __future__ import annotations

import ast

import nbformat

_KEEP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)


def code_cells(path: str, cells: list | None = None) -> list:
    nb = nbformat.read(path, as_version=4)
    out = [c for c in nb.cells if c.cell_type == "code"]
    if cells is not None:
        by_id = {c.get("id"): c for c in out}
        missing = [k for k in cells if k not in by_id]
        if missing:
            raise KeyError(f"{path}: no code cell with id {missing}")
        out = [by_id[k] for k in cells]
    return out


def definitions(path: str, cells: list | None = None, prelude: str = "", namespace: dict | None = None,
                skip_imports: tuple = ()) -> dict:
    """Run the definitions of ``path``'s code cells; return the namespace."""
    ns = {} if namespace is None else namespace
    ns.setdefault("__name__", "__lesson__")
    if prelude:
        exec(compile(prelude, f"{path}:prelude", "exec"), ns)
    for cell in code_cells(path, cells):
        tree = ast.parse(cell.source)
        for node in tree.body:
            if not isinstance(node, _KEEP):
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)) and skip_imports:
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                if any(n and n.split(".")[0] in skip_imports for n in names):
                    continue
            code = compile(ast.Module(body=[node], type_ignores=[]), f"{path}:{cell.get('id')}", "exec")
            try:
                exec(code, ns)
            except NameError:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    raise
    return ns
