"""Compiled CUDA C++ / CuTe cells.

Learners write CUDA C++ (inline PTX where needed) or CuTe in a notebook cell::

    %%cuda vadd
    extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) c[i] = a[i] + b[i];
    }

and get back a :class:`CudaModule` named ``vadd`` in the notebook namespace.
The same works from plain Python with :func:`compile_cuda`.

Compilation
-----------
* NVRTC (through ``cuda.core.Program``) compiles the cell to a cubin for one
  architecture.  ``nvcc -cubin`` is used instead when the learner asks for it
  (``--nvcc`` / ``compiler="nvcc"``) or when an option NVRTC does not know is
  given (the switch is noted in ``module.log``).
* The architecture is the current GPU's (``sm_90a`` on an H100, ``sm_100a`` on
  a B200: the ``a`` targets, so wgmma / tcgen05 / setmaxnreg are available),
  or the one named with ``arch=`` / ``--arch``.  With no GPU the default is
  **sm_90a** (:data:`DEFAULT_ARCH`, overridable by ``GRADER_CUDA_ARCH``), so
  Hopper kernels can be compiled and their SASS inspected on any laptop.
* Include paths are found, never typed: ``grader/include`` (``course.cuh``),
  the CUTLASS/CuTe headers inside the ``nvidia-cutlass`` wheel, and CUDA's
  ``include`` and ``include/cccl`` (``CUDA_HOME`` / ``CUDA_PATH`` /
  ``/usr/local/cuda`` / the directory of ``nvcc``; without a toolkit, the
  headers of the nvidia-cuda-runtime / -cccl wheels if installed, plus NVRTC's
  bundled headers; CuTe needs ``cuda_runtime_api.h`` from one of these).  NVRTC runs with ``-default-device`` (CuTe needs it), C++17, and
  ``-Xptxas -v`` so the register / spill report lands in ``module.log``.
* Kernels are found by their plain names when declared ``extern "C"``.
  Templates (or any C++-mangled kernel) are named by *name expressions*:
  ``compile_cuda(src, kernels=["tile_gemm<64, 32>"])`` then
  ``module["tile_gemm<64, 32>"]`` (NVRTC only).

Caching
-------
Every build is stored under ``$GRADER_CACHE_DIR`` (default
``~/.cache/gpu-kernel-course/cubin``) keyed by a hash of the source, the
options, the architecture, the compiler's version and the helper headers.  A
hit never calls a compiler: ``module.from_cache`` is True and
``STATS["compiles"]`` does not move.

Errors and warnings
-------------------
A failed build raises :class:`CompileError`; its message quotes the
compiler's diagnostics against the learner's own cell line numbers, and in
IPython it is shown without a Python traceback.  Warnings and the ptxas report
are never written to stderr (nbgrader zeroes graded cells that write there):
they are kept in ``module.log``; ``module.print_log()`` prints them to stdout.

Launching (needs a GPU)
-----------------------
``module.NAME[grid, block](*args)``, ``module.NAME[grid, block, shared](*args)``
or ``module.NAME(*args, grid=..., block=..., shared=0, stream=None)``.
Arguments may be torch CUDA tensors, numba device arrays / anything with
``__cuda_array_interface__``, ``cuda.core`` buffers, raw integer addresses, or
Python / numpy scalars.  Scalars are typed from the kernel's C parameter list,
which is read from the ``__global__`` declaration in the source (``int n`` ->
int32, ``float alpha`` -> float32, ``size_t`` -> uint64, any pointer ->
64-bit address).  Where the declaration cannot be read (templates, macros)
the parameter sizes reported by the driver decide (4-byte int -> int32, 8 ->
int64; 4-byte float -> float32, 8 -> float64); numpy scalars and ctypes
values are always passed exactly as given.  Dynamic shared memory above
48 KiB is opted into automatically.

Importing this module needs neither a GPU nor torch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

__all__ = [
    "DEFAULT_ARCH",
    "STATS",
    "CompileError",
    "LaunchError",
    "CudaModule",
    "CudaKernel",
    "compile_cuda",
    "default_arch",
    "gpu_available",
    "include_dirs",
    "cache_dir",
    "register_magic",
    "load_ipython_extension",
]

#: Architecture used when no GPU is present and none is named.
DEFAULT_ARCH = "sm_90a"

#: Counters that let tests prove a cache hit never compiled anything.
STATS = {"compiles": 0, "nvrtc": 0, "nvcc": 0, "cache_hits": 0}

_CACHE_FORMAT = 1
_PKG_DIR = Path(__file__).resolve().parent
COURSE_INCLUDE = _PKG_DIR / "include"

# Architectures whose feature-specific ("a") target is the useful default on
# that GPU: wgmma/setmaxnreg on Hopper, tcgen05 on Blackwell.
_ARCH_SPECIFIC = {90, 100, 101, 103, 110, 120, 121}


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------
class CompileError(Exception):
    """A cell failed to compile.

    ``str(err)`` is the compact report; ``err.log`` the full compiler log;
    ``err.diagnostics`` a list of ``(line, kind, message)`` for errors in the
    cell itself (line numbers are the cell's own, starting at 1).
    """

    def __init__(self, message: str, log: str = "", diagnostics=None, name: str = "cell"):
        super().__init__(message)
        self.log = log
        self.name = name
        self.diagnostics = list(diagnostics or [])

    @property
    def lines(self) -> list[int]:
        """The cell's line numbers with errors (sorted, unique)."""
        return sorted({d[0] for d in self.diagnostics if d[1] == "error"})

    def _render_traceback_(self):  # IPython shows these lines instead of a traceback
        return [f"CompileError: {self.name}"] + str(self).splitlines()


class LaunchError(RuntimeError):
    """A kernel could not be launched (bad arguments, no GPU, ...)."""

    def _render_traceback_(self):
        return ["LaunchError: " + line for line in str(self).splitlines()[:1]] + str(self).splitlines()[1:]


# ---------------------------------------------------------------------------
# Finding things
# ---------------------------------------------------------------------------
_gpu_cache: dict[str, Any] = {}


def gpu_available() -> bool:
    """True when a CUDA driver and at least one device are present (cheap, cached)."""
    if "ok" not in _gpu_cache:
        ok = False
        try:
            from cuda.bindings import driver

            (err,) = driver.cuInit(0)
            if int(err) == 0:
                err, n = driver.cuDeviceGetCount()
                ok = int(err) == 0 and n > 0
        except Exception:
            ok = False
        _gpu_cache["ok"] = ok
    return _gpu_cache["ok"]


_tls = threading.local()


def _device():
    """The current cuda.core Device, made current once per thread."""
    dev = getattr(_tls, "device", None)
    if dev is None:
        from cuda.core import Device

        dev = Device()
        dev.set_current()
        _tls.device = dev
    return dev


def default_arch() -> str:
    """``sm_XY`` (with the ``a`` suffix where it unlocks features) of the current
    GPU; :data:`DEFAULT_ARCH` (or ``$GRADER_CUDA_ARCH``) when there is none."""
    env = os.environ.get("GRADER_CUDA_ARCH")
    if env:
        return _normalise_arch(env)
    if gpu_available():
        try:
            major, minor = _device().compute_capability
            cc = 10 * major + minor
            return f"sm_{cc}a" if cc in _ARCH_SPECIFIC else f"sm_{cc}"
        except Exception:
            pass
    return DEFAULT_ARCH


def _normalise_arch(arch: str | int) -> str:
    a = str(arch).strip().lower()
    a = a.replace("compute_", "sm_")
    if re.fullmatch(r"\d+[af]?", a):
        a = "sm_" + a
    if not re.fullmatch(r"sm_\d{2,3}[af]?", a):
        raise ValueError(f"not a GPU architecture: {arch!r} (expected e.g. sm_80, sm_89, sm_90a, sm_100a)")
    return a


def _site_dirs() -> list[Path]:
    out = []
    for p in sys.path:
        if p and ("site-packages" in p or "dist-packages" in p):
            out.append(Path(p))
    return out


_paths_cache: dict[str, Any] = {}


def cutlass_include_dir() -> Path | None:
    """The folder holding ``cute/tensor.hpp`` (from the nvidia-cutlass wheel,
    ``$CUTLASS_PATH`` / ``$CUTLASS_HOME``, or a CUTLASS checkout)."""
    if "cutlass" in _paths_cache:
        return _paths_cache["cutlass"]
    cands: list[Path] = []
    for env in ("CUTLASS_PATH", "CUTLASS_HOME", "CUTLASS_DIR"):
        if os.environ.get(env):
            cands += [Path(os.environ[env]) / "include", Path(os.environ[env])]
    try:
        import importlib.util

        spec = importlib.util.find_spec("cutlass_library")
        if spec and spec.submodule_search_locations:
            for loc in spec.submodule_search_locations:
                cands.append(Path(loc) / "source" / "include")
    except Exception:
        pass
    for sd in _site_dirs():
        cands += [sd / "cutlass_library" / "source" / "include", sd / "cutlass" / "include"]
    found = next((c for c in cands if (c / "cute" / "tensor.hpp").is_file()), None)
    _paths_cache["cutlass"] = found
    return found


def cuda_home() -> Path | None:
    """A CUDA toolkit root holding ``include/cuda_runtime.h`` (or None)."""
    if "cuda_home" in _paths_cache:
        return _paths_cache["cuda_home"]
    cands = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(str(Path(nvcc).resolve().parent.parent))
    cands += ["/usr/local/cuda"]
    found = None
    for c in cands:
        if c and (Path(c) / "include" / "cuda_runtime.h").is_file():
            found = Path(c)
            break
    _paths_cache["cuda_home"] = found
    return found


def include_dirs() -> list[Path]:
    """Include directories given to every build, in search order."""
    dirs = [COURSE_INCLUDE]
    cut = cutlass_include_dir()
    if cut:
        dirs.append(cut)
    home = cuda_home()
    if home:
        dirs.append(home / "include")
        if (home / "include" / "cccl").is_dir():
            dirs.append(home / "include" / "cccl")
    else:
        # No toolkit: CUDA headers from pip wheels (nvidia-cuda-runtime, -cccl), if any;
        # NVRTC's bundled headers cover the rest (see _to_program_options).
        for sd in _site_dirs():
            for sub in ("cu13/include", "cu12/include", "cuda_runtime/include", "cuda_cccl/include"):
                d = sd / "nvidia" / sub
                if (d / "cuda_runtime_api.h").is_file() or (d / "cuda" / "std").is_dir():
                    dirs.append(d)
                if (d / "cccl").is_dir():
                    dirs.append(d / "cccl")
    return dirs


def nvcc_path() -> str | None:
    home = cuda_home()
    if home and (home / "bin" / "nvcc").is_file():
        return str(home / "bin" / "nvcc")
    return shutil.which("nvcc")


def cache_dir() -> Path:
    d = os.environ.get("GRADER_CACHE_DIR")
    base = Path(d) if d else Path.home() / ".cache" / "gpu-kernel-course" / "cubin"
    return base


def _nvrtc_version() -> str:
    if "nvrtc" not in _paths_cache:
        from cuda.bindings import nvrtc

        err, major, minor = nvrtc.nvrtcVersion()
        _paths_cache["nvrtc"] = f"nvrtc {major}.{minor}"
    return _paths_cache["nvrtc"]


def _nvcc_version() -> str:
    if "nvcc" not in _paths_cache:
        exe = nvcc_path()
        if not exe:
            _paths_cache["nvcc"] = None
        else:
            out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
            m = re.search(r"V(\d+\.\d+\.\d+)", out)
            _paths_cache["nvcc"] = "nvcc " + (m.group(1) if m else out.strip()[-40:])
    return _paths_cache["nvcc"]


def _headers_digest() -> str:
    """Hash of things a build depends on beyond the cell: our helper headers and
    the CUTLASS version (the CUDA headers' version follows the compiler's)."""
    if "hdr" not in _paths_cache:
        h = hashlib.sha256()
        for p in sorted(COURSE_INCLUDE.glob("*")):
            if p.is_file():
                h.update(p.name.encode())
                h.update(p.read_bytes())
        try:
            import importlib.metadata as md

            h.update(md.version("nvidia-cutlass").encode())
        except Exception:
            pass
        h.update(str(cutlass_include_dir()).encode())
        h.update(str(cuda_home()).encode())
        _paths_cache["hdr"] = h.hexdigest()[:16]
    return _paths_cache["hdr"]


# ---------------------------------------------------------------------------
# Options: nvcc-style flags, translated for NVRTC where it can take them
# ---------------------------------------------------------------------------
class _NeedsNvcc(Exception):
    pass


def _to_program_options(flags: Sequence[str], arch: str, name: str):
    """Translate nvcc-style flags into ``cuda.core.ProgramOptions`` keyword args.
    Raises _NeedsNvcc for a flag NVRTC cannot take."""
    kw: dict[str, Any] = dict(
        name=name + ".cu",
        arch=arch,
        std="c++17",
        device_as_default_execution_space=True,
        include_path=[str(p) for p in include_dirs()],
        ptxas_options=["-v"],
    )
    if cuda_home() is None:
        kw["use_bundled_headers"] = True  # NVRTC's own copy of the CUDA / CCCL headers
    ptxas = kw["ptxas_options"]
    defines: list = []
    undefs: list = []
    incs = kw["include_path"]
    it = iter(flags)
    for f in it:
        def arg():
            if "=" in f:
                return f.split("=", 1)[1]
            try:
                return next(it)
            except StopIteration:
                raise _NeedsNvcc(f)

        if f in ("-lineinfo", "--generate-line-info"):
            kw["lineinfo"] = True
        elif f in ("-G", "--device-debug"):
            kw["debug"] = True
        elif f in ("-use_fast_math", "--use_fast_math"):
            kw["use_fast_math"] = True
        elif f.startswith(("-maxrregcount", "--maxrregcount")):
            kw["max_register_count"] = int(arg())
        elif f.startswith(("-Xptxas", "--ptxas-options")):
            ptxas.extend(a for a in arg().split(",") if a and a != "-v")
        elif f.startswith(("-std", "--std")):
            kw["std"] = arg()
        elif f.startswith(("--ftz", "-ftz")):
            kw["ftz"] = arg() in ("true", "1")
        elif f.startswith(("--fmad", "-fmad")):
            kw["fma"] = arg() in ("true", "1")
        elif f.startswith(("--prec-div", "-prec-div")):
            kw["prec_div"] = arg() in ("true", "1")
        elif f.startswith(("--prec-sqrt", "-prec-sqrt")):
            kw["prec_sqrt"] = arg() in ("true", "1")
        elif f in ("--restrict", "-restrict"):
            kw["restrict"] = True
        elif f.startswith(("-diag-suppress", "--diag-suppress")):
            kw.setdefault("diag_suppress", []).extend(int(x) for x in arg().split(","))
        elif f in ("-w", "--disable-warnings"):
            kw["disable_warnings"] = True
        elif f.startswith("-D"):
            d = f[2:] or next(it)
            defines.append(tuple(d.split("=", 1)) if "=" in d else d)
        elif f.startswith("-U"):
            undefs.append(f[2:] or next(it))
        elif f.startswith("-I"):
            incs.append(f[2:] or next(it))
        else:
            raise _NeedsNvcc(f)
    if defines:
        kw["define_macro"] = defines
    if undefs:
        kw["undefine_macro"] = undefs
    return kw


# ---------------------------------------------------------------------------
# Logs and diagnostics
# ---------------------------------------------------------------------------
_DIAG = re.compile(r"^(?P<file>[^\s()][^()]*?)\((?P<line>\d+)\): (?P<kind>error|warning|catastrophic error|remark)[^:]*: (?P<msg>.*)$")
_NVCC_DIAG = re.compile(r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+):(?:\d+:)? (?P<kind>error|warning)[^:]*: (?P<msg>.*)$")
_PTXAS_ERR = re.compile(r"^ptxas(?: application ptx input, line \d+;|\s+\S+, line \d+;)?\s*(?:fatal|error)\s*:\s*(?P<msg>.*)$")


def _shorten_paths(text: str) -> str:
    """Replace long include prefixes by <cutlass>/, <cuda>/, <course>/."""
    subs = []
    cut = cutlass_include_dir()
    if cut:
        subs.append((str(cut) + "/", "<cutlass>/"))
    home = cuda_home()
    if home:
        subs.append((str(home / "include") + "/", "<cuda>/"))
        subs.append((str(home.resolve() / "include") + "/", "<cuda>/"))
    subs.append((str(COURSE_INCLUDE) + "/", "<course>/"))
    for a, b in subs:
        text = text.replace(a, b)
    return text


def _clean_log(log: str, cellfile: str) -> str:
    log = log.replace("\x00", "")
    # nvcc reports its temporary path; show the cell's own name instead
    log = re.sub(r"(?m)^\S*/" + re.escape(cellfile), cellfile, log)
    return _shorten_paths(log).strip()


_AT_CELL_LINE = re.compile(r"at line (\d+) of (\S+)")


def _parse_errors(log: str, cellfile: str) -> list[dict]:
    """Compiler log -> [{file, line, kind, msg, cell_line, ptxas}] in order.
    ``cell_line`` is the cell's own line: the diagnostic's line when it is in
    the cell, else the outermost "at line N of <cell>" of its instantiation
    chain (an error deep inside CuTe points back at the learner's call)."""
    out: list[dict] = []
    cur = None
    for raw in log.splitlines():
        m = _DIAG.match(raw) or _NVCC_DIAG.match(raw)
        if m:
            kind = m.group("kind")
            in_cell = Path(m.group("file")).name == cellfile
            cur = dict(file=m.group("file"), line=int(m.group("line")), kind=kind,
                       msg=m.group("msg").strip(), cell_line=int(m.group("line")) if in_cell else None,
                       ptxas=False)
            out.append(cur)
            continue
        pm = _PTXAS_ERR.match(raw)
        if pm:
            cur = None
            msg = pm.group("msg").strip()
            if not (msg.startswith("Ptx assembly aborted") and any(e["kind"] != "warning" for e in out)):
                out.append(dict(file="ptxas", line=0, kind="error", msg=msg, cell_line=None, ptxas=True))
            continue
        if cur is not None and cur["cell_line"] is None:
            for lm in _AT_CELL_LINE.finditer(raw):
                if Path(lm.group(2)).name == cellfile:
                    cur["cell_line"] = int(lm.group(1))
    return out


def _diagnostics(log: str, cellfile: str) -> list[tuple[int, str, str]]:
    """(cell line, kind, message) for every diagnostic that maps to the cell."""
    return [(e["cell_line"], "error" if e["kind"] != "warning" and e["kind"] != "remark" else e["kind"], e["msg"])
            for e in _parse_errors(log, cellfile) if e["cell_line"] is not None]


def _error_report(log: str, cellfile: str, source_lines: list[str], limit: int = 5) -> str:
    """Compact report: the first `limit` distinct errors, each pointing at the
    cell's own line (with that line quoted); an error inside a header names
    the header but not its whole instantiation chain."""
    errs = [e for e in _parse_errors(log, cellfile) if e["kind"] not in ("warning", "remark")]
    if not errs:
        tail = [ln for ln in log.splitlines() if ln.strip()][-limit:]
        return "\n".join(tail) or "compilation failed (no message)"
    blocks, seen, extra = [], set(), {}
    for e in errs:
        if not e["ptxas"] and e["cell_line"] and e["cell_line"] in seen:
            extra[e["cell_line"]] = extra.get(e["cell_line"], 0) + 1  # knock-on errors of one line
            continue
        if e["ptxas"]:
            key, lines = ("ptxas", e["msg"]), ["ptxas (inline PTX / code generation): " + e["msg"]]
        else:
            L = e["cell_line"]
            inside = "" if e["file"] == "ptxas" or Path(e["file"]).name == cellfile else f" (inside {e['file']}:{e['line']})"
            key = L if L else (e["file"], e["line"], e["msg"])
            head = f"line {L}: error{inside}: {e['msg']}" if L else f"{e['file']}:{e['line']}: error: {e['msg']}"
            lines = [head]
            if L and 1 <= L <= len(source_lines):
                lines.append(f"    {L:4d} | {source_lines[L - 1].rstrip()}")
        if key in seen:
            continue
        seen.add(key)
        blocks.append(lines)
    for b in blocks:
        m = re.match(r"line (\d+):", b[0])
        if m and extra.get(int(m.group(1))):
            n = extra[int(m.group(1))]
            b.append(f"    (+{n} follow-on error{'s' if n > 1 else ''} from this line, in err.log)")
    text = "\n".join("\n".join(b) for b in blocks[:limit])
    if len(blocks) > limit:
        text += f"\n... and {len(blocks) - limit} more errors (the full log is err.log)"
    return text


_RES = re.compile(
    r"Function properties for (?P<fn>\S+)\s*\n"
    r".*?(?P<stack>\d+) bytes stack frame, (?P<ss>\d+) bytes spill stores, (?P<sl>\d+) bytes spill loads\s*\n"
    r"(?:.*\n)*?.*?Used (?P<regs>\d+) registers(?P<rest>[^\n]*)",
)


def parse_ptxas_report(log: str) -> dict[str, dict[str, int]]:
    """Per-function ``{registers, stack, spill_stores, spill_loads, smem, cmem0}``
    from a ``ptxas -v`` report (mangled names, as ptxas prints them)."""
    out: dict[str, dict[str, int]] = {}
    for m in _RES.finditer(log):
        rest = m.group("rest")
        smem = re.search(r"(\d+) bytes smem", rest)
        cmem = re.search(r"(\d+) bytes cmem\[0\]", rest)
        out[m.group("fn").strip("'")] = dict(
            registers=int(m.group("regs")),
            stack=int(m.group("stack")),
            spill_stores=int(m.group("ss")),
            spill_loads=int(m.group("sl")),
            smem=int(smem.group(1)) if smem else 0,
            cmem0=int(cmem.group(1)) if cmem else 0,
        )
    return out


# ---------------------------------------------------------------------------
# Kernel signatures (read from the source, for typing scalar arguments)
# ---------------------------------------------------------------------------
_SCALAR_TYPES = {
    "bool": "bool",
    "char": "int8", "signed char": "int8", "unsigned char": "uint8", "int8_t": "int8", "uint8_t": "uint8",
    "short": "int16", "unsigned short": "uint16", "int16_t": "int16", "uint16_t": "uint16",
    "int": "int32", "signed": "int32", "unsigned": "uint32", "unsigned int": "uint32",
    "int32_t": "int32", "uint32_t": "uint32",
    "long": "int64", "unsigned long": "uint64", "long long": "int64", "unsigned long long": "uint64",
    "int64_t": "int64", "uint64_t": "uint64", "size_t": "uint64", "ptrdiff_t": "int64",
    "intptr_t": "int64", "uintptr_t": "uint64",
    "float": "float32", "double": "float64",
    "half": "float16", "__half": "float16",
}


def _strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


_KERNEL_DECL = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*|__cluster_dims__\s*\([^)]*\)\s*|static\s+|inline\s+)*"
    r"void\s+(?:__launch_bounds__\s*\([^)]*\)\s*|__cluster_dims__\s*\([^)]*\)\s*)*(?P<name>[A-Za-z_]\w*)\s*\((?P<params>[^)]*)\)"
)


