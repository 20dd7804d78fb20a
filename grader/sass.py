"""Machine-code (SASS) inspection with no GPU, and structural rubrics.

A cell compiled with :func:`grader.cuda_cells.compile_cuda` (or ``%%cuda``)
yields a cubin; ``cuobjdump --dump-sass`` (from the ``nvidia-cuda-cuobjdump``
wheel, which drives ``nvdisasm`` from ``nvidia-cuda-nvdisasm``; PATH as a
fallback) disassembles it here, on any machine.  A rubric then asks about the
instructions the hardware will really run::

    from grader.sass import require
    require(mma_mod, "mma_tile", present=["HMMA", "LDSM", "LDGSTS"], absent=["LDL", "STL"])

A pattern names an opcode (``"HMMA"``) or an opcode with leading modifiers
(``"HMMA.16816.F32"``, ``"LDG.E.128"``); it matches an instruction whose
opcode is equal or continues with ``"."``.  ``require`` returns a
:class:`SassReport` and raises :class:`RubricFailed` (an ``AssertionError``)
naming what is missing and what is forbidden but present.

Opcodes confirmed on builds made here (NVRTC 13.5 -> cubin, cuobjdump 13.5;
``tests/test_cuda_cells.py::test_confirmed_opcodes`` keeps them honest):

=============================================  ==================  ==========================================
PTX / source                                   targets checked     SASS opcode as cuobjdump prints it
=============================================  ==================  ==========================================
mma.sync m16n8k16 .f32.f16.f16.f32             sm_80 sm_90a sm_100a ``HMMA.16816.F32``
mma.sync m16n8k16 .f32.bf16.bf16.f32           sm_80 sm_89 sm_90a  ``HMMA.16816.F32.BF16``
ldmatrix .x1 / .x2 / .x4                       sm_80 sm_90a sm_100a ``LDSM.16.M88`` / ``LDSM.16.M88.2`` / ``LDSM.16.M88.4``
ldmatrix ... .trans                            sm_80 sm_89 sm_90a  ``LDSM.16.MT88`` / ``.MT88.2`` / ``.MT88.4``
cp.async.cg.shared.global 16 B                 sm_80 sm_90a sm_100a ``LDGSTS.E.BYPASS.128``
cp.async.commit_group / wait_group N           sm_80 sm_90a        ``LDGDEPBAR`` / ``DEPBAR.LE``
wgmma.mma_async m64n8k16 .f32.f16.f16          sm_90a              ``HGMMA.64x8x16.F32`` (``HGMMA.64xNx16...``)
wgmma.fence / wgmma.wait_group                 sm_90a              ``WARPGROUP.ARRIVE`` / ``WARPGROUP.DEPBAR.LE``
fence.proxy.async.shared::cta                  sm_90a              ``FENCE.VIEW.ASYNC.S``
cp.async.bulk.tensor.2d (TMA load)             sm_90a              ``UTMALDG.2D``
mbarrier.try_wait / arrive.expect_tx           sm_90a              ``SYNCS.PHASECHK.TRANS64.TRYWAIT`` / ``SYNCS.ARRIVE.TRANS64``
tcgen05.mma.cta_group::1.kind::f16             sm_100a             ``UTCHMMA``
tcgen05.mma.cta_group::1.kind::f8f6f4          sm_100a             ``UTCQMMA``
tcgen05.ld.sync.aligned.32x32b                 sm_100a             ``LDTM``
tcgen05.alloc                                  sm_100a             ``UTCATOMSWS.FIND_AND_SET.ALIGN``
per-thread array indexed at run time           sm_80 sm_89 sm_90a  ``STL`` / ``LDL`` (ptxas: "N bytes stack frame")
naive fp32 dot product loop                    sm_80 sm_90a        ``FFMA`` (no ``HMMA``)
=============================================  ==================  ==========================================

A small per-thread array indexed with a run-time value may still stay in
registers (ptxas turns it into compares and selects, e.g. a 64-float array
read once); the test kernel writes through run-time indices to force memory.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from typing import Iterable

__all__ = [
    "RubricFailed",
    "SassReport",
    "cuobjdump_path",
    "disassemble",
    "parse_sass",
    "opcodes",
    "resource_usage",
    "require",
    "numba_sass",
    "NumbaSass",
]


class RubricFailed(AssertionError):
    """A structural rubric was not met.  ``.report`` holds the :class:`SassReport`."""

    def __init__(self, message: str, report: "SassReport"):
        super().__init__(message)
        self.report = report

    def _render_traceback_(self):
        return ["RubricFailed: " + str(self).splitlines()[0]] + str(self).splitlines()[1:]


# ---------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------
def _wheel_bin(tool: str) -> Path | None:
    import sys

    for p in sys.path:
        if not p:
            continue
        for sub in ("cu13", "cu12", "cuda_cuobjdump", "cuda_nvdisasm"):
            c = Path(p) / "nvidia" / sub / "bin" / tool
            if c.is_file():
                return c
    return None


def cuobjdump_path() -> str:
    """cuobjdump from the nvidia-cuda-cuobjdump wheel, else CUDA_HOME, else PATH."""
    w = _wheel_bin("cuobjdump")
    if w:
        return str(w)
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env) and (Path(os.environ[env]) / "bin" / "cuobjdump").is_file():
            return str(Path(os.environ[env]) / "bin" / "cuobjdump")
    found = shutil.which("cuobjdump") or (
        "/usr/local/cuda/bin/cuobjdump" if Path("/usr/local/cuda/bin/cuobjdump").is_file() else None)
    if not found:
        raise FileNotFoundError("cuobjdump not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm")
    return found


def _tool_env() -> dict:
    """cuobjdump needs nvdisasm for --dump-sass; point it at the wheel's copy."""
    env = dict(os.environ)
    nvd = _wheel_bin("nvdisasm") or (Path(shutil.which("nvdisasm")) if shutil.which("nvdisasm") else None)
    if nvd:
        env["NVDISASM_PATH"] = str(nvd.parent)
        env["PATH"] = str(nvd.parent) + os.pathsep + env.get("PATH", "")
    return env


