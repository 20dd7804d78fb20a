"""Compiling a cell: CUDA C++ source -> cubin for one architecture, cached.

* NVRTC (through ``cuda.core.Program``) by default; nvcc when asked (``compiler="nvcc"``) or when
  an option NVRTC does not take is given (the switch is noted in the log).
* The architecture defaults to the GPU's (``grader.cuda.toolchain.default_arch``).
* Include folders are found, never typed (toolchain.include_dirs). NVRTC runs with
  ``-default-device`` (CuTe needs it), C++17 and ``-Xptxas -v`` so the register and spill
  report lands in ``module.log``.
* Templates (or any C++-mangled kernel) are named by name expressions, ``kernels=["gemm<V3>"]``.
  A kernel ``name<Cfg>`` of a cell that includes ``course.cuh`` also instantiates
  ``course::launch_shape<Cfg>``: the launch contract (grader.cuda.launch) reads it from the cubin.
* Every build is cached under ``cache_root()/cubin``, keyed by the source, options, architecture,
  compiler version and the helper headers: a hit never calls a compiler (``STATS``).
* A failed build raises :class:`CompileError` whose message quotes the errors against the cell's
  own line numbers. Nothing is written to stderr (nbgrader zeroes graded cells that write there).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from . import toolchain
from .diagnostics import cell_diagnostics, clean_log, error_report
from .launch import shape_expression

#: Counters that let tests prove a cache hit never compiled anything.
STATS = {"compiles": 0, "nvrtc": 0, "nvcc": 0, "cache_hits": 0}
_CACHE_FORMAT = 3
_PRELUDE = "#define GPU_COURSE_CELL 1\n"
_compile_lock = threading.Lock()


class CompileError(Exception):
    """A cell failed to compile. ``str(err)`` is the compact report, ``err.log`` the whole log,
    ``err.diagnostics`` a list of ``(line, kind, message)`` in the cell's own line numbers."""

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


def cache_dir() -> Path:
    return toolchain.cache_root() / "cubin"


# ---------------------------------------------------------------- options
class _NeedsNvcc(Exception):
    pass


def _program_options(flags: Sequence[str], arch: str, name: str) -> dict:
    """nvcc-style flags -> ``cuda.core.ProgramOptions`` keyword arguments; _NeedsNvcc for a flag
    NVRTC cannot take."""
    kw: dict[str, Any] = dict(name=name + ".cu", arch=arch, std="c++17", device_as_default_execution_space=True,
                              include_path=[str(p) for p in toolchain.include_dirs()], ptxas_options=["-v"])
    if toolchain.cuda_home() is None:
        kw["use_bundled_headers"] = True          # NVRTC's own copy of the CUDA / CCCL headers
    defines, undefs = [], []
    it = iter(flags)
    for f in it:
        def arg():
            if "=" in f:
                return f.split("=", 1)[1]
            try:
                return next(it)
            except StopIteration:
                raise _NeedsNvcc(f) from None

        booleans = {"--ftz": "ftz", "--fmad": "fma", "--prec-div": "prec_div", "--prec-sqrt": "prec_sqrt"}
        stem = "--" + f.lstrip("-").split("=", 1)[0]
        if f in ("-lineinfo", "--generate-line-info"):
            kw["lineinfo"] = True
        elif f in ("-G", "--device-debug"):
            kw["debug"] = True
        elif f in ("-use_fast_math", "--use_fast_math"):
            kw["use_fast_math"] = True
        elif stem == "--maxrregcount":
            kw["max_register_count"] = int(arg())
        elif stem in ("--Xptxas", "--ptxas-options"):
            kw["ptxas_options"].extend(a for a in arg().split(",") if a and a != "-v")
        elif stem == "--std":
            kw["std"] = arg()
        elif stem in booleans:
            kw[booleans[stem]] = arg() in ("true", "1")
        elif f in ("--restrict", "-restrict"):
            kw["restrict"] = True
        elif stem == "--diag-suppress":
            kw.setdefault("diag_suppress", []).extend(int(x) for x in arg().split(","))
        elif f in ("-w", "--disable-warnings"):
            kw["disable_warnings"] = True
        elif f.startswith("-D"):
            d = f[2:] or next(it)
            defines.append(tuple(d.split("=", 1)) if "=" in d else d)
        elif f.startswith("-U"):
            undefs.append(f[2:] or next(it))
        elif f.startswith("-I"):
            kw["include_path"].append(f[2:] or next(it))
        else:
            raise _NeedsNvcc(f)
    if defines:
        kw["define_macro"] = defines
    if undefs:
        kw["undefine_macro"] = undefs
    return kw


