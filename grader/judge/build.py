"""The judge's own build of a submission's ``%%cuda`` cells, in a sandbox with no learner Python.

Compiling reads the learner's source (an ``#include`` of an absolute path would read a file, and a
compiler can be fed hostile input), so it runs sandboxed too; but only NVRTC runs there, never the
learner's Python, so the cubins it writes are the learner's source compiled honestly. The judge
grades the SASS of these builds, and the runner loads these very modules (``$GRADER_PRECOMPILED``)
instead of compiling its own: what is inspected is what runs.

    python -P -s -m grader.judge.build /judge/build/cells.json     (inside the sandbox; results on stdout)

Builds are cached by the host under ``<cache root>/judge`` (written only from these builds, each
file whole or not at all). A cell being built is built once: a second caller waits for it.
:class:`BuildAhead` builds the notebooks about to be graded in the background, on the CPU, so the
GPU does not sit idle while a compiler runs (the scoreboard, a student's grading).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

_locks: dict[str, threading.Lock] = {}       # cache file stem -> held while this process builds it
_locks_guard = threading.Lock()


def _lock(stem: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(stem, threading.Lock())


def _write_whole(path: Path, data: bytes) -> None:
    """``data`` to ``path`` through a temporary file renamed over it: a reader (another thread or
    process sharing the cache) sees the old file, or none, or all of the new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


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

    from .sandbox import write_input

    arch = default_arch()
    cache = cache_root() / "judge"
    modules_dir = inputs / "modules"
    modules_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(modules_dir, 0o755)
    out: dict = {}
    toolchain = hashlib.sha256(f"{arch} {headers_digest()} {nvrtc_version()}".encode()).hexdigest()[:12]

    def cached(cell):
        return cache / f"{toolchain}-{cell['key']}"

    def built(cell) -> bool:
        return cached(cell).with_suffix(".json").is_file()

    # each cell's lock in one order (no two callers wait on each other); a cell another thread is
    # building is then found in the cache
    locks = [_lock(stem) for stem in sorted({cached(c).name for c in cells if not built(c)})]
    for lock in locks:
        lock.acquire()
    try:
        todo = [cell for cell in cells if not built(cell)]
        if todo:
            _build_in_sandbox(todo, sandbox, inputs, arch, cache, cached, out, timeout_s)
    finally:
        for lock in reversed(locks):
            lock.release()
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


def _build_in_sandbox(todo: list, sandbox, inputs: Path, arch: str, cache: Path, cached, out: dict,
                      timeout_s: float) -> None:
    """Compile ``todo`` for ``arch`` in one sandboxed process (no GPU, lower CPU priority than the
    grading it may run beside) and write what comes back to the cache; a cell with no result gets its
    reason in ``out``."""
    from .bounds import Bounded, default_bounds
    from .protocol import Limits, ProtocolError, recv
    from .sandbox import INPUTS, python_executable, sandbox_env, write_input

    write_input(inputs, "build/cells.json", json.dumps(todo))
    cmd = sandbox.command([python_executable(), "-P", "-s", "-m", "grader.judge.build", f"{INPUTS}/build/cells.json"],
                          inputs, sandbox_env({"GRADER_CUDA_ARCH": arch}),
                          default_bounds(timeout_s, "the build's limit"), gpu=False)
    if shutil.which("nice"):
        cmd = [shutil.which("nice"), "-n", "10", *cmd]
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
                _write_whole(cached({"key": key}).with_suffix(".cubin"), arrays["cubin"].tobytes())
            else:
                break
            _write_whole(cached({"key": key}).with_suffix(".json"), json.dumps(meta).encode())
    except (ProtocolError, OSError, ValueError):
        pass
    box.wait()
    box.close()
    for cell in todo:
        if not cached(cell).with_suffix(".json").is_file():
            out[cell["key"]] = f"the compiler did not finish ({box.why or 'no result'})"


class BuildAhead:
    """The ``%%cuda`` cells of notebooks about to be graded, built in the background (sandboxed, on
    the CPU, ``workers`` at a time) into the judge's cache, in the order they were handed in; each
    notebook's grading then finds its cells built, or waits for the build already under way
    instead of starting its own. Only worth it beside a GPU: in the simulator nothing is built ahead.

        with BuildAhead(sandbox) as ahead:
            ahead.add(source_nb, release_nb, submission)     # every notebook first, then grade them
    """

    def __init__(self, sandbox, workers: int | None = None, enabled: bool | None = None):
        from concurrent.futures import ThreadPoolExecutor

        from grader.backend import SIMULATOR

        self.sandbox = sandbox
        self.enabled = (not SIMULATOR) if enabled is None else enabled
        if self.enabled:                   # the GPU's architecture and the toolchain, asked here, once
            from grader.cuda.toolchain import default_arch, headers_digest, nvrtc_version

            try:
                default_arch(), headers_digest(), nvrtc_version()
            except Exception:
                pass                       # no compiler here: each grading says so
        workers = workers or int(os.environ.get("GRADER_BUILD_AHEAD", "0")) or max(1, min(4, (os.cpu_count() or 2) // 4))
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="build-ahead") if self.enabled else None
        self.futures: list = []

    def add(self, source_nb: Path, release_nb: Path, submission: Path | None) -> None:
        """Queue the cells of one notebook (nothing for an untouched one, or one that cannot be read:
        its grading says why)."""
        if self.pool is None:
            return
        from . import plan as plans

        try:
            plan = plans.build(source_nb, release_nb, submission)
        except Exception:
            return
        if plan.cuda and not plan.untouched:
            self.futures.append(self.pool.submit(_build_ahead, plan.cuda, self.sandbox))

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


def _build_ahead(cells: list, sandbox) -> None:
    from .sandbox import host_folder, remove_host_folder

    inputs = host_folder("build-ahead-")
    try:
        compile_plan(cells, sandbox, inputs)
    except Exception:
        pass                           # the notebook's own grading builds it again and reports why
    finally:
        remove_host_folder(inputs)


def main() -> int:
    cells = json.loads(Path(sys.argv[1]).read_text())
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)                      # anything else printed goes to the log, not into the frames
    build_cells(cells, out)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