def _cubin_bytes(obj) -> bytes:
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj)
    if isinstance(obj, (str, os.PathLike)):
        return Path(obj).read_bytes()
    cub = getattr(obj, "cubin", None)
    if cub is None and getattr(obj, "module", None) is not None:  # a CudaKernel
        cub = obj.module.cubin
    if cub is None:
        raise TypeError(f"expected a CudaModule, CudaKernel, cubin bytes or a path, got {type(obj).__name__}")
    return cub


_dump_cache: dict[tuple[str, int], str] = {}


def _run_cuobjdump(flag: str, cubin: bytes) -> str:
    import hashlib

    key = (flag, hash(hashlib.sha1(cubin).digest()))
    if key in _dump_cache:
        return _dump_cache[key]
    with tempfile.TemporaryDirectory(prefix="sass-") as tmp:
        f = Path(tmp) / "k.cubin"
        f.write_bytes(cubin)
        p = subprocess.run([cuobjdump_path(), flag, str(f)], capture_output=True, text=True, env=_tool_env())
    if p.returncode != 0:
        raise RuntimeError(f"cuobjdump {flag} failed: {(p.stderr or p.stdout).strip()}")
    _dump_cache[key] = p.stdout
    return p.stdout


# ---------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------
_FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)")
_INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


@dataclasses.dataclass
class Instruction:
    offset: int
    predicate: str   # "" or e.g. "@!P0"
    opcode: str      # with modifiers, e.g. "HMMA.16816.F32.BF16"
    operands: str

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]

    def __str__(self):
        return f"{self.predicate + ' ' if self.predicate else ''}{self.opcode} {self.operands}".strip()


def parse_sass(text: str) -> dict[str, list[Instruction]]:
    """``cuobjdump --dump-sass`` text -> {function symbol: [Instruction]}."""
    out: dict[str, list[Instruction]] = {}
    cur = None
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            cur = out.setdefault(m.group(1), [])
            continue
        m = _INSN.match(line)
        if m and cur is not None:
            body = m.group(2).strip()
            pred = ""
            if body.startswith("@"):
                pred, _, body = body.partition(" ")
            op, _, rest = body.strip().partition(" ")
            cur.append(Instruction(int(m.group(1), 16), pred, op, rest.strip()))
    return out


def _functions(obj) -> dict[str, list[Instruction]]:
    return parse_sass(_run_cuobjdump("--dump-sass", _cubin_bytes(obj)))


def _resolve(obj, kernel: str | None, funcs: dict) -> str:
    """Find the SASS function for a kernel name / name expression / symbol."""
    if kernel is None:
        if len(funcs) == 1:
            return next(iter(funcs))
        raise KeyError(f"name the kernel: this cubin holds {', '.join(funcs)}")
    if kernel in funcs:
        return kernel
    mod = getattr(obj, "module", obj)
    sym_of = getattr(mod, "symbol", None)
    if callable(sym_of):
        try:
            s = sym_of(kernel)
            if s in funcs:
                return s
        except KeyError:
            pass
    pat = re.compile(r"^_Z(?:N\d+\w+?)?%d%s" % (len(kernel), re.escape(kernel)))
    hits = [f for f in funcs if pat.match(f)]
    if len(hits) == 1:
        return hits[0]
    raise KeyError(f"no kernel {kernel!r} in the SASS; functions: {', '.join(funcs)}")