@dataclasses.dataclass
class Param:
    name: str
    ctype: str      # as written, qualifiers removed
    kind: str       # "pointer", "scalar" or "other"
    dtype: str | None = None  # numpy dtype name for scalars


def _parse_param(text: str) -> Param:
    t = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict|__grid_constant__|struct)\b", " ", text)
    t = re.sub(r"(\w+)\s*\[\s*\d*\s*\]", r"* \1", t)  # "float x[]" is a pointer
    t = " ".join(t.replace("*", " * ").replace("&", " & ").split())
    toks = t.split(" ")
    name = toks[-1] if len(toks) > 1 and re.fullmatch(r"[A-Za-z_]\w*", toks[-1]) and toks[-1] not in _SCALAR_TYPES else ""
    typ = " ".join(toks[:-1] if name else toks)
    typ_clean = re.sub(r"\b(std|cuda::std)::", "", typ)
    if "*" in typ:
        return Param(name, typ, "pointer", "uint64")
    base = typ_clean.replace("signed int", "int").replace("long int", "long").strip()
    if base in _SCALAR_TYPES:
        return Param(name, typ, "scalar", _SCALAR_TYPES[base])
    return Param(name, typ, "other", None)


def parse_kernel_signatures(source: str) -> dict[str, list[Param]]:
    """Plain name -> parameter list for every ``__global__`` declaration that
    is not a template (templates are typed from the driver at launch)."""
    src = _strip_comments(source)
    out: dict[str, list[Param]] = {}
    for m in _KERNEL_DECL.finditer(src):
        before = src[max(0, m.start() - 200): m.start()]
        if re.search(r"template\s*<[^;{}]*>\s*(extern\s+\"C\"\s*)?$", before):
            continue
        params = m.group("params").strip()
        if any(re.search(rf"#\s*define\s+{re.escape(tok)}\b", src) for tok in re.findall(r"[A-Za-z_]\w*", params)):
            continue      # a macro in the parameter list: typed from the driver at launch, like templates
        plist = [] if params in ("", "void") else [_parse_param(p) for p in _split_params(params)]
        out.setdefault(m.group("name"), plist)
    return out


