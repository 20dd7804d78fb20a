"""The judge's own build of a submission's ``%%cuda`` cells, in a sandbox with no learner Python.

Compiling reads the learner's source (an ``#include`` of an absolute path would read a file, and a
compiler can be fed hostile input), so it runs sandboxed too; but only NVRTC runs there, never the
learner's Python, so the cubins it writes are the learner's source compiled honestly. The judge
grades the SASS of these builds, and the runner loads these very modules (``$GRADER_PRECOMPILED``)
instead of compiling its own: what is inspected is what runs.

    python -P -s -m grader.judge.build CELLS.json OUTDIR      (inside the sandbox)

Builds are cached by the host under ``<cache root>/judge`` (written only from these builds).
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path


def build_cells(cells: list, outdir: Path) -> None:
    """Compile each ``{"line", "body", "key"}`` into outdir/key.cubin + key.json (or key.json with
    the compile error)."""
    from grader.cuda.compiler import CompileError, compile_cuda, module_meta
    from grader.cuda.magic import parse_magic_line

    outdir.mkdir(parents=True, exist_ok=True)
    for cell in cells:
        try:
            a = parse_magic_line(cell["line"])
            m = compile_cuda(cell["body"], name=a["name"], arch=a["arch"], options=a["options"],
                             kernels=a["kernels"] or None, compiler="nvcc" if a["nvcc"] else "auto", use_cache=False)
        except CompileError as exc:
            (outdir / f"{cell['key']}.json").write_text(json.dumps({"error": str(exc), "log": exc.log[-20000:]}))
            continue
        except Exception as exc:        # a malformed magic line, an option no compiler takes
            (outdir / f"{cell['key']}.json").write_text(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
            continue
        (outdir / f"{cell['key']}.cubin").write_bytes(m.cubin)
        meta = module_meta(m.name, m.source, m.arch, m.log, m.compiler, m.options, m.symbol_mapping, m.compile_seconds)
        (outdir / f"{cell['key']}.json").write_text(json.dumps(meta))


def compile_plan(cells: list, sandbox, scratch: Path, timeout_s: float = 600) -> dict:
    """Build the cells in ``sandbox`` (host side): key -> CudaModule, or key -> error text.

    Cached builds are reused; the modules are also copied to ``scratch/modules`` for the runner."""
    from grader.cuda.compiler import load_module
    import hashlib

    from grader.cuda.toolchain import cache_root, default_arch, headers_digest, nvrtc_version

    from .sandbox import SCRATCH, Bounded, python_executable, sandbox_env

    arch = default_arch()
    cache = cache_root() / "judge"
    modules_dir = scratch / "modules"
    modules_dir.mkdir(parents=True, exist_ok=True)
    todo, out = [], {}

    toolchain = hashlib.sha256(f"{arch} {headers_digest()} {nvrtc_version()}".encode()).hexdigest()[:12]

    def cached(cell):
        return cache / f"{toolchain}-{cell['key']}"

    for cell in cells:
        if not cached(cell).with_suffix(".json").is_file():
            todo.append(cell)
    if todo:
        work = scratch / "build"
        work.mkdir(exist_ok=True)
        (work / "cells.json").write_text(json.dumps(todo))
        cmd = sandbox.command([python_executable(), "-P", "-s", "-m", "grader.judge.build", f"{SCRATCH}/build/cells.json",
                               f"{SCRATCH}/build/out"], scratch, sandbox_env({"GRADER_CUDA_ARCH": arch}), gpu=False)
        box = Bounded(cmd, wall_s=timeout_s, memory_bytes=8 * 2**30, stdin=None, stdout=None,
                      stderr_path=work / "build.log")
        box.wait()
        cache.mkdir(parents=True, exist_ok=True)
        for cell in todo:
            for suffix in (".json", ".cubin"):
                made = work / "out" / f"{cell['key']}{suffix}"
                if made.is_file():
                    shutil.copy(made, cached(cell).with_suffix(suffix))
            if not cached(cell).with_suffix(".json").is_file():
                out[cell["key"]] = f"the compiler did not finish ({box.why or 'no result'})"
    for cell in cells:
        if cell["key"] in out:
            continue
        meta = json.loads(cached(cell).with_suffix(".json").read_text())
        if "error" in meta:
            out[cell["key"]] = meta["error"]
            continue
        cubin = cached(cell).with_suffix(".cubin").read_bytes()
        out[cell["key"]] = load_module(cubin, meta, cache_key=cell["key"])
        shutil.copy(cached(cell).with_suffix(".cubin"), modules_dir / f"{cell['key']}.cubin")
        shutil.copy(cached(cell).with_suffix(".json"), modules_dir / f"{cell['key']}.json")
    return out


def main() -> int:
    cells = json.loads(Path(sys.argv[1]).read_text())
    build_cells(cells, Path(sys.argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