def disassemble(obj, kernel: str | None = None) -> str:
    """SASS text (opcodes and operands, one per line) of one kernel, or the
    whole ``cuobjdump --dump-sass`` listing when ``kernel`` is None."""
    cub = _cubin_bytes(obj)
    if kernel is None:
        return _run_cuobjdump("--dump-sass", cub)
    funcs = _functions(cub)
    name = _resolve(obj, kernel, funcs)
    return "\n".join(f"/*{i.offset:04x}*/ {i}" for i in funcs[name])


def opcodes(obj, kernel: str | None = None, *, full: bool = False) -> Counter:
    """Counter of opcodes in one kernel (base names like ``HMMA``, or with
    modifiers when ``full``)."""
    funcs = _functions(obj)
    name = _resolve(obj, kernel, funcs)
    return Counter(i.opcode if full else i.base for i in funcs[name])


_RES_FN = re.compile(r"^\s*Function\s+(\S+?):\s*$")


def resource_usage(obj) -> dict[str, dict[str, int]]:
    """``cuobjdump -res-usage``: {symbol: {REG, STACK, SHARED, LOCAL, CONSTANT[0], ...}}."""
    out: dict[str, dict[str, int]] = {}
    cur = None
    for line in _run_cuobjdump("-res-usage", _cubin_bytes(obj)).splitlines():
        m = _RES_FN.match(line)
        if m:
            cur = out.setdefault(m.group(1), {})
            continue
        if cur is not None and "REG:" in line:
            for k, v in re.findall(r"([A-Z_\[\]0-9]+):(\d+)", line):
                cur[k] = int(v)
            cur = None
    return out


# ---------------------------------------------------------------------------
# Rubrics
# ---------------------------------------------------------------------------
def _matches(pattern: str, opcode: str) -> bool:
    p, op = pattern.upper(), opcode.upper()
    return op == p or op.startswith(p + ".")


@dataclasses.dataclass
class SassReport:
    kernel: str
    symbol: str
    arch: str
    counts: Counter                  # full opcode -> count
    present: dict[str, int]          # required pattern -> matching instructions
    absent: dict[str, int]           # forbidden pattern -> matching instructions
    registers: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    local_bytes: int | None = None
    problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def missing(self) -> list[str]:
        return [p for p, n in self.present.items() if n == 0]

    @property
    def forbidden(self) -> list[str]:
        return [p for p, n in self.absent.items() if n > 0]

    def count(self, pattern: str) -> int:
        return sum(n for op, n in self.counts.items() if _matches(pattern, op))

    def __bool__(self):
        return self.ok

    def summary(self) -> str:
        lines = [f"{self.kernel} [{self.arch}]: {'OK' if self.ok else 'FAILED'}"]
        for p, n in self.present.items():
            lines.append(f"  needs  {p:<16} {'found ' + str(n) if n else 'MISSING'}")
        for p, n in self.absent.items():
            lines.append(f"  avoids {p:<16} {'FOUND ' + str(n) if n else 'none'}")
        if self.registers is not None:
            lines.append(f"  registers {self.registers}, spills {self.spill_stores or 0} B stored / "
                         f"{self.spill_loads or 0} B loaded, local {self.local_bytes or 0} B")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):
        p.text(self.summary())


_HINTS = {
    "HMMA": "no tensor-core mma: use mma.sync (course::mma_m16n8k16_*) or a CuTe MMA atom",
    "HGMMA": "no wgmma: needs an sm_90a target and wgmma.mma_async",
    "LDSM": "no ldmatrix: load the fragments with ldmatrix (course::ldmatrix_x4)",
    "LDGSTS": "no cp.async: copy global->shared with cp.async (course::cp_async_16)",
    "UTMALDG": "no TMA load: use cp.async.bulk.tensor with a tensor map",
    "LDL": "local memory loads: a per-thread array indexed at run time, or register spills",
    "STL": "local memory stores: a per-thread array indexed at run time, or register spills",
}