# ---------------------------------------------------------------- the compilers
class _LogSink:
    def __init__(self):
        self.parts: list[str] = []

    def write(self, s):
        self.parts.append(s if isinstance(s, str) else s.decode(errors="replace"))

    def text(self):
        return "".join(self.parts)


def _run_nvrtc(code: str, kw: dict, name_exprs: Sequence[str]):
    """(cubin or None, log, name expression -> lowered symbol)."""
    from cuda.core import Program, ProgramOptions

    sink = _LogSink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # nothing may reach stderr from a graded cell
        prog = Program(code, "c++", ProgramOptions(**kw))
        try:
            obj = prog.compile("cubin", name_expressions=tuple(name_exprs), logs=sink)
        except Exception as e:                    # NVRTCError carries the log in its message
            msg = str(e)
            if "NVRTC_ERROR_INVALID_OPTION" in msg:
                raise _NeedsNvcc(msg) from None
            return None, msg.split("compilation log:", 1)[-1], {}
        finally:
            try:
                prog.close()
            except Exception:
                pass
    mapping = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in (obj.symbol_mapping or {}).items()}
    return bytes(obj.code), sink.text(), mapping


def _run_nvcc(code: str, cellfile: str, arch: str, flags: Sequence[str]):
    exe = toolchain.tool_path("nvcc")
    if not exe:
        raise CompileError("nvcc was requested but no CUDA toolkit (nvcc) was found", name=cellfile)
    with tempfile.TemporaryDirectory(prefix="cudacell-") as tmp:
        src, out = Path(tmp) / cellfile, Path(tmp) / "out.cubin"
        src.write_text(code)
        cmd = [exe, "-cubin", f"-arch={arch}", "-std=c++17", "--expt-relaxed-constexpr", "-Xptxas", "-v",
               "-o", str(out), *[f"-I{p}" for p in toolchain.include_dirs()], *flags, str(src)]
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        log = (p.stdout + p.stderr).replace(str(src), cellfile).replace(tmp + "/", "")
        return (out.read_bytes() if p.returncode == 0 and out.is_file() else None), log


