"""*CPU*: rewrite the scheduling hints of a kernel's FFMA instructions in a cubin (an experiment for
05.06's FP8 promotion, after DeepGEMM's published "FFMA interleaving" idea; our own code).

Every Hopper SASS instruction is 16 bytes; the high 8 bytes hold, besides encoding bits, the control
information the compiler sets for the warp scheduler. Facts used here (read off our own cubins and
DeepGEMM's public description, checked by disassembling the result):
  bit 45 of the high word: the yield hint. ptxas sets it on an FFMA that caches an operand for the next
    instruction (a `.reuse` flag) and clears it on the others; DeepGEMM clears it, with the reuse flag,
    to let the scheduler switch to another warp after that FFMA;
  bits 58..61: the operand reuse flags (slot a, b, c, d); clearing one is always safe (the operand is
    read from the register file instead of the reuse cache).
Policies (what each FFMA of the kernel gets):
  "deepgemm"   DeepGEMM's rule: in each run of >= 8 back-to-back FFMAs, over its first 9/16, a
               reuse-flagged FFMA whose b register is new to the run, or whose predecessor still
               caches the same b register, loses its reuse flag and gets the yield hint cleared;
  "yield_all"  every FFMA: reuse flags cleared, yield bit cleared;
  "stick_all"  every FFMA: yield bit set (reuse flags kept);
  "yield4"     every 4th FFMA of the kernel as yield_all, the rest as stick_all;
  "reuse_all"  every FFMA directly followed by an FFMA with the same a (or b) register caches it for
               that one (reuse flag of slot a / b set, with the yield bit set, as ptxas pairs them);
               ptxas itself caches the scale on every other promotion FFMA only. The last FFMA of a
               run keeps no a/b flag and gets the yield bit cleared (ffma_bench.py's test);
  "reuse_yN"   (N = 4, 8, 16) reuse_all, but every Nth FFMA caches nothing and yields (bit 45 clear), so
               that the other consumer's warp gets issue slots during a promotion (ffma_bench.py: FFMAs
               with the bit set hold the scheduler).
Usage (CPU): python dev/ch05_hopper/ffma_yield.py CUBIN SYMBOL POLICY OUT  -- prints what changed.
"""
from __future__ import annotations

import re
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from grader.cuda.elf import Cubin  # noqa: E402
from grader.cuda.sass import parse_sass, run_cuobjdump  # noqa: E402

YIELD = 1 << 45
REUSE_ALL = 0xF << 58
REUSE_A = 1 << 58
REUSE_B = 1 << 59
FFMA_RRR = 0x223          # the low 12 bits of an FFMA with three register sources
POLICIES = ("deepgemm", "yield_all", "stick_all", "yield4", "reuse_all", "reuse_y4", "reuse_y8", "reuse_y16")


def ffma_sites(cubin: bytes, symbol: str) -> list[tuple[int, str]]:
    """(byte offset in the cubin, "Rd, Ra, Rb, Rc") of each unpredicated FFMA of function ``symbol``, in
    program order, read off the encoding (no tool needed): low 16 bits 0x7223 (FFMA, three register
    sources, predicate PT), Rd in bits 16..23, Ra 24..31, Rb 32..39, Rc in the high word's bits 0..7."""
    text = next(s for s in Cubin(cubin).sections if s.name == ".text." + symbol)
    out = []
    for at in range(text.offset, text.offset + text.size, 16):
        lo, hi = struct.unpack_from("<QQ", cubin, at)
        if lo & 0xFFFF == 0x7000 | FFMA_RRR:
            regs = (lo >> 16 & 0xFF, lo >> 24 & 0xFF, lo >> 32 & 0xFF, hi & 0xFF)
            out.append((at, ", ".join(f"R{r}" if r != 255 else "RZ" for r in regs)))
    return out