def _split_params(s: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


# ---------------------------------------------------------------------------
# cubin symbols (no GPU needed): a minimal ELF64 symbol-table reader
# ---------------------------------------------------------------------------
def cubin_functions(cubin: bytes) -> list[str]:
    """Names of the kernels (entry functions) in a cubin: the symbols that have
    a ``.nv.info.<name>`` section, i.e. carry kernel parameter info."""
    import struct

    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        return []
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    shstr = secs[shstrndx]

    def sname(off):
        base = shstr[4] + off
        return cubin[base: cubin.index(b"\0", base)].decode()

    names = [sname(s[0]) for s in secs]
    kernels = [n[len(".nv.info."):] for n in names if n.startswith(".nv.info.")]
    if kernels:
        return kernels
    return [n[len(".text."):] for n in names if n.startswith(".text.")]


# ---------------------------------------------------------------------------
# The cache
# ---------------------------------------------------------------------------
def _cache_key(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


def _cache_load(key: str):
    d = cache_dir()
    cub, meta = d / f"{key}.cubin", d / f"{key}.json"
    try:
        return cub.read_bytes(), json.loads(meta.read_text())
    except (OSError, ValueError):
        return None


def _cache_store(key: str, cubin: bytes, meta: dict) -> None:
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        for suffix, data in ((".cubin", cubin), (".json", json.dumps(meta, indent=1).encode())):
            fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, d / f"{key}{suffix}")
    except OSError:
        pass  # a read-only home must not break compiling


# ---------------------------------------------------------------------------
# Compilers
# ---------------------------------------------------------------------------
class _LogSink:
    def __init__(self):
        self.parts: list[str] = []

    def write(self, s):
        self.parts.append(s if isinstance(s, str) else s.decode(errors="replace"))

    def text(self):
        return "".join(self.parts)


_compile_lock = threading.Lock()


def _run_nvrtc(code: str, kw: dict, name_exprs: Sequence[str]):
    import warnings

    from cuda.core import Program, ProgramOptions

    opts = ProgramOptions(**kw)
    sink = _LogSink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nothing may reach stderr from a graded cell
        prog = Program(code, "c++", opts)
        try:
            obj = prog.compile("cubin", name_expressions=tuple(name_exprs), logs=sink)
        except Exception as e:  # NVRTCError carries the log in its message
            msg = str(e)
            log = msg.split("compilation log:", 1)[1] if "compilation log:" in msg else msg
            if "NVRTC_ERROR_INVALID_OPTION" in msg:
                raise _NeedsNvcc(msg) from None
            return None, log, {}
        finally:
            try:
                prog.close()
            except Exception:
                pass
    mapping = dict(obj.symbol_mapping or {})
    mapping = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in mapping.items()}
    return bytes(obj.code), sink.text(), mapping


