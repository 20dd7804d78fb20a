"""Reading a lesson notebook's cells, and running chosen ones outside Jupyter.

The notebooks are the one source of truth for the reference kernels: tests, dev scripts and the
judge's runner load the kernels *as the notebook defines them* instead of keeping copies.

    ns = run_cells("solutions/03_gemm/04_mma_sync_pipeline.ipynb", ["setup", "v_hgemm", "launch"])
    ns = definitions("solutions/01_elementwise/02_bandwidth_and_roofline.ipynb")

* :func:`run_cells` runs whole cells by id, in order. A ``%%cuda`` cell is compiled with the magic's
  own code (grader.cuda.magic); top-level lines that only show something (``print(grader.…``,
  ``grader.check(``, …) are skipped with ``skip``. Each cell's source is registered with linecache
  under ``<notebook>:<cell id>`` so ``inspect`` and the SASS tools find kernels' source.
* :func:`definitions` runs only the top-level imports, functions, classes and assignments of cells
  (checks, timings, loops and plots are skipped).
"""
from __future__ import annotations

import ast
import linecache
from pathlib import Path

SHOW_ONLY = ("print(grader.", "grader.check(", "print(grader.mode")


def read(path) -> "object":
    import nbformat

    return nbformat.read(str(path), as_version=4)


def code_cells(path, ids: list | None = None) -> list:
    """The notebook's code cells (those whose id is in ``ids``, in that order)."""
    cells = [c for c in read(path).cells if c.cell_type == "code"]
    if ids is None:
        return cells
    by_id = {c.get("id"): c for c in cells}
    missing = [k for k in ids if k not in by_id]
    if missing:
        raise KeyError(f"{path}: no code cell with id {missing}")
    return [by_id[k] for k in ids]


def cell_source(path, cell_id: str) -> str:
    return code_cells(path, [cell_id])[0].source


def register_source(filename: str, source: str) -> None:
    """Make ``source`` what linecache (inspect, tracebacks, numba_sass) reads for ``filename``."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def run_source(source: str, filename: str, namespace: dict, skip: tuple = ()) -> None:
    """Run one cell's source in ``namespace``: ``%%cuda`` / ``%%nvcc`` cells through their magics, others as Python."""
    if source.startswith("%%cuda"):
        from .cuda.magic import cuda_cell

        first, _, body = source.partition("\n")
        cuda_cell(first[len("%%cuda"):].strip() + " --quiet", body, namespace)
        return
    if source.startswith("%%nvcc"):
        from .cuda.host import nvcc_cell

        first, _, body = source.partition("\n")
        nvcc_cell(first[len("%%nvcc"):].strip(), body, namespace)
        return
    if skip:
        source = "\n".join(line for line in source.splitlines() if not line.startswith(skip))
    register_source(filename, source)
    exec(compile(source, filename, "exec"), namespace)


def run_cells(path, cell_ids: list, namespace: dict | None = None, skip: tuple = SHOW_ONLY) -> dict:
    """Run the cells ``cell_ids`` of a notebook, in order; return the namespace."""
    ns = {} if namespace is None else namespace
    ns.setdefault("__name__", f"lesson_{Path(path).stem}")
    for cell in code_cells(path, cell_ids):
        run_source(cell.source, f"{Path(path).name}:{cell.get('id')}", ns, skip)
    return ns


_KEEP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)


def definitions(path, cells: list | None = None, prelude: str = "", namespace: dict | None = None,
                skip_imports: tuple = ()) -> dict:
    """Run only the definitions of ``path``'s code cells (all, or those in ``cells``).

    ``prelude`` runs first (e.g. a setup cell's imports without ``import grader``). An assignment
    that needs a name the skipped statements would have made (NameError) is skipped too; imports
    of the modules in ``skip_imports`` are left out."""
    ns = {} if namespace is None else namespace
    ns.setdefault("__name__", "__lesson__")
    if prelude:
        exec(compile(prelude, f"{path}:prelude", "exec"), ns)
    for cell in code_cells(path, cells):
        if cell.source.startswith("%%"):
            continue
        filename = f"{Path(path).name}:{cell.get('id')}"
        register_source(filename, cell.source)
        for node in ast.parse(cell.source).body:
            if not isinstance(node, _KEEP):
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)) and skip_imports:
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                if any(n and n.split(".")[0] in skip_imports for n in names):
                    continue
            code = compile(ast.Module(body=[node], type_ignores=[]), filename, "exec")
            try:
                exec(code, ns)
            except NameError:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    raise
    return ns
