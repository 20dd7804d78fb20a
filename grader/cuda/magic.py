"""The ``%%cuda NAME`` cell magic: compile the cell, bind the module to NAME, say what happened.
(``%%nvcc NAME``, registered beside it, builds a host library instead: grader.cuda.host.)

    %%cuda hg -k "gemm<V3>" [--arch sm_90a] [--nvcc] [--log] [--no-cache] [nvcc-style flags]

While the compiler runs, one line says what is compiling and for which architecture, with the
seconds elapsed; when it is done the line becomes a summary: the time (or "from the cache"), then
per kernel its registers, spills and launch shape. Everything goes to stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import threading
import time

from .compiler import CompileError, compile_cuda


def parse_magic_line(line: str) -> dict:
    ap = argparse.ArgumentParser(prog="%%cuda", add_help=False, allow_abbrev=False)
    ap.add_argument("name")
    ap.add_argument("--arch", default=None)
    ap.add_argument("--nvcc", action="store_true")
    ap.add_argument("--kernel", "-k", action="append", default=[], help="name expression (templates)")
    ap.add_argument("--log", action="store_true", help="print warnings and the ptxas report")
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("--quiet", action="store_true", help="no progress or summary lines")
    ap.add_argument("--opt", action="append", default=[], help="extra nvcc-style flag")
    try:
        ns, extra = ap.parse_known_args(shlex.split(line))
    except SystemExit:
        raise CompileError("usage: %%cuda NAME [--arch sm_90a] [--nvcc] [-k 'tmpl<..>'] [--log] [flags...]",
                           name="%%cuda") from None
    return dict(name=ns.name, arch=ns.arch, nvcc=ns.nvcc, kernels=ns.kernel, log=ns.log,
                no_cache=ns.no_cache, quiet=ns.quiet, options=list(ns.opt) + extra)


def summary(module) -> str:
    """What a learner wants to know once a cell is compiled."""
    how = ("from the cache" if module.from_cache
           else f"compiled in {module.compile_seconds:.1f} s with {module.compiler}")
    lines = [f"{module.name}: {how}, for {module.arch}"]
    resources = module.resources
    for kernel in module.kernel_names:
        r = resources.get(kernel) or resources.get(module.symbol(kernel), {})
        text = f"  {kernel}:"
        if r:
            spills = r["spill_stores"] + r["spill_loads"]
            text += f" {r['registers']} registers, " + ("no spills" if not spills else
                                                         f"SPILLS {r['spill_stores']} B stored / {r['spill_loads']} B loaded")
        shape = module.launch_shape(kernel)
        if shape:
            text += f"; launches with {shape}"
        lines.append(text)
    return "\n".join(lines)


class _Progress:
    """A status line that counts seconds while the compiler runs (NVRTC releases the GIL)."""

    def __init__(self):
        self.handle, self.text, self.start = None, "", time.perf_counter()
        self._stop = threading.Event()
        self._thread = None

    def begin(self, text: str) -> None:
        self.text, self.start = text, time.perf_counter()
        try:
            from IPython import get_ipython
            from IPython.display import display

            if get_ipython() is not None:
                self.handle = display({"text/plain": text + " …"}, raw=True, display_id=True)
        except ImportError:
            pass
        if self.handle is None:
            print(text + " …", flush=True)
            return
        self._thread = threading.Thread(target=self._tick, daemon=True)
        self._thread.start()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self.handle.update({"text/plain": f"{self.text} … {time.perf_counter() - self.start:.0f} s"}, raw=True)

    def end(self, text: str) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.handle is not None:
            self.handle.update({"text/plain": text}, raw=True)
        else:
            print(text, flush=True)


def cell_key(line: str, body: str) -> str:
    """Identifies a ``%%cuda`` cell (its magic line and body): the judge's build of a learner's cell
    and the runner's load of it must agree on it."""
    import hashlib

    return hashlib.sha256((line.strip() + "\n" + body.rstrip("\n")).encode()).hexdigest()[:32]   # IPython adds a newline


def _precompiled(line: str, cell: str):
    """The module the judge compiled from exactly this cell (``$GRADER_PRECOMPILED``), if any."""
    folder = os.environ.get("GRADER_PRECOMPILED")
    if not folder:
        return None
    from pathlib import Path

    from .compiler import load_module

    key = cell_key(line, cell)
    cubin, meta = Path(folder) / f"{key}.cubin", Path(folder) / f"{key}.json"
    if not cubin.is_file():
        return None
    return load_module(cubin.read_bytes(), json.loads(meta.read_text()), cache_key=key)


def cuda_cell(line: str, cell: str, namespace: dict | None = None):
    """Body of ``%%cuda``: compile ``cell``, bind the module in ``namespace``, report."""
    a = parse_magic_line(line)
    module = _precompiled(line, cell)
    if module is not None:                  # graded: the judge compiled this very cell already
        if namespace is not None:
            namespace[a["name"]] = module
        if not a["quiet"]:
            print(summary(module))
        return module
    progress = _Progress()
    try:
        module = compile_cuda(cell, name=a["name"], arch=a["arch"], options=a["options"],
                              kernels=a["kernels"] or None, compiler="nvcc" if a["nvcc"] else "auto",
                              use_cache=not a["no_cache"], progress=None if a["quiet"] else progress.begin)
    except CompileError:
        if progress.text:
            progress.end(f"{progress.text}: FAILED after {time.perf_counter() - progress.start:.1f} s")
        raise
    if namespace is not None:
        namespace[a["name"]] = module
    if not a["quiet"]:
        if progress.text:
            progress.end(summary(module))
        else:
            print(summary(module))
    if a["log"]:
        module.print_log()
    return module


def register_magic(ipython=None) -> None:
    """Register ``%%cuda`` in the running IPython (nothing outside IPython)."""
    if ipython is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return
        ipython = get_ipython()
    if ipython is None:
        return

    def cuda(line, cell):
        cuda_cell(line, cell, ipython.user_ns)     # returns nothing: the module is in the namespace

    cuda.__doc__ = "%%cuda NAME [--arch sm_90a] [--nvcc] [-k 'tmpl<..>'] [--log] [nvcc flags]: compile CUDA C++."
    ipython.register_magic_function(cuda, magic_kind="cell", magic_name="cuda")

    def nvcc(line, cell):
        from .host import nvcc_cell

        nvcc_cell(line, cell, ipython.user_ns)     # a host library (grader.cuda.host): never graded

    nvcc.__doc__ = "%%nvcc NAME [--arch sm_90a] [nvcc flags]: build host + device code into a shared library."
    ipython.register_magic_function(nvcc, magic_kind="cell", magic_name="nvcc")


def load_ipython_extension(ipython) -> None:     # %load_ext grader.cuda.magic
    register_magic(ipython)