def _run_nvcc(code: str, cellfile: str, arch: str, flags: Sequence[str]):
    exe = nvcc_path()
    if not exe:
        raise CompileError("nvcc was requested but no CUDA toolkit (nvcc) was found", name=cellfile)
    with tempfile.TemporaryDirectory(prefix="cudacell-") as tmp:
        src = Path(tmp) / cellfile
        src.write_text(code)
        out = Path(tmp) / "out.cubin"
        cmd = [exe, "-cubin", f"-arch={arch}", "-std=c++17", "--expt-relaxed-constexpr",
               "-Xptxas", "-v", "-o", str(out)]
        cmd += [f"-I{p}" for p in include_dirs()]
        cmd += list(flags) + [str(src)]
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        log = (p.stdout + p.stderr).replace(str(src), cellfile).replace(tmp + "/", "")
        if p.returncode != 0 or not out.is_file():
            return None, log
        return out.read_bytes(), log


_PRELUDE = "#define GPU_COURSE_CELL 1\n"


def compile_cuda(
    source: str,
    name: str | None = None,
    arch: str | None = None,
    options: Iterable[str] = (),
    kernels: Iterable[str] | None = None,
    compiler: str = "auto",
    use_cache: bool = True,
) -> "CudaModule":
    """Compile CUDA C++ source to a cubin and return a :class:`CudaModule`.

    Parameters
    ----------
    source : the cell's CUDA C++ (may ``#include "course.cuh"`` and CuTe headers).
    name : used in messages and as the virtual file name (``name.cu``).
    arch : ``sm_80`` / ``sm_89`` / ``sm_90a`` / ``sm_100a`` ...; default: the
        current GPU's, else :data:`DEFAULT_ARCH`.
    options : nvcc-style flags (``-lineinfo``, ``-maxrregcount=64``,
        ``-Xptxas=-O3``, ``-DTILE=64`` ...).  A flag NVRTC cannot take makes
        the build go through nvcc.
    kernels : name expressions to instantiate and make findable, e.g.
        ``["gemm<128, 64>"]`` (NVRTC only).
    compiler : ``"auto"`` (NVRTC, nvcc where needed), ``"nvrtc"`` or ``"nvcc"``.
    use_cache : look up / store the build in :func:`cache_dir`.
    """
    name = name or "cell"
    if not re.fullmatch(r"[A-Za-z_][\w]*", name):
        name = re.sub(r"\W", "_", name) or "cell"
    arch = _normalise_arch(arch) if arch else default_arch()
    flags = [str(o) for o in options]
    name_exprs = list(kernels or [])
    if compiler not in ("auto", "nvrtc", "nvcc"):
        raise ValueError("compiler must be 'auto', 'nvrtc' or 'nvcc'")
    cellfile = f"{name}.cu"
    # The prelude is followed by #line 1 so diagnostics use the cell's numbering.
    code = _PRELUDE + f'#line 1 "{cellfile}"\n' + source

    use_nvcc = compiler == "nvcc"
    kw = None
    notes = ""
    if not use_nvcc:
        try:
            kw = _to_program_options(flags, arch, name)
        except _NeedsNvcc as e:
            if compiler == "nvrtc":
                raise ValueError(f"NVRTC does not accept option {e}") from None
            use_nvcc = True
            notes = f"note: NVRTC does not take option {e}; built with nvcc instead\n"
    if use_nvcc and name_exprs:
        raise ValueError("kernels= (name expressions) needs NVRTC; with nvcc, declare the kernels extern \"C\"")
    version = _nvcc_version() if use_nvcc else _nvrtc_version()
    key = _cache_key(dict(fmt=_CACHE_FORMAT, code=code, flags=flags, arch=arch, compiler=version,
                          kernels=name_exprs, headers=_headers_digest()))
    if use_cache:
        hit = _cache_load(key)
        if hit is not None:
            STATS["cache_hits"] += 1
            cubin, meta = hit
            return CudaModule(name=name, source=source, arch=arch, cubin=cubin, log=meta.get("log", ""),
                              compiler=meta.get("compiler", version), options=flags,
                              symbol_mapping=meta.get("symbol_mapping", {}), from_cache=True,
                              compile_seconds=0.0, cache_key=key)

    t0 = time.perf_counter()
    with _compile_lock:
        cubin = None
        mapping: dict[str, str] = {}
        if not use_nvcc:
            try:
                STATS["compiles"] += 1
                STATS["nvrtc"] += 1
                cubin, log, mapping = _run_nvrtc(code, kw, name_exprs)
            except _NeedsNvcc as e:
                if compiler == "nvrtc":
                    raise ValueError(f"NVRTC rejected an option: {e}") from None
                notes = f"note: NVRTC rejected an option ({str(e).splitlines()[0]}); built with nvcc instead\n"
                use_nvcc = True
                version = _nvcc_version()
        if use_nvcc:
            STATS["compiles"] += 1
            STATS["nvcc"] += 1
            cubin, log = _run_nvcc(code, cellfile, arch, flags)
    seconds = time.perf_counter() - t0
    log = notes + _clean_log(log, cellfile)
    if cubin is None:
        diags = _diagnostics(log, cellfile)
        raise CompileError(_error_report(log, cellfile, source.splitlines()), log=log,
                           diagnostics=diags, name=name)
    if use_cache:
        _cache_store(key, cubin, dict(log=log, compiler=version, arch=arch, symbol_mapping=mapping,
                                      options=flags, seconds=round(seconds, 4), name=name))
    return CudaModule(name=name, source=source, arch=arch, cubin=cubin, log=log, compiler=version,
                      options=flags, symbol_mapping=mapping, from_cache=False,
                      compile_seconds=seconds, cache_key=key)


