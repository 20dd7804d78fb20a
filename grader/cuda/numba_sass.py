"""What the compiler makes of a ``@cuda.jit`` kernel, with or without a GPU.

:func:`numba_sass` compiles a Numba kernel for an architecture (Numba -> PTX, ptxas -> cubin,
cuobjdump -> SASS) and counts its instructions, registers and spills::

    print(grader.cuda.numba_sass(sgemm_v3, "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"))

In simulator mode Numba's compiler is replaced by the simulator in this process, so the kernel's
source (its notebook cell or file, found through linecache) is compiled in a fresh process as on a
GPU. Needs Numba's libNVVM and ptxas; without them the result says why (``.error``).
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from . import toolchain
from .diagnostics import parse_ptxas_report
from .sass import matches, parse_sass, run_cuobjdump

_CHILD = r"""
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

_SKIP_TOP = ("grader.", "print(grader.", "print(")       # a cell's top-level demo lines


@dataclasses.dataclass
class NumbaSass:
    """Instruction counts of one Numba kernel compiled for ``arch``."""
    kernel: str
    arch: str
    counts: Counter = dataclasses.field(default_factory=Counter)   # full opcode -> count
    ptx_counts: dict = dataclasses.field(default_factory=dict)
    registers: int | None = None
    spill_bytes: int | None = None
    launch_bounds: tuple | None = None
    error: str | None = None

    def count(self, pattern: str) -> int:
        return sum(n for op, n in self.counts.items() if matches(pattern, op))

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


def _ptx_in_child(kernel, signature: str, cc: tuple) -> tuple[str, tuple | None]:
    import linecache

    fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel
    filename = fn.__code__.co_filename
    lines = linecache.getlines(filename)
    if not lines:
        raise RuntimeError(f"the source of {fn.__name__} is not available (defined in {filename})")
    source = "".join(line for line in lines if not line.startswith(_SKIP_TOP))
    constants = {k: v for k, v in fn.__globals__.items()
                 if not k.startswith("_") and type(v) in (int, float, bool, str)}
    req = {"source": source, "filename": filename, "kernel": fn.__name__, "signature": signature,
           "cc": list(cc), "constants": constants}
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "GRADER_FORCE_SIM")}
    env["NUMBA_ENABLE_CUDASIM"] = "0"
    p = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(req), capture_output=True,
                       text=True, env=env, timeout=600)
    if p.returncode != 0:
        raise RuntimeError((p.stderr.strip().splitlines() or ["?"])[-1])
    out = json.loads(p.stdout)
    return out["ptx"], out["launch_bounds"]


def compiled_ptx(kernel, signature: str, cc: tuple, device_cc: tuple) -> str | None:
    """The PTX of ``kernel``'s own build for ``signature`` on this GPU, when ``cc`` is this GPU's: the
    build that runs (all its options included), made through the kernel's dispatcher if it was not
    made yet, so the next launch with those types compiles nothing either. None otherwise (another
    GPU, not a dispatcher, a signature numba does not read)."""
    if tuple(cc) != tuple(device_cc):
        return None
    try:
        from numba.core import sigutils

        args, _ = sigutils.normalize_signature(signature)
        overload = kernel.overloads.get(tuple(args))
        if overload is None:
            kernel.compile(signature)
            overload = kernel.overloads.get(tuple(args))
        return overload.inspect_asm(tuple(cc)) if overload is not None else None
    except Exception:              # the separate compile below says what is wrong, if anything
        return None


def numba_sass(kernel, signature: str, arch: str = "sm_90") -> NumbaSass:
    """Compile a ``@cuda.jit`` kernel for ``arch`` and count its instructions, registers, spills."""
    simulated = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"    # grader.mode set it at import
    digits = re.sub(r"\D", "", arch)                       # "sm_90" -> "90" -> (9, 0)
    cc = (int(digits[:-1]), int(digits[-1]))
    fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel
    rep = NumbaSass(kernel=getattr(fn, "__name__", "?"), arch=arch)
    try:
        if simulated:
            ptx, lb = _ptx_in_child(kernel, signature, cc)
        else:
            from numba import cuda

            lb = kernel.targetoptions.get("launch_bounds")
            ptx = compiled_ptx(kernel, signature, cc, cuda.get_current_device().compute_capability)
            if ptx is None:
                ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=cc, **({"launch_bounds": lb} if lb else {}))
        rep.launch_bounds = tuple(lb) if lb else None
        rep.ptx_counts = {k: len(re.findall(re.escape(k), ptx)) for k in
                          ("fma.rn.f32", "ld.shared.f32", "ld.shared.v4", "ld.local", "st.local")}
        with tempfile.TemporaryDirectory(prefix="numba-sass-") as tmp:
            src, cub = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
            src.write_text(ptx)
            p = subprocess.run([toolchain.require_tool("ptxas"), f"-arch={arch}", "-v", str(src), "-o", str(cub)],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise RuntimeError("ptxas: " + (p.stderr.strip().splitlines() or ["?"])[-1])
            report = next(iter(parse_ptxas_report(p.stderr).values()), {})
            rep.registers = report.get("registers")
            rep.spill_bytes = report["spill_stores"] + report["spill_loads"] if report else None
            funcs = parse_sass(run_cuobjdump("--dump-sass", cub.read_bytes()))
        rep.counts = Counter(i.opcode for insns in funcs.values() for i in insns)
    except Exception as e:  # no libNVVM / ptxas / cuobjdump here, or a kernel that does not compile
        rep.error = f"{type(e).__name__}: {e}"[:300]
    return rep
