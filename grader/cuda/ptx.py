"""One thread block of a compiled cell, replayed on the CPU from its PTX.

A ``%%cuda`` cell compiles for sm_90a on any machine, but without a Hopper GPU nothing runs it. The
PTX that NVRTC makes from the cell (the compiler's front end: every address, descriptor and loop of
the learner's code, before ptxas) is regular enough to execute here, thread by thread, for one
small block. Shared memory, the mbarriers, the bulk tensor copies (TMA), the warpgroup MMAs'
operand reads and the warp-level collectives are modelled; the numbers a tensor core would compute
are not (its accumulators read 0). What the replay gives:

* every TMA load and store, with the box's coordinates, where it landed in shared memory (swizzled
  as the tensor map says) and which global element each shared-memory byte holds (:class:`Elem`);
* every ``wgmma.mma_async``: its shape, its descriptors, and — at the ``wgmma.wait_group`` that
  retires it, the latest moment the hardware may read its operands — which element it read for
  each (row, k) of A and (k, column) of B (:class:`WgmmaRead`; :mod:`grader.cuda.wgmma_replay`
  checks them);
* a hang found as a deadlock: every thread waits (on an mbarrier phase that can no longer complete,
  or on a barrier some thread never reaches) — named, with the parity each waiter asked for;
* ``printf`` output, and a ``trap``.

Asynchronous work is done as late as the rules allow: a TMA copy lands only when no thread can
run, and a wgmma reads its operands only when a wait retires it, so a missing wait reads stale
data here, deterministically. Integers are exact; floats are Python floats (no fp32 rounding).

:func:`kernel_ptx` compiles a module's source to PTX (NVRTC, cached); :class:`Program` parses it;
:func:`run_block` replays one block. Standard library only.
"""
from __future__ import annotations

import hashlib

from .ptx_block import Block  # noqa: F401
from .ptx_parse import Function, Instr, Program  # noqa: F401
from .ptx_values import (POISON, Deadlock, Elem, MapSpec, Pack, ReplayError, TmaOp, WgmmaRead,  # noqa: F401
                         swizzle_addr)

# ---------------------------------------------------------------- PTX of a compiled cell
_PTX_CACHE: dict = {}


def kernel_ptx(module, kernel: str | None = None) -> tuple[str, str]:
    """(PTX text, entry symbol) of ``kernel`` (a name expression of ``module``) compiled by NVRTC for
    the module's architecture, virtual (``compute_90a``). Cached in memory and on disk."""
    from . import toolchain

    name = kernel or module.kernel_names[0]
    symbol = module.symbol(name)
    arch = module.arch.replace("sm_", "compute_")
    flags = [f for f in module.options if f.startswith(("-D", "-U", "-I", "--std", "-std"))]
    key = hashlib.sha256(repr((module.source, arch, flags, name, toolchain.nvrtc_version(),
                               toolchain.headers_digest())).encode()).hexdigest()[:32]
    if key in _PTX_CACHE:
        return _PTX_CACHE[key], symbol
    path = toolchain.cache_root() / "ptx" / f"{key}.ptx"
    try:
        text = path.read_text()
    except OSError:
        text = _nvrtc_ptx(module.source, arch, flags, name)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except OSError:
            pass
    _PTX_CACHE[key] = text
    return text, symbol


def _nvrtc_ptx(source: str, arch: str, flags: list, name_expr: str) -> str:
    from cuda.bindings import nvrtc

    from . import toolchain
    from .compiler import _PRELUDE

    def ok(res):
        err = res[0] if isinstance(res, tuple) else res
        return int(err) == 0
    code = (_PRELUDE + '#line 1 "cell.cu"\n' + source).encode()
    err, prog = nvrtc.nvrtcCreateProgram(code, b"cell.cu", 0, [], [])
    try:
        nvrtc.nvrtcAddNameExpression(prog, name_expr.encode())
        opts = [f"--gpu-architecture={arch}", "-std=c++17", "-default-device", *flags,
                *[f"-I{p}" for p in toolchain.include_dirs()]]
        if toolchain.cuda_home() is None:
            opts.append("--use-bundled-headers") if False else None
        res = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        if not ok(res):
            _, n = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * n
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise ReplayError("NVRTC could not make the PTX: " + log.decode(errors="replace")[:2000])
        _, n = nvrtc.nvrtcGetPTXSize(prog)
        buf = b" " * n
        nvrtc.nvrtcGetPTX(prog, buf)
        return buf.decode().rstrip("\x00")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)



__all__ = ["kernel_ptx", "Program", "Block", "MapSpec", "Elem", "TmaOp", "WgmmaRead", "Deadlock", "ReplayError",
           "POISON", "Pack", "swizzle_addr"]