# ---------------------------------------------------------------------------
# The compiled module and its kernels
# ---------------------------------------------------------------------------
class CudaModule:
    """A compiled cell: ``cubin`` bytes plus everything needed to inspect and
    launch its kernels.

    Attributes: ``name``, ``arch``, ``cubin``, ``log`` (warnings + ptxas report),
    ``compiler`` (e.g. ``"nvrtc 13.5"``), ``from_cache``, ``compile_seconds``,
    ``kernel_names``, ``resources`` (ptxas report per kernel).
    Kernels: ``module.NAME`` or ``module["name<expr>"]`` -> :class:`CudaKernel`.
    """

    def __init__(self, *, name, source, arch, cubin, log, compiler, options, symbol_mapping,
                 from_cache, compile_seconds, cache_key):
        self.name = name
        self.source = source
        self.arch = arch
        self.cubin = cubin
        self.log = log
        self.compiler = compiler
        self.options = list(options)
        self.symbol_mapping = dict(symbol_mapping)
        self.from_cache = from_cache
        self.compile_seconds = compile_seconds
        self.cache_key = cache_key
        self.signatures = parse_kernel_signatures(source)
        self.functions = cubin_functions(cubin)  # symbol names as in the cubin
        self._objcode = None
        self._kernels: dict[str, CudaKernel] = {}

    # -- names -------------------------------------------------------------
    @property
    def kernel_names(self) -> list[str]:
        """Names that find a kernel: plain names of ``extern "C"`` kernels,
        then the name expressions given at compile time."""
        plain = [f for f in self.functions if not f.startswith("_Z")]
        return plain + [e for e in self.symbol_mapping if e not in plain]

    def symbol(self, name: str) -> str:
        """Cubin symbol for a kernel name, name expression or mangled name."""
        if name in self.functions:
            return name
        if name in self.symbol_mapping:
            return self.symbol_mapping[name]
        # a C++ (mangled) kernel asked for by its plain name: _Z<len><name>...
        pat = re.compile(r"^_Z(?:N\d+\w+?)?%d%s" % (len(name), re.escape(name)))
        hits = [f for f in self.functions if pat.match(f)]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise KeyError(f"{name!r} is ambiguous in {self.name}: {hits}; compile with kernels=[...] name expressions")
        raise KeyError(f"no kernel {name!r} in {self.name}; kernels: {', '.join(self.kernel_names) or '(none)'}")

    def __getitem__(self, name: str) -> "CudaKernel":
        sym = self.symbol(name)
        if sym not in self._kernels:
            plain = name if name in self.signatures else None
            self._kernels[sym] = CudaKernel(self, name, sym, self.signatures.get(plain) if plain else None)
        return self._kernels[sym]

    def __getattr__(self, name: str) -> "CudaKernel":
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(str(e)) from None

    def __dir__(self):
        return sorted(set(super().__dir__()) | {n for n in self.kernel_names if n.isidentifier()})

    def __contains__(self, name: str) -> bool:
        try:
            self.symbol(name)
            return True
        except KeyError:
            return False

    # -- reports -----------------------------------------------------------
    @property
    def resources(self) -> dict[str, dict[str, int]]:
        """ptxas report per kernel (keys: plain names where known)."""
        rep = parse_ptxas_report(self.log)
        inv = {v: k for k, v in self.symbol_mapping.items()}
        return {inv.get(k, k): v for k, v in rep.items()}

    @property
    def warnings(self) -> list[str]:
        return [ln for ln in self.log.splitlines() if ": warning" in ln]

    def print_log(self) -> None:
        """Print the compiler's warnings and ptxas report to stdout."""
        print(self.log or "(empty log)", file=sys.stdout)

    def sass(self, kernel: str | None = None) -> str:
        """Disassembly (text) of one kernel or of the whole cubin."""
        from . import sass as _sass

        return _sass.disassemble(self, kernel)

    def save(self, path: str | os.PathLike) -> Path:
        p = Path(path)
        p.write_bytes(self.cubin)
        return p

    # -- loading -----------------------------------------------------------
    def _load(self):
        if self._objcode is None:
            if not gpu_available():
                raise LaunchError("no CUDA GPU is available: this module can be inspected (SASS, resources) but not run")
            from cuda.core import ObjectCode

            _device()
            self._objcode = ObjectCode.from_cubin(self.cubin, name=self.name, symbol_mapping=self.symbol_mapping)
        return self._objcode

    def __repr__(self):
        src = "cache" if self.from_cache else f"{self.compile_seconds:.2f}s"
        return (f"<CudaModule {self.name!r} {self.arch} [{self.compiler}, {src}] "
                f"kernels: {', '.join(self.kernel_names) or '-'}>")