# ---------------------------------------------------------------- the cache
def _cache_key(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


def _cache_load(key: str):
    cub, meta = cache_dir() / f"{key}.cubin", cache_dir() / f"{key}.json"
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
        pass                                       # a read-only home must not break compiling


# ---------------------------------------------------------------- modules from files
def module_meta(name, source, arch, log, compiler, options, symbol_mapping, seconds) -> dict:
    """What, beside the cubin, rebuilds a module (the cache's and the judge's build files)."""
    return dict(name=name, source=source, arch=arch, log=log, compiler=compiler, options=list(options),
                symbol_mapping=symbol_mapping, seconds=round(seconds, 4))


def load_module(cubin: bytes, meta: dict, cache_key: str = ""):
    """A CudaModule from a cubin and its :func:`module_meta`, without compiling."""
    from .module import CudaModule

    return CudaModule(name=meta["name"], source=meta.get("source", ""), arch=meta["arch"], cubin=cubin,
                      log=meta.get("log", ""), compiler=meta.get("compiler", "?"), options=meta.get("options", []),
                      symbol_mapping=meta.get("symbol_mapping", {}), from_cache=True,
                      compile_seconds=float(meta.get("seconds", 0.0)), cache_key=cache_key)


# ---------------------------------------------------------------- compile
def _with_launch_shapes(source: str, name_exprs: list[str]) -> list[str]:
    """The kernels' name expressions plus ``&course::launch_shape<Cfg>`` for each ``name<Cfg>``
    when the cell includes course.cuh (where launch_shape is defined)."""
    if not re.search(r'#\s*include\s*[<"]course\.cuh[>"]', source):
        return name_exprs
    extra = [e for e in (shape_expression(k) for k in name_exprs) if e]
    return name_exprs + [e for e in dict.fromkeys(extra) if e not in name_exprs]


def compile_cuda(source: str, name: str | None = None, arch: str | None = None, options: Iterable[str] = (),
                 kernels: Iterable[str] | None = None, compiler: str = "auto", use_cache: bool = True,
                 progress: Callable[[str], None] | None = None):
    """Compile CUDA C++ ``source`` to a cubin and return a :class:`grader.cuda.module.CudaModule`.

    name      messages and the virtual file name (``name.cu``); arch: ``sm_80`` … ``sm_100a``
              (default: the GPU's, else toolchain.DEFAULT_ARCH); options: nvcc-style flags;
    kernels   name expressions to instantiate (``["gemm<V3>"]``, NVRTC only);
    compiler  "auto" (NVRTC, nvcc where needed), "nvrtc" or "nvcc";
    progress  called with a line when the compiler starts (not for a cache hit).
    """
    from .module import CudaModule

    name = name or "cell"
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        name = re.sub(r"\W", "_", name) or "cell"
    arch = toolchain.normalise_arch(arch) if arch else toolchain.default_arch()
    flags = [str(o) for o in options]
    kernel_exprs = list(kernels or [])
    if compiler not in ("auto", "nvrtc", "nvcc"):
        raise ValueError("compiler must be 'auto', 'nvrtc' or 'nvcc'")
    cellfile = f"{name}.cu"
    code = _PRELUDE + f'#line 1 "{cellfile}"\n' + source     # diagnostics use the cell's numbering

    use_nvcc, kw, notes = compiler == "nvcc", None, ""
    if not use_nvcc:
        try:
            kw = _program_options(flags, arch, name)
        except _NeedsNvcc as e:
            if compiler == "nvrtc":
                raise ValueError(f"NVRTC does not accept option {e}") from None
            use_nvcc, notes = True, f"note: NVRTC does not take option {e}; built with nvcc instead\n"
    if use_nvcc and kernel_exprs:
        raise ValueError("kernels= (name expressions) needs NVRTC; with nvcc, declare the kernels extern \"C\"")
    name_exprs = kernel_exprs if use_nvcc else _with_launch_shapes(source, kernel_exprs)
    version = toolchain.nvcc_version() if use_nvcc else toolchain.nvrtc_version()
    key = _cache_key(dict(fmt=_CACHE_FORMAT, code=code, flags=flags, arch=arch, compiler=version,
                          kernels=name_exprs, headers=toolchain.headers_digest()))
    if use_cache:
        hit = _cache_load(key)
        if hit is not None:
            STATS["cache_hits"] += 1
            cubin, meta = hit
            return load_module(cubin, {**meta, "name": name, "source": source, "arch": arch, "options": flags,
                                       "compiler": meta.get("compiler", version)}, cache_key=key)
    if progress:
        progress(f"compiling {name} for {arch} with {'nvcc' if use_nvcc else 'NVRTC'}")
    t0 = time.perf_counter()
    with _compile_lock:
        cubin, mapping = None, {}
        if not use_nvcc:
            STATS["compiles"] += 1
            STATS["nvrtc"] += 1
            try:
                cubin, log, mapping = _run_nvrtc(code, kw, name_exprs)
                # a template argument that is not a type (``v<N>``, N a constant) has no launch
                # shape: NVRTC names the expressions it could not read; build again without them
                unreadable = set(re.findall(r"#pragma nv_mangled_name (&course::launch_shape<.*>)", log))
                if cubin is None and unreadable:
                    cubin, log, mapping = _run_nvrtc(code, kw, [e for e in name_exprs if e not in unreadable])
            except _NeedsNvcc as e:
                if compiler == "nvrtc":
                    raise ValueError(f"NVRTC rejected an option: {e}") from None
                notes = f"note: NVRTC rejected an option ({str(e).splitlines()[0]}); built with nvcc instead\n"
                use_nvcc, version = True, toolchain.nvcc_version()
        if use_nvcc:
            STATS["compiles"] += 1
            STATS["nvcc"] += 1
            cubin, log = _run_nvcc(code, cellfile, arch, flags)
    seconds = time.perf_counter() - t0
    log = notes + clean_log(log, cellfile)
    if cubin is None:
        raise CompileError(error_report(log, cellfile, source.splitlines()), log=log,
                           diagnostics=cell_diagnostics(log, cellfile), name=name)
    if use_cache:
        _cache_store(key, cubin, module_meta(name, source, arch, log, version, flags, mapping, seconds))
    return CudaModule(name=name, source=source, arch=arch, cubin=cubin, log=log, compiler=version,
                      options=flags, symbol_mapping=mapping, from_cache=False, compile_seconds=seconds,
                      cache_key=key)
