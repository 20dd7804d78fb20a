"""Host libraries: CUDA C++ whose host code runs too, built by nvcc into a shared library.

A ``%%cuda`` cell is device code only (NVRTC -> cubin; Python launches its kernels). Some libraries
do their work on the host: CUTLASS 3.x's device layer (``GemmUniversalAdapter``) checks the
arguments, encodes the TMA descriptors with the driver and launches the kernel itself. Such a
source is built here, host and device code together, into a ``.so`` that Python calls through
ctypes::

    %%nvcc cl [--arch sm_90a] [nvcc flags]
    #include "cutlass/..."
    extern "C" int cutlass_gemm(const void* a, ..., void* stream) { ... }

binds a :class:`HostLibrary` to ``cl``: ``cl.function("cutlass_gemm", restype, argtypes)`` is the
ctypes function, ``cl.module`` a :class:`~grader.cuda.module.CudaModule` of its device code (the
SASS rubric and the ptxas report read it; it is never launched from Python). Builds are cached
like the cells' (source, flags, architecture, nvcc's version, the headers).

The judge never builds these (it compiles ``%%cuda`` cells only, with NVRTC, in its sandbox): a
lesson uses a host library for a demonstration beside a graded kernel, not for points. Building
one needs nvcc and a host C++ compiler; without them :func:`build_library` says so.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from . import toolchain
from .compiler import CompileError
from .diagnostics import clean_log, error_report, parse_ptxas_report


class HostLibrary:
    """A built shared library: ``path``, ``log`` (nvcc's, with the ptxas report), ``arch``,
    ``from_cache``, ``compile_seconds``; :meth:`function`; :attr:`module` (its device code)."""

    def __init__(self, *, name, source, arch, path: Path, log, from_cache, compile_seconds, options):
        self.name, self.source, self.arch, self.path, self.log = name, source, arch, Path(path), log
        self.from_cache, self.compile_seconds, self.options = from_cache, compile_seconds, list(options)
        self._lib = None
        self._module = None

    def function(self, symbol: str, restype=ctypes.c_int, argtypes=None):
        """The ctypes function ``symbol`` (declare it ``extern "C"``), typed."""
        if self._lib is None:
            self._lib = ctypes.CDLL(str(self.path))
        fn = getattr(self._lib, symbol)
        fn.restype = restype
        if argtypes is not None:
            fn.argtypes = argtypes
        return fn

    @property
    def module(self):
        """A CudaModule of the library's device code (the cubin with the most kernels), for
        ``sass.require`` and resources; it is not launched from Python."""
        if self._module is None:
            from .module import CudaModule

            cubin = _largest_cubin(self.path)
            self._module = CudaModule(name=self.name, source=self.source, arch=self.arch, cubin=cubin, log=self.log,
                                      compiler=toolchain.nvcc_version() or "nvcc", options=self.options,
                                      symbol_mapping={}, from_cache=self.from_cache,
                                      compile_seconds=self.compile_seconds, cache_key="")
        return self._module

    @property
    def resources(self) -> dict:
        """ptxas's report per kernel symbol: registers, stack, spills, shared memory."""
        return parse_ptxas_report(self.log)

    def __repr__(self):
        return f"<HostLibrary {self.name} [{self.arch}] {self.path.name}>"


def _largest_cubin(path: Path) -> bytes:
    """The device code embedded in a shared library: ``cuobjdump -xelf all``, the largest cubin."""
    with tempfile.TemporaryDirectory(prefix="hostlib-") as tmp:
        p = subprocess.run([toolchain.require_tool("cuobjdump"), "-xelf", "all", str(path)], capture_output=True,
                           text=True, cwd=tmp, env=toolchain.tool_env())
        cubins = sorted(Path(tmp).glob("*.cubin"), key=lambda f: f.stat().st_size)
        if p.returncode != 0 or not cubins:
            raise RuntimeError(f"no device code found in {path.name}: {(p.stderr or p.stdout).strip()[:300]}")
        return cubins[-1].read_bytes()


def _gencode(arch: str) -> str:
    num = arch.split("_", 1)[1]
    return f"-gencode=arch=compute_{num},code=sm_{num}"


def build_library(source: str, name: str = "lib", arch: str | None = None, options=(), use_cache: bool = True,
                  progress=None) -> HostLibrary:
    """Build ``source`` (host and device code) with nvcc into a shared library for ``arch``
    (default: the GPU's, else sm_90a), with the course's include folders (CUTLASS/CuTe too)."""
    arch = toolchain.normalise_arch(arch) if arch else toolchain.default_arch()
    exe = toolchain.tool_path("nvcc")
    if not exe:
        raise CompileError("this cell needs nvcc (the CUDA toolkit) and a host C++ compiler: it builds host "
                           "code too (a shared library), which NVRTC cannot", name=name)
    flags = ["-shared", "-Xcompiler", "-fPIC", _gencode(arch), "-std=c++17", "--expt-relaxed-constexpr",
             "-O3", "-DNDEBUG", "-Xptxas", "-v", *[str(o) for o in options]]
    cellfile = f"{name}.cu"
    key = hashlib.sha256(json.dumps(dict(fmt=1, source=source, flags=flags, arch=arch, nvcc=toolchain.nvcc_version(),
                                         headers=toolchain.headers_digest())).encode()).hexdigest()[:32]
    folder = toolchain.cache_root() / "hostlib"
    so, meta = folder / f"{key}.so", folder / f"{key}.json"
    if use_cache and so.is_file() and meta.is_file():
        m = json.loads(meta.read_text())
        return HostLibrary(name=name, source=source, arch=arch, path=so, log=m["log"], from_cache=True,
                           compile_seconds=m["seconds"], options=options)
    if progress:
        progress(f"building {name} (host and device code) for {arch} with nvcc")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hostlib-") as tmp:
        src, out = Path(tmp) / cellfile, Path(tmp) / f"{name}.so"
        src.write_text(f'#line 1 "{cellfile}"\n' + source)
        cmd = [exe, *flags, *[f"-I{d}" for d in toolchain.include_dirs()], "-o", str(out), str(src)]
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env=toolchain.tool_env())
        log = clean_log((p.stdout + p.stderr).replace(str(src), cellfile).replace(tmp + "/", ""), cellfile)
        if p.returncode != 0 or not out.is_file():
            raise CompileError(error_report(log, cellfile, source.splitlines()), log=log, name=name)
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp_so = tempfile.mkstemp(dir=folder, prefix=".tmp-")
        os.close(fd)
        shutil.copyfile(out, tmp_so)
        os.replace(tmp_so, so)
    seconds = time.perf_counter() - t0
    meta.write_text(json.dumps({"log": log, "seconds": round(seconds, 2), "command": shlex.join(cmd[1:4])}))
    return HostLibrary(name=name, source=source, arch=arch, path=so, log=log, from_cache=False,
                       compile_seconds=seconds, options=options)