class CudaKernel:
    """One kernel of a :class:`CudaModule`.

    ``k[grid, block](*args)``, ``k[grid, block, shared](*args)``,
    ``k[grid, block, shared, stream](*args)`` or
    ``k(*args, grid=, block=, shared=0, stream=None, cluster=None)``.
    """

    def __init__(self, module: CudaModule, name: str, symbol: str, params: list[Param] | None):
        self.module = module
        self.name = name
        self.symbol = symbol
        self.params = params
        self._kernel = None
        self._shared_set = 0
        self._arg_sizes = None
        self._configs: dict = {}

    def __repr__(self):
        sig = ", ".join(f"{p.ctype} {p.name}".strip() for p in self.params) if self.params is not None else "..."
        return f"<CudaKernel {self.name}({sig}) in {self.module.name} [{self.module.arch}]>"

    # -- inspection ---------------------------------------------------------
    @property
    def resources(self) -> dict[str, int]:
        """ptxas report: registers, stack, spill_stores, spill_loads, smem (no GPU needed)."""
        return parse_ptxas_report(self.module.log).get(self.symbol, {})

    @property
    def attributes(self) -> dict[str, int]:
        """Driver's view (needs a GPU): num_regs, shared_size_bytes,
        local_size_bytes, const_size_bytes, max_threads_per_block, ..."""
        a = self._get().attributes
        names = ["num_regs", "shared_size_bytes", "local_size_bytes", "const_size_bytes",
                 "max_threads_per_block", "max_dynamic_shared_size_bytes", "binary_version", "ptx_version"]
        return {n: getattr(a, n) for n in names}

    def sass(self) -> str:
        return self.module.sass(self.symbol)

    # -- launching ----------------------------------------------------------
    def _get(self):
        if self._kernel is None:
            obj = self.module._load()
            # always the lowered (mangled) symbol: cuda.core 1.2.0 hands a template's
            # name-expression mapping to the driver as str and fails ("expected bytes")
            self._kernel = obj.get_kernel(self.symbol.encode())
        return self._kernel

    def __getitem__(self, cfg):
        if not isinstance(cfg, tuple) or not 2 <= len(cfg) <= 4:
            raise LaunchError("use kernel[grid, block], kernel[grid, block, shared] or kernel[grid, block, shared, stream]")
        grid, block, *rest = cfg
        shared = rest[0] if rest else 0
        stream = rest[1] if len(rest) > 1 else None

        def launcher(*args, cluster=None):
            return self(*args, grid=grid, block=block, shared=shared, stream=stream, cluster=cluster)

        return launcher

    def _set_max_dynamic_shared(self, nbytes: int):
        if nbytes <= max(self._shared_set, 48 * 1024):
            return
        from cuda.bindings import driver

        k = self._get()
        handle = k.handle
        attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        if isinstance(handle, driver.CUkernel):
            dev = _device()
            (err,) = driver.cuKernelSetAttribute(attr, int(nbytes), handle, driver.CUdevice(dev.device_id))
        else:
            (err,) = driver.cuFuncSetAttribute(handle, attr, int(nbytes))
        if int(err) != 0:
            raise LaunchError(f"cannot give {self.name} {nbytes} bytes of dynamic shared memory ({err!r}); "
                              f"the device allows {_device().properties.max_shared_memory_per_block_optin}")
        self._shared_set = nbytes

    def _sizes(self) -> list[int] | None:
        if self._arg_sizes is None:
            try:
                info = self._get().arguments_info
                self._arg_sizes = [int(getattr(i, "size", i[1] if isinstance(i, tuple) else 0)) for i in info]
            except Exception:
                self._arg_sizes = []
        return self._arg_sizes or None

    def prepare_args(self, args: Sequence[Any]) -> list[Any]:
        """Convert Python arguments to exactly-typed kernel arguments."""
        import numpy as np

        params = self.params
        if params is not None and len(params) != len(args):
            raise LaunchError(f"{self.name} takes {len(params)} arguments ({', '.join(p.name or p.ctype for p in params)}), got {len(args)}")
        sizes = self._sizes() if params is None else None
        out = []
        for i, a in enumerate(args):
            p = params[i] if params is not None else None
            label = f"argument {i}" + (f" ({p.ctype} {p.name})" if p else "")
            ptr = _device_pointer(a)
            if p is not None and p.kind == "pointer":
                if ptr is None:
                    raise LaunchError(f"{label}: expected a device array/tensor or an address, got {type(a).__name__}")
                out.append(np.uint64(ptr))
            elif p is not None and p.kind == "scalar":
                dt = np.dtype(p.dtype)
                if isinstance(a, (np.generic,)) and a.dtype == dt:
                    out.append(a)
                elif dt.kind in "iub" and isinstance(a, float) and not float(a).is_integer():
                    raise LaunchError(f"{label}: expected an integer, got {a!r}")
                elif ptr is not None and not isinstance(a, (int, float, np.generic)):
                    raise LaunchError(f"{label}: expected a {p.ctype}, got a {type(a).__name__}")
                else:
                    out.append(dt.type(a))
            elif isinstance(a, np.generic) or _is_ctypes(a):
                out.append(a)
            elif ptr is not None and not isinstance(a, (int, bool, float)):
                out.append(np.uint64(ptr))
            elif isinstance(a, (bool, int, float)):
                size = sizes[i] if sizes and i < len(sizes) else None
                if isinstance(a, bool):
                    out.append(np.bool_(a))
                elif isinstance(a, int):
                    out.append(np.int64(a) if size == 8 else np.int32(a))
                else:
                    out.append(np.float64(a) if size == 8 else np.float32(a))
            else:
                out.append(a)  # let cuda.core decide (e.g. a TensorMapDescriptor)
        return out

    def __call__(self, *args, grid=None, block=None, shared: int = 0, stream=None, cluster=None):
        if grid is None or block is None:
            raise LaunchError(f"launch {self.name} with grid= and block= (or {self.name}[grid, block](...))")
        from cuda.core import LaunchConfig, launch

        kernel = self._get()
        kargs = self.prepare_args(args)
        shared = int(shared or 0)
        self._set_max_dynamic_shared(shared)
        key = (_dim(grid), _dim(block), shared, None if cluster is None else _dim(cluster))
        cfg = self._configs.get(key)
        if cfg is None:
            kw = dict(grid=key[0], block=key[1], shmem_size=shared)
            if cluster is not None:
                kw["cluster"] = key[3]
            cfg = self._configs[key] = LaunchConfig(**kw)
        from .integrity import note_launch

        note_launch()
        launch(_stream_for(stream, args), cfg, kernel, *kargs)