def check_sites(cubin: bytes, symbol: str) -> None:
    """The decoded FFMAs against cuobjdump's listing (where cuobjdump is installed)."""
    text = next(s for s in Cubin(cubin).sections if s.name == ".text." + symbol)
    listed = [(text.offset + i.offset, re.sub(r"\.reuse", "", i.operands))
              for i in parse_sass(run_cuobjdump("--dump-sass", cubin))[symbol] if i.opcode == "FFMA" and not i.predicate]
    assert listed == ffma_sites(cubin, symbol), "the FFMA decoding disagrees with cuobjdump"


def _b_register(operands: str) -> str:
    regs = re.findall(r"\bR\d+|\bRZ", operands)
    return regs[2] if len(regs) >= 3 else ""


def patch(cubin: bytes, symbol: str, policy: str) -> tuple[bytes, int, int]:
    """(patched cubin, FFMAs changed, FFMAs found)."""
    if policy not in POLICIES:
        raise ValueError(f"policy: one of {POLICIES}")
    data = bytearray(cubin)
    sites = ffma_sites(cubin, symbol)
    new_hi: dict[int, int] = {}
    hi_of = {at: struct.unpack_from("<Q", data, at + 8)[0] for at, _ in sites}
    if policy == "deepgemm":
        runs, cur = [], []
        for at, ops in sites:
            if cur and at != cur[-1][0] + 16:
                runs.append(cur)
                cur = []
            cur.append((at, ops))
        runs.append(cur)
        for run in runs:
            if len(run) < 8:
                continue
            seen, last_cached, last_reg = set(), False, ""
            for at, ops in run[: len(run) * 9 // 16]:
                hi, reg = hi_of[at], _b_register(ops)
                cached = bool(hi & REUSE_B)
                if cached and (reg not in seen or (last_cached and reg == last_reg)):
                    new_hi[at] = hi & ~REUSE_B & ~YIELD
                    cached = False
                seen.add(reg)
                last_cached, last_reg = cached, reg
    elif policy.startswith("reuse_"):
        every = 0 if policy == "reuse_all" else int(policy[len("reuse_y"):])
        regs = [re.findall(r"R\d+|RZ", ops) for _, ops in sites]
        for i, (at, _) in enumerate(sites):
            hi = hi_of[at] & ~REUSE_A & ~REUSE_B
            if i + 1 < len(sites) and sites[i + 1][0] == at + 16 and (not every or i % every != every - 1):
                d, nxt = regs[i][0], regs[i + 1]
                for slot, flag in ((1, REUSE_A), (2, REUSE_B)):     # not a register this FFMA writes, nor RZ
                    if regs[i][slot] == nxt[slot] and regs[i][slot] not in (d, "RZ"):
                        hi |= flag
            new_hi[at] = hi | YIELD if hi & REUSE_ALL else hi & ~YIELD
    else:
        for i, (at, _) in enumerate(sites):
            hi = hi_of[at]
            if policy == "yield_all" or (policy == "yield4" and i % 4 == 3):
                new_hi[at] = hi & ~REUSE_ALL & ~YIELD
            else:
                new_hi[at] = hi | YIELD
    changed = 0
    for at, hi in new_hi.items():
        if hi != hi_of[at]:
            struct.pack_into("<Q", data, at + 8, hi)
            changed += 1
    return bytes(data), changed, len(sites)


def patched_module(module, kernel: str, policy: str):
    """A copy of a grader CudaModule whose ``kernel`` (a name expression) has its FFMAs patched."""
    import copy

    cub, changed, found = patch(module.cubin, module.symbol(kernel), policy)
    m = copy.copy(module)
    m.cubin, m.elf = cub, Cubin(cub)
    m._objcode, m._kernels, m._shapes = None, {}, {}
    return m, changed, found


if __name__ == "__main__":
    src, sym, pol, dst = sys.argv[1:5]
    cub, changed, found = patch(Path(src).read_bytes(), sym, pol)
    Path(dst).write_bytes(cub)
    check_sites(Path(src).read_bytes(), sym)
    check_sites(cub, sym)
    print(f"{pol}: {changed} of {found} FFMAs changed (decoding checked against cuobjdump)")