def nvcc_cell(line: str, cell: str, namespace: dict | None = None) -> HostLibrary | None:
    """Body of ``%%nvcc NAME [--arch A] [flags]``: build, bind the library in ``namespace``, report."""
    args = shlex.split(line)
    if not args:
        raise CompileError("usage: %%nvcc NAME [--arch sm_90a] [nvcc flags]", name="%%nvcc")
    name, rest, arch = args[0], [], None
    it = iter(args[1:])
    for a in it:
        if a == "--arch":
            arch = next(it, None)
        elif a.startswith("--arch="):
            arch = a.split("=", 1)[1]
        else:
            rest.append(a)
    if os.environ.get("GRADER_PRECOMPILED"):       # the judge's run of the notebook: it builds %%cuda cells only
        print(f"{name}: not built in the judge's run of this notebook (a host library takes about a minute "
              "with nvcc): run the cell in your own notebook")
        return None
    lib = build_library(cell, name=name, arch=arch, options=rest, progress=lambda s: print(s + " …", flush=True))
    if namespace is not None:
        namespace[name] = lib
    how = "from the cache" if lib.from_cache else f"built in {lib.compile_seconds:.0f} s with nvcc"
    print(f"{name}: {how}, for {lib.arch}")
    for fn, r in lib.resources.items():
        spills = r["spill_stores"] + r["spill_loads"]
        print(f"  {fn[:90]}{'…' if len(fn) > 90 else ''}: {r['registers']} registers, "
              + ("no spills" if not spills else f"SPILLS {spills} B"))
    return lib


__all__ = ["HostLibrary", "build_library", "nvcc_cell"]