def _dim(d):
    if isinstance(d, (list, tuple)):
        return tuple(int(x) for x in d)
    return int(d)


def _is_ctypes(a) -> bool:
    import ctypes

    return isinstance(a, (ctypes._SimpleCData, ctypes.Structure, ctypes.Union, ctypes.Array))


def _device_pointer(a) -> int | None:
    """Device address of a tensor / array / buffer, or an int taken as an address."""
    if a is None:
        return 0
    if hasattr(a, "data_ptr") and callable(a.data_ptr):  # torch
        if getattr(a, "is_cuda", True) is False:
            raise LaunchError("a torch tensor on the CPU was passed to a GPU kernel; use .cuda()")
        return int(a.data_ptr())
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0])
    h = getattr(a, "handle", None)  # cuda.core Buffer
    if h is not None and type(a).__name__ == "Buffer":
        return int(h)
    if isinstance(a, int) and not isinstance(a, bool):
        return a
    return None


def _stream_for(stream, args):
    """A cuda.core Stream: the one given; torch's current stream when torch
    tensors are passed; else the device's default stream."""
    dev = _device()
    from cuda.core import Stream

    if stream is None:
        for a in args:
            if type(a).__module__.startswith("torch") and hasattr(a, "data_ptr"):
                import torch

                stream = torch.cuda.current_stream()
                break
    if stream is None:
        return dev.default_stream
    if isinstance(stream, Stream):
        return stream
    if isinstance(stream, int):
        return dev.default_stream if stream == 0 else Stream.from_handle(stream)
    handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream
    if handle is not None:
        return dev.default_stream if int(handle) == 0 else Stream.from_handle(int(handle))
    return stream  # objects with __cuda_stream__ are accepted by cuda.core