def require(obj, kernel: str | None = None, present: Iterable[str] = (), absent: Iterable[str] = (),
            max_registers: int | None = None, no_spills: bool = False, raise_: bool = True) -> SassReport:
    """Check the SASS of ``kernel`` in ``obj`` (a CudaModule, CudaKernel,
    cubin bytes or path) against a structural rubric.

    present : opcode patterns that must occur at least once.
    absent : opcode patterns that must not occur.
    max_registers : fail above this many registers per thread.
    no_spills : fail when ptxas reports spill stores or loads.
    Raises :class:`RubricFailed` unless ``raise_=False``; returns the report.
    """
    if kernel is None and getattr(obj, "module", None) is not None and hasattr(obj, "symbol"):
        kernel = obj.symbol  # a CudaKernel
    funcs = _functions(obj)
    sym = _resolve(obj, kernel, funcs)
    counts = Counter(i.opcode for i in funcs[sym])
    pres = {p: sum(n for op, n in counts.items() if _matches(p, op)) for p in present}
    abss = {p: sum(n for op, n in counts.items() if _matches(p, op)) for p in absent}
    mod = getattr(obj, "module", obj)
    arch = getattr(mod, "arch", "?")
    regs = ss = sl = local = None
    ptx_report = {}
    if hasattr(mod, "log"):
        from .cuda_cells import parse_ptxas_report

        ptx_report = parse_ptxas_report(mod.log).get(sym, {})
    try:
        ru = resource_usage(obj).get(sym, {})
    except Exception:
        ru = {}
    regs = ru.get("REG", ptx_report.get("registers"))
    local = (ru.get("LOCAL", 0) + ru.get("STACK", 0)) if ru else None
    ss, sl = ptx_report.get("spill_stores"), ptx_report.get("spill_loads")
    rep = SassReport(kernel=kernel or sym, symbol=sym, arch=arch, counts=counts, present=pres, absent=abss,
                     registers=regs, spill_stores=ss, spill_loads=sl, local_bytes=local)
    for p in rep.missing:
        hint = _HINTS.get(p.split(".")[0].upper())
        rep.problems.append(f"missing {p}" + (f" ({hint})" if hint else ""))
    for p in rep.forbidden:
        hint = _HINTS.get(p.split(".")[0].upper())
        rep.problems.append(f"forbidden {p} appears {abss[p]}x" + (f" ({hint})" if hint else ""))
    if max_registers is not None and regs is not None and regs > max_registers:
        rep.problems.append(f"uses {regs} registers per thread, the limit is {max_registers}")
    if no_spills and ((ss or 0) > 0 or (sl or 0) > 0):
        rep.problems.append(f"spills registers: {ss} B stored, {sl} B loaded")
    if rep.problems and raise_:
        raise RubricFailed(f"SASS rubric failed for {rep.kernel} [{arch}]:\n  - " + "\n  - ".join(rep.problems), rep)
    return rep


# ---------------------------------------------------------------------------
# Numba kernels: what the compiler makes of a @cuda.jit kernel, with or without a GPU
# ---------------------------------------------------------------------------
_NUMBA_CHILD = r"""
import json, sys, types
req = json.load(sys.stdin)
from numba import cuda, float32, float64, int32, int64, uint32
import numpy as np, math
ns = {"cuda": cuda, "float32": float32, "float64": float64, "int32": int32, "int64": int64,
      "uint32": uint32, "np": np, "math": math, "__name__": "numba_sass",
      "grader": types.SimpleNamespace(SIMULATOR=False)}     # the cell's GPU branch (launch bounds)
ns.update(req["constants"])
exec(compile(req["source"], req["filename"], "exec"), ns)
k = ns[req["kernel"]]
lb = k.targetoptions.get("launch_bounds")
ptx, _ = cuda.compile_ptx(k.py_func, req["signature"], cc=tuple(req["cc"]), **({"launch_bounds": lb} if lb else {}))
json.dump({"ptx": ptx, "launch_bounds": lb}, sys.stdout)
"""

_SKIP_TOP = ("grader.", "print(grader.", "print(")


@dataclasses.dataclass
class NumbaSass:
    """Instruction counts of one Numba kernel compiled for ``arch`` (see :func:`numba_sass`)."""
    kernel: str
    arch: str
    counts: Counter = dataclasses.field(default_factory=Counter)   # full opcode -> count
    ptx_counts: dict = dataclasses.field(default_factory=dict)
    registers: int | None = None
    spill_bytes: int | None = None
    launch_bounds: tuple | None = None
    error: str | None = None

    def count(self, pattern: str) -> int:
        return sum(n for op, n in self.counts.items() if _matches(pattern, op))

    @property
    def instructions(self) -> int:
        return sum(self.counts.values())

    def __str__(self):
        if self.error:
            return f"{self.kernel}: cannot compile here ({self.error})"
        lds = self.count("LDS") - self.count("LDS.128") - self.count("LDS.64")
        lb = f", launch_bounds={tuple(self.launch_bounds)}" if self.launch_bounds else ""
        return (f"{self.kernel} [{self.arch}{lb}]: FFMA {self.count('FFMA')}, LDS.128 {self.count('LDS.128')}, "
                f"LDS (scalar) {lds}, LDG {self.count('LDG')}, BAR {self.count('BAR')}, "
                f"{self.instructions} instructions; {self.registers} registers, "
                f"{self.spill_bytes} B spilled")

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


