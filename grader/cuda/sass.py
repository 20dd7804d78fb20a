"""Machine-code (SASS) inspection with no GPU, and structural rubrics.

A cell compiled with :func:`grader.cuda.compile_cuda` (or ``%%cuda``) yields a
cubin; ``cuobjdump --dump-sass`` (grader.cuda.toolchain finds it and the
``nvdisasm`` it drives) disassembles it here, on any machine.  A rubric then
asks about the instructions the hardware will really run::

    from grader.cuda.sass import require
    require(mma_mod, "mma_tile", present=["HMMA", "LDSM", "LDGSTS"], absent=["LDL", "STL"])

A pattern names an opcode (``"HMMA"``) or an opcode with leading modifiers
(``"HMMA.16816.F32"``, ``"LDG.E.128"``); it matches an instruction whose
opcode is equal or continues with ``"."``.  ``require`` returns a
:class:`SassReport` and raises :class:`RubricFailed` (an ``AssertionError``)
naming what is missing and what is forbidden but present.

Opcodes confirmed on builds made here (NVRTC 13.5 -> cubin, cuobjdump 13.5; the tcgen05 rows also
with nvcc 13.0.88; ``tests/test_cuda.py::test_confirmed_opcodes`` and, for tcgen05,
``tests/test_ch05_blackwell.py`` keep them honest):

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
wgmma m64n256k16 .f32.bf16.bf16, imm-trans-b  sm_90a              ``HGMMA.64x256x16.F32.BF16`` (operand ``gdesc[..].tnspB``)
wgmma.fence / wgmma.wait_group N               sm_90a              ``WARPGROUP.ARRIVE`` / ``WARPGROUP.DEPBAR.LE gsb0, N``
fence.proxy.async.shared::cta                  sm_90a              ``FENCE.VIEW.ASYNC.S``
cp.async.bulk.tensor.2d (TMA load)             sm_90a              ``UTMALDG.2D``
cp.async.bulk.tensor.2d global.shared (store)  sm_90 sm_90a sm_100a ``UTMASTG.2D`` (commit: ``UTMACMDFLUSH``)
fence.proxy.async.shared::cta                  sm_90 sm_90a sm_100a ``MEMBAR.ALL.CTA`` + ``FENCE.VIEW.ASYNC.S``
fence.mbarrier_init.release.cluster            sm_90 sm_90a        ``FENCE.VIEW.ASYNC.S`` (the same opcode)
mbarrier.try_wait / arrive.expect_tx           sm_90a              ``SYNCS.PHASECHK.TRANS64.TRYWAIT`` / ``SYNCS.ARRIVE.TRANS64``
setmaxnreg.dec / .inc (with launch bounds)     sm_90a              ``USETMAXREG.DEALLOC.CTAPOOL`` / ``USETMAXREG.TRY_ALLOC.CTAPOOL``
cp.async.bulk.tensor.2d ... multicast::cluster sm_90a              ``UTMALDG.2D.MULTICAST``
barrier.cluster.arrive / wait                  sm_90a              ``UCGABAR_ARV`` / ``UCGABAR_WAIT``
mbarrier.arrive.release.cluster (remote)       sm_90a              ``SYNCS.ARRIVE.TRANS64.RED.A1T0``
tcgen05.mma.cta_group::1.kind::f16             sm_100a             ``UTCHMMA``
tcgen05.mma.cta_group::1.kind::f8f6f4          sm_100a             ``UTCQMMA``
tcgen05.ld.sync.aligned.32x32b                 sm_100a             ``LDTM``
tcgen05.alloc                                  sm_100a             ``UTCATOMSWS.FIND_AND_SET.ALIGN``
tcgen05.mma.cta_group::2.kind::f16             sm_100a             ``UTCHMMA.2CTA`` (alloc: ``UTCATOMSWS.2CTA...``)
tcgen05.mma.kind::mxf8f6f4.block_scale         sm_100a             ``UTCQMMA`` with a third ``tmem[...]`` operand
tcgen05.mma.kind::mxf4nvf4.block_scale.4X      sm_100a             ``UTCOMMA.4X`` (``scale_vec::2X``: ``UTCOMMA``)
tcgen05.commit (cta_group::2 multicast)        sm_100a             ``UTCBAR`` (``UTCBAR.2CTA.MULTICAST``)
tcgen05.dealloc / relinquish_alloc_permit      sm_100a             ``UTCATOMSWS.AND`` / ``UVIRTCOUNT.DEALLOC.SMPOOL``
tcgen05.st.32x32b / tcgen05.cp 32x128b.warpx4  sm_100a             ``STTM`` / ``UTCCP.T.S.4x32dp128bit``
per-thread array indexed at run time           sm_80 sm_89 sm_90a  ``STL`` / ``LDL`` (ptxas: "N bytes stack frame")
naive fp32 dot product loop                    sm_80 sm_90a        ``FFMA`` (no ``HMMA``)
=============================================  ==================  ==========================================

A small per-thread array indexed with a run-time value may still stay in
registers (ptxas turns it into compares and selects, e.g. a 64-float array
read once); the test kernel writes through run-time indices to force memory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from typing import Iterable

from . import toolchain
from .diagnostics import find_mangled, parse_ptxas_report

__all__ = ["RubricFailed", "SassReport", "Instruction", "disassemble", "parse_sass", "opcodes",
           "resource_usage", "require", "require_fence", "require_wgmma", "require_setmaxnreg", "cubin_bytes",
           "run_cuobjdump"]

#: What a learner's C++ exercise holds until it is written (nbgrader's stub for C++ regions).
STUB = "// YOUR CODE HERE"


class RubricFailed(AssertionError):
    """A structural rubric was not met.  ``.report`` holds the :class:`SassReport`."""

    def __init__(self, message: str, report: "SassReport | None" = None):
        super().__init__(message)
        self.report = report

    def _render_traceback_(self):
        return ["RubricFailed: " + str(self).splitlines()[0]] + str(self).splitlines()[1:]


def cubin_bytes(obj) -> bytes:
    """The cubin of a CudaModule, a CudaKernel, raw bytes or a path."""
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj)
    if isinstance(obj, (str, os.PathLike)):
        return Path(obj).read_bytes()
    cub = getattr(obj, "cubin", None)
    if cub is None and getattr(obj, "module", None) is not None:      # a CudaKernel
        cub = obj.module.cubin
    if cub is None:
        raise TypeError(f"expected a CudaModule, CudaKernel, cubin bytes or a path, got {type(obj).__name__}")
    return cub


_dump_cache: dict[tuple[str, bytes], str] = {}


def run_cuobjdump(flag: str, cubin: bytes) -> str:
    """``cuobjdump FLAG`` of a cubin (``--dump-sass``, ``-res-usage``), cached per content."""
    key = (flag, hashlib.sha1(cubin).digest())
    if key in _dump_cache:
        return _dump_cache[key]
    with tempfile.TemporaryDirectory(prefix="sass-") as tmp:
        f = Path(tmp) / "k.cubin"
        f.write_bytes(cubin)
        p = subprocess.run([toolchain.require_tool("cuobjdump"), flag, str(f)], capture_output=True,
                           text=True, env=toolchain.tool_env())
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
    return parse_sass(run_cuobjdump("--dump-sass", cubin_bytes(obj)))


def _resolve(obj, kernel: str | None, funcs: dict) -> str:
    """The SASS function of a kernel name, name expression or symbol."""
    if kernel is None:
        if len(funcs) == 1:
            return next(iter(funcs))
        raise KeyError(f"name the kernel: this cubin holds {', '.join(funcs)}")
    if kernel in funcs:
        return kernel
    module = getattr(obj, "module", obj)
    symbol_of = getattr(module, "symbol", None)
    if callable(symbol_of):
        try:
            s = symbol_of(kernel)
            if s in funcs:
                return s
        except KeyError:
            pass
    hits = find_mangled(kernel, funcs)
    if len(hits) == 1:
        return hits[0]
    raise KeyError(f"no kernel {kernel!r} in the SASS; functions: {', '.join(funcs)}")


def disassemble(obj, kernel: str | None = None) -> str:
    """SASS text (opcodes and operands, one per line) of one kernel, or the whole
    ``cuobjdump --dump-sass`` listing when ``kernel`` is None."""
    cub = cubin_bytes(obj)
    if kernel is None:
        return run_cuobjdump("--dump-sass", cub)
    funcs = _functions(cub)
    name = _resolve(obj, kernel, funcs)
    return "\n".join(f"/*{i.offset:04x}*/ {i}" for i in funcs[name])


def opcodes(obj, kernel: str | None = None, *, full: bool = False) -> Counter:
    """Counter of opcodes in one kernel (base names like ``HMMA``, or with modifiers when ``full``)."""
    funcs = _functions(obj)
    name = _resolve(obj, kernel, funcs)
    return Counter(i.opcode if full else i.base for i in funcs[name])


_RES_FN = re.compile(r"^\s*Function\s+(\S+?):\s*$")


def resource_usage(obj) -> dict[str, dict[str, int]]:
    """``cuobjdump -res-usage``: {symbol: {REG, STACK, SHARED, LOCAL, CONSTANT[0], ...}}."""
    out: dict[str, dict[str, int]] = {}
    cur = None
    for line in run_cuobjdump("-res-usage", cubin_bytes(obj)).splitlines():
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
def matches(pattern: str, opcode: str) -> bool:
    """An opcode pattern ("HMMA", "LDG.E.128") matches an opcode equal to it or continuing with '.'."""
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
        return sum(n for op, n in self.counts.items() if matches(pattern, op))

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
    "UTMASTG": "no TMA store: use cp.async.bulk.tensor from shared to global with a tensor map",
    "UTCHMMA": "no tcgen05.mma: needs an sm_100a target and course::umma_f16 (one thread issues it)",
    "UTCATOMSWS": "tensor memory is not allocated or not freed: tcgen05.alloc / tcgen05.dealloc, one whole warp",
    "UVIRTCOUNT": "no tcgen05.relinquish_alloc_permit after the allocation",
    "LDL": "local memory loads: a per-thread array indexed at run time, or register spills",
    "STL": "local memory stores: a per-thread array indexed at run time, or register spills",
}


def require(obj, kernel: str | None = None, present: Iterable[str] = (), absent: Iterable[str] = (),
            max_registers: int | None = None, no_spills: bool = False, raise_: bool = True) -> SassReport:
    """Check the SASS of ``kernel`` in ``obj`` (a CudaModule, CudaKernel, cubin bytes or path)
    against a structural rubric.

    present : opcode patterns that must occur at least once.
    absent : opcode patterns that must not occur.
    max_registers : fail above this many registers per thread.
    no_spills : fail when ptxas reports spill stores or loads.
    Raises :class:`RubricFailed` unless ``raise_=False``; returns the report. A module whose source
    still holds the exercise's stub fails with "not implemented yet" rather than a list of
    missing instructions.
    """
    if kernel is None and getattr(obj, "module", None) is not None and hasattr(obj, "symbol"):
        kernel = obj.symbol                                        # a CudaKernel
    module = getattr(obj, "module", obj)
    funcs = _functions(obj)
    sym = _resolve(obj, kernel, funcs)
    counts = Counter(i.opcode for i in funcs[sym])
    pres = {p: sum(n for op, n in counts.items() if matches(p, op)) for p in present}
    abss = {p: sum(n for op, n in counts.items() if matches(p, op)) for p in absent}
    arch = getattr(module, "arch", "?")
    ptx_report = parse_ptxas_report(module.log).get(sym, {}) if hasattr(module, "log") else {}
    try:
        ru = resource_usage(obj).get(sym, {})
    except (RuntimeError, FileNotFoundError):
        ru = {}
    rep = SassReport(kernel=kernel or sym, symbol=sym, arch=arch, counts=counts, present=pres, absent=abss,
                     registers=ru.get("REG", ptx_report.get("registers")),
                     spill_stores=ptx_report.get("spill_stores"), spill_loads=ptx_report.get("spill_loads"),
                     local_bytes=(ru.get("LOCAL", 0) + ru.get("STACK", 0)) if ru else None)
    for p in rep.missing:
        hint = _HINTS.get(p.split(".")[0].upper())
        rep.problems.append(f"missing {p}" + (f" ({hint})" if hint else ""))
    for p in rep.forbidden:
        hint = _HINTS.get(p.split(".")[0].upper())
        rep.problems.append(f"forbidden {p} appears {abss[p]}x" + (f" ({hint})" if hint else ""))
    if max_registers is not None and rep.registers is not None and rep.registers > max_registers:
        rep.problems.append(f"uses {rep.registers} registers per thread, the limit is {max_registers}")
    if no_spills and ((rep.spill_stores or 0) > 0 or (rep.spill_loads or 0) > 0):
        rep.problems.append(f"spills registers: {rep.spill_stores} B stored, {rep.spill_loads} B loaded")
    if rep.problems and raise_:
        if STUB in (getattr(module, "source", "") or ""):
            raise RubricFailed(f"{rep.kernel}: not implemented yet: the cell still holds `{STUB}`. "
                               "Write the kernel's missing part there, run the cell, then this check.", rep)
        raise RubricFailed(f"SASS rubric failed for {rep.kernel} [{arch}]:\n  - " + "\n  - ".join(rep.problems), rep)
    return rep


def require_fence(obj, kernel: str | None = None, writes: str = "STS", fence: str = "FENCE.VIEW.ASYNC.S",
                  reader: str = "UTMASTG", why: str = "fence.proxy.async.shared::cta") -> int:
    """Every ``reader`` instruction must be preceded, since the last ``writes`` instruction before it
    (in program order), by a ``fence``: shared-memory stores, the async-proxy fence, then the TMA
    store that reads them. Raises :class:`RubricFailed` naming the unfenced reader; returns how many
    readers were checked (at least one must exist)."""
    funcs = _functions(obj)
    sym = _resolve(obj, kernel, funcs)
    last_write, fenced, checked, bad = None, False, 0, []
    for ins in funcs[sym]:
        if matches(writes, ins.opcode):
            last_write, fenced = ins, False
        elif matches(fence, ins.opcode):
            fenced = True
        elif matches(reader, ins.opcode):
            checked += 1
            if last_write is not None and not fenced:
                bad.append(f"{ins.opcode} at /*{ins.offset:04x}*/ follows {last_write.opcode} at "
                           f"/*{last_write.offset:04x}*/ with no {fence} between ({why})")
    if not checked:
        raise RubricFailed(f"{kernel or sym}: no {reader} instruction to check")
    if bad:
        raise RubricFailed(f"SASS rubric failed for {kernel or sym}:\n  - " + "\n  - ".join(bad))
    return checked


_SERIALIZED = re.compile(r"\((C75\d\d)\)[^\n]*?(wgmma[^\n]*?(?:serialized|injected)[^\n]*)")


def require_wgmma(obj, kernel: str | None = None, max_pending: int = 1, fence_in_source: bool = True) -> int:
    """wgmma's ordering, where each mistake shows:

    * ``fence_in_source``: the cell calls ``wgmma.fence`` (``course::wgmma_fence()`` or the PTX).
      ptxas inserts the ``WARPGROUP.ARRIVE`` itself where ordinary instructions wrote the
      accumulators, so the SASS is the same without it (nvcc 13.0); the PTX ISA leaves such a
      kernel undefined, so only the source can show the omission;
    * ptxas did not serialize the wgmmas (its C75xx note "wgmma ... serialized" / "wait_group is
      injected": accumulators read before a wait that covers them, which it repairs by waiting
      after every wgmma);
    * every ``WARPGROUP.DEPBAR.LE`` (``wgmma.wait_group N``) leaves at most ``max_pending`` groups
      running: a deeper wait lets a refill overwrite a tile a wgmma still reads.
    Returns the number of waits checked."""
    funcs = _functions(obj)
    sym = _resolve(obj, kernel, funcs)
    module = getattr(obj, "module", obj)
    name, problems = kernel or sym, []
    if fence_in_source:
        src = re.sub(r"//[^\n]*|/\*.*?\*/", "", getattr(module, "source", "") or "", flags=re.S)
        if not re.search(r"wgmma_fence\s*\(\s*\)|wgmma\.fence", src):
            problems.append("no wgmma.fence (course::wgmma_fence()) in the source: it must come before the first "
                            "wgmma and before any wgmma whose accumulators ordinary code touched")
    for code, what in _SERIALIZED.findall(getattr(module, "log", "") or ""):
        if sym in what or "'" not in what:
            problems.append(f"ptxas {code}: {what.strip()}")
    waits = [i for i in funcs[sym] if matches("WARPGROUP.DEPBAR.LE", i.opcode)]
    for w in waits:
        depth = re.search(r"0x([0-9a-f]+)\s*$", w.operands)
        if depth and int(depth.group(1), 16) > max_pending:
            problems.append(f"WARPGROUP.DEPBAR.LE at /*{w.offset:04x}*/ leaves {int(depth.group(1), 16)} wgmma groups "
                            f"running (wgmma.wait_group {int(depth.group(1), 16)}); at most {max_pending} may be")
    if not waits:
        problems.append("no WARPGROUP.DEPBAR (wgmma.wait_group): the accumulators are never waited for")
    if problems:
        if STUB in (getattr(module, "source", "") or ""):
            raise RubricFailed(f"{name}: not implemented yet: the cell still holds `{STUB}`.")
        raise RubricFailed(f"wgmma rubric failed for {name}:\n  - " + "\n  - ".join(problems))
    return len(waits)


_SETMAXNREG_IGNORED = re.compile(r"\((C7508)\)[^\n]*setmaxnreg[^\n]*")


def require_setmaxnreg(obj, kernel: str | None = None, threads: int | None = None) -> dict:
    """``setmaxnreg`` took effect: ptxas drops it without a word in the SASS when it cannot tell the
    register count at kernel entry (no ``__launch_bounds__(THREADS, 1)``), saying only "(C7508) ...
    'setmaxnreg' ignored" in its report. Checks that both directions are in the machine code
    (``USETMAXREG.DEALLOC`` for the producer, ``USETMAXREG.TRY_ALLOC`` for the consumers), that ptxas
    did not report dropping it, and — given ``threads`` — that the registers at entry fit one CTA of
    that many threads on an SM (65536 / threads, rounded down to 8). Returns {registers, dealloc, alloc}."""
    funcs = _functions(obj)
    sym = _resolve(obj, kernel, funcs)
    module = getattr(obj, "module", obj)
    name, problems = kernel or sym, []
    ops = Counter(i.opcode for i in funcs[sym])
    dealloc = sum(n for op, n in ops.items() if matches("USETMAXREG.DEALLOC", op))
    alloc = sum(n for op, n in ops.items() if matches("USETMAXREG.TRY_ALLOC", op))
    if not dealloc or not alloc:
        problems.append(f"setmaxnreg is not in the machine code (USETMAXREG.DEALLOC ×{dealloc}, .TRY_ALLOC ×{alloc}): "
                        "ptxas drops it unless the kernel states __launch_bounds__(THREADS, 1)")
    for code in _SETMAXNREG_IGNORED.findall(getattr(module, "log", "") or ""):
        problems.append(f"ptxas {code}: setmaxnreg ignored (the register count at entry is unknown: "
                        "__launch_bounds__(THREADS, 1))")
    regs = parse_ptxas_report(getattr(module, "log", "") or "").get(sym, {}).get("registers")
    if threads and regs is not None and regs > (65536 // threads) // 8 * 8:
        problems.append(f"{regs} registers at entry: one CTA of {threads} threads needs at most "
                        f"{(65536 // threads) // 8 * 8}")
    if problems:
        if STUB in (getattr(module, "source", "") or ""):
            raise RubricFailed(f"{name}: not implemented yet: the cell still holds `{STUB}`.")
        raise RubricFailed(f"setmaxnreg rubric failed for {name}:\n  - " + "\n  - ".join(problems))
    return {"registers": regs, "dealloc": dealloc, "alloc": alloc}