# ---------------------------------------------------------------------------
# IPython magic
# ---------------------------------------------------------------------------
def _parse_magic_line(line: str) -> dict:
    import argparse
    import shlex

    ap = argparse.ArgumentParser(prog="%%cuda", add_help=False, allow_abbrev=False)
    ap.add_argument("name")
    ap.add_argument("--arch", default=None)
    ap.add_argument("--nvcc", action="store_true")
    ap.add_argument("--kernel", "-k", action="append", default=[], help="name expression (templates)")
    ap.add_argument("--log", action="store_true", help="print warnings and the ptxas report")
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("--opt", action="append", default=[], help="extra nvcc-style flag")
    try:
        ns, extra = ap.parse_known_args(shlex.split(line))
    except SystemExit:
        raise CompileError("usage: %%cuda NAME [--arch sm_90a] [--nvcc] [-k 'tmpl<64>'] [--log] [flags...]", name="%%cuda") from None
    return dict(name=ns.name, arch=ns.arch, nvcc=ns.nvcc, kernels=ns.kernel, log=ns.log,
                no_cache=ns.no_cache, options=list(ns.opt) + extra)


def cuda_cell_magic(line: str, cell: str, namespace: dict | None = None) -> CudaModule:
    """Body of ``%%cuda``: compile ``cell`` and bind the module in ``namespace``."""
    a = _parse_magic_line(line)
    mod = compile_cuda(cell, name=a["name"], arch=a["arch"], options=a["options"],
                       kernels=a["kernels"] or None, compiler="nvcc" if a["nvcc"] else "auto",
                       use_cache=not a["no_cache"])
    if namespace is not None:
        namespace[a["name"]] = mod
    if a["log"]:
        mod.print_log()
    return mod


def register_magic(ipython=None) -> None:
    """Register ``%%cuda`` in the running IPython (no-op outside IPython)."""
    if ipython is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return
        ipython = get_ipython()
    if ipython is None:
        return

    def cuda(line, cell):
        cuda_cell_magic(line, cell, ipython.user_ns)
        # returns None so nothing is echoed; the module is in the namespace

    cuda.__doc__ = "%%cuda NAME [--arch sm_90a] [--nvcc] [-k 'tmpl<..>'] [--log] [nvcc flags]: compile CUDA C++."
    ipython.register_magic_function(cuda, magic_kind="cell", magic_name="cuda")


def load_ipython_extension(ipython) -> None:  # %load_ext grader.cuda_cells
    register_magic(ipython)