def _ptxas_path() -> str:
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env) and (Path(os.environ[env]) / "bin" / "ptxas").is_file():
            return str(Path(os.environ[env]) / "bin" / "ptxas")
    found = _wheel_bin("ptxas") or shutil.which("ptxas")
    if not found:
        raise FileNotFoundError("no ptxas (it comes with a CUDA toolkit)")
    return str(found)


def _numba_ptx_in_child(kernel, signature: str, cc: tuple) -> tuple[str, tuple | None]:
    """Simulator mode: Numba's compiler is replaced by the simulator in this process, so compile
    the kernel's source in a fresh one, as it would be on a GPU (``grader.SIMULATOR`` is False there)."""
    import json
    import linecache
    import sys

    fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel
    filename = fn.__code__.co_filename
    lines = linecache.getlines(filename)
    if not lines:
        raise RuntimeError(f"the source of {fn.__name__} is not available (defined in {filename})")
    # the defining cell or file, without its top-level demo lines (checks, timings, prints)
    source = "".join(l for l in lines if not l.startswith(_SKIP_TOP))
    constants = {k: v for k, v in fn.__globals__.items()
                 if not k.startswith("_") and type(v) in (int, float, bool, str)}
    req = {"source": source, "filename": filename, "kernel": fn.__name__, "signature": signature,
           "cc": list(cc), "constants": constants}
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "GRADER_FORCE_SIM")}
    env["NUMBA_ENABLE_CUDASIM"] = "0"
    p = subprocess.run([sys.executable, "-c", _NUMBA_CHILD], input=json.dumps(req), capture_output=True,
                       text=True, env=env, timeout=600)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(last)
    out = json.loads(p.stdout)
    return out["ptx"], out["launch_bounds"]


def numba_sass(kernel, signature: str, arch: str = "sm_90") -> NumbaSass:
    """Compile a ``@cuda.jit`` kernel for ``arch`` (Numba -> PTX, ptxas -> cubin, cuobjdump -> SASS)
    and count its instructions, registers and spills. No GPU needed: in simulator mode the kernel's
    source (its notebook cell or file) is compiled in a separate process as on a GPU, launch bounds
    included. Needs Numba's libNVVM and ptxas (a CUDA toolkit); without them the result says why
    (``.error``) instead of raising.

        print(grader.sass.numba_sass(sgemm_v3, "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"))
    """
    from ._mode import SIMULATOR

    digits = re.sub(r"\D", "", arch)                      # "sm_90" -> "90" -> (9, 0)
    cc = (int(digits[:-1]), int(digits[-1]))
    name = getattr(getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel, "__name__", "?")
    rep = NumbaSass(kernel=name, arch=arch)
    try:
        if SIMULATOR:
            ptx, lb = _numba_ptx_in_child(kernel, signature, cc)
        else:
            from numba import cuda

            lb = kernel.targetoptions.get("launch_bounds")
            ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=cc, **({"launch_bounds": lb} if lb else {}))
        rep.launch_bounds = tuple(lb) if lb else None
        rep.ptx_counts = {k: len(re.findall(re.escape(k), ptx)) for k in
                          ("fma.rn.f32", "ld.shared.f32", "ld.shared.v4", "ld.local", "st.local")}
        with tempfile.TemporaryDirectory(prefix="numba-sass-") as tmp:
            src, cub = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
            src.write_text(ptx)
            p = subprocess.run([_ptxas_path(), f"-arch={arch}", "-v", str(src), "-o", str(cub)],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise RuntimeError("ptxas: " + (p.stderr.strip().splitlines() or ["?"])[-1])
            m = re.search(r"Used (\d+) registers", p.stderr)
            s = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", p.stderr)
            rep.registers = int(m.group(1)) if m else None
            rep.spill_bytes = int(s.group(1)) + int(s.group(2)) if s else None
            funcs = parse_sass(_run_cuobjdump("--dump-sass", cub.read_bytes()))
        rep.counts = Counter(i.opcode for insns in funcs.values() for i in insns)
    except Exception as e:  # no libNVVM / ptxas / cuobjdump here, or a kernel that does not compile
        rep.error = f"{type(e).__name__}: {e}"[:300]
    return rep
