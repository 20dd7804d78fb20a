"""The judge's own build of a submission's ``%%cuda`` cells, in a sandbox with no learner Python.

Compiling reads the learner's source (an ``#include`` of an absolute path would read a file, and a
compiler can be fed hostile input), so it runs sandboxed too; but only NVRTC runs there, never the
learner's Python, so the cubins it writes are the learner's source compiled honestly. The judge
grades the SASS of these builds, and the runner loads these very modules (``$GRADER_PRECOMPILED``)
instead of compiling its own: what is inspected is what runs.

    python -P -s -m grader.judge.build /judge/build/cells.json     (inside the sandbox; results on stdout)

Builds are cached by the host under ``<cache root>/judge`` (written only from these builds).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def build_cells(cells: list, out) -> None:
    """Compile each ``{"line", "body", "key"}`` and send it on ``out`` (the protocol's frames): a
    header with its key and module metadata (or the compile error) and the cubin as an array."""
    import numpy as np

    from grader.cuda.compiler import CompileError, compile_cuda, module_meta
    from grader.cuda.magic import parse_magic_line
    from grader.judge.protocol import send

    for cell in cells:
        try:
            a = parse_magic_line(cell["line"])
            m = compile_cuda(cell["body"], name=a["name"], arch=a["arch"], options=a["options"],
                             kernels=a["kernels"] or None, compiler="nvcc" if a["nvcc"] else "auto", use_cache=False)
        except CompileError as exc:
            send(out, {"key": cell["key"], "error": str(exc)[:100_000]})
            continue
        except Exception as exc:        # a malformed magic line, an option no compiler takes
            send(out, {"key": cell["key"], "error": f"{type(exc).__name__}: {exc}"[:100_000]})
            continue
        meta = module_meta(m.name, m.source, m.arch, m.log, m.compiler, m.options, m.symbol_mapping, m.compile_seconds)
        send(out, {"key": cell["key"], "meta": meta}, {"cubin": np.frombuffer(m.cubin, dtype=np.uint8)})


def _valid_meta(meta) -> bool:
    """Module metadata as build_cells sends it (grader.cuda.compiler.module_meta), with sane types."""
    if not isinstance(meta, dict):
        return False
    strings = ("name", "source", "arch", "log", "compiler")
    return all(isinstance(meta.get(k), str) for k in strings) and isinstance(meta.get("options"), list) and \
        all(isinstance(o, str) for o in meta["options"]) and isinstance(meta.get("symbol_mapping"), dict) and \
        all(isinstance(k, str) and isinstance(v, str) for k, v in meta["symbol_mapping"].items()) and \
        isinstance(meta.get("seconds", 0), (int, float))


def compile_plan(cells: list, sandbox, inputs: Path, timeout_s: float = 600) -> dict:
    """Build the cells in ``sandbox`` (host side): key -> CudaModule, or key -> error text.

    The build's results come back on its pipe (a cubin and its metadata per cell, validated and
    bounded); the host writes them to its own cache, and copies the modules the plan uses into
    ``inputs/modules``, which the runner sees read-only. Cached builds are reused."""
    import hashlib
    import os

    from grader.cuda.compiler import load_module
    from grader.cuda.toolchain import cache_root, default_arch, headers_digest, nvrtc_version

    from .protocol import Limits, ProtocolError, recv
    from .bounds import Bounded, default_bounds
    from .sandbox import INPUTS, python_executable, sandbox_env, write_input

    arch = default_arch()
    cache = cache_root() / "judge"
    modules_dir = inputs / "modules"
    modules_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(modules_dir, 0o755)
    todo, out = [], {}

    toolchain = hashlib.sha256(f"{arch} {headers_digest()} {nvrtc_version()}".encode()).hexdigest()[:12]

    def cached(cell):
        return cache / f"{toolchain}-{cell['key']}"

    for cell in cells:
        if not cached(cell).with_suffix(".json").is_file():
            todo.append(cell)
    if todo:
        write_input(inputs, "build/cells.json", json.dumps(todo))
        cmd = sandbox.command([python_executable(), "-P", "-s", "-m", "grader.judge.build", f"{INPUTS}/build/cells.json"],
                              inputs, sandbox_env({"GRADER_CUDA_ARCH": arch}),
                              default_bounds(timeout_s, "the build's limit"), gpu=False)
        box = Bounded(cmd, default_bounds(timeout_s, "the build's limit"), stdin=subprocess.DEVNULL)
        wanted = {cell["key"] for cell in todo}
        cache.mkdir(parents=True, exist_ok=True)
        try:
            for _ in todo:
                head, arrays = recv(box.proc.stdout, limits=Limits(header=16 * 2**20, arrays=256 * 2**20))
                key = head.get("key")
                if key not in wanted:
                    break
                wanted.discard(key)
                if isinstance(head.get("error"), str):
                    meta = {"error": head["error"][:100_000]}
                elif _valid_meta(head.get("meta")) and "cubin" in arrays:
                    meta = head["meta"]
                    cached({"key": key}).with_suffix(".cubin").write_bytes(arrays["cubin"].tobytes())
                else:
                    break
                cached({"key": key}).with_suffix(".json").write_text(json.dumps(meta))
        except (ProtocolError, OSError, ValueError):
            pass
        box.wait()
        box.close()
        for cell in todo:
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
        write_input(modules_dir, f"{cell['key']}.cubin", cubin)
        write_input(modules_dir, f"{cell['key']}.json", json.dumps(meta))
    return out


def main() -> int:
    cells = json.loads(Path(sys.argv[1]).read_text())
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)                      # anything else printed goes to the log, not into the frames
    build_cells(cells, out)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
