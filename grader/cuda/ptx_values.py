"""The values and records :mod:`grader.cuda.ptx` and its instruction set share (a module of its own so
that neither imports the other): element tags, unknown values, packed values, tensor-map descriptions,
the TMA and wgmma records, the errors, the replay's address spaces. Standard library only."""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field


class ReplayError(RuntimeError):
    """The replay could not follow the kernel (an instruction it does not model, a branch on a
    value it does not know, a runaway loop). The message says which and where."""


@dataclass(frozen=True)
class Elem:
    """Element (row, col) of global tensor ``tensor`` (a name the replay's caller chose); ``head``
    for 3-D maps. What a shared-memory byte holds after a TMA load."""
    tensor: str
    row: int
    col: int
    head: int = 0

    def __str__(self):
        return f"{self.tensor}[{self.head}, {self.row}, {self.col}]" if self.head else f"{self.tensor}[{self.row}, {self.col}]"


class _Poison:
    """A value the replay does not know (read from memory nothing wrote, or computed from one)."""
    __slots__ = ()

    def __repr__(self):
        return "?"


POISON = _Poison()


@dataclass(frozen=True)
class Pack:
    """Several narrower values loaded or moved together (two bf16 elements in one 32-bit load)."""
    parts: tuple      # ((value, size in bytes), ...) low bytes first


def _f2i(v: float, w: int) -> int:
    if w == 64:
        return struct.unpack("<Q", struct.pack("<d", v))[0]
    if w == 16:
        return struct.unpack("<H", struct.pack("<e", v))[0] if math.isfinite(v) or math.isnan(v) else 0
    try:
        return struct.unpack("<I", struct.pack("<f", v))[0]
    except OverflowError:
        return 0x7F800000 if v > 0 else 0xFF800000


def _i2f(v: int, w: int) -> float:
    if w == 64:
        return struct.unpack("<d", struct.pack("<Q", v & (2**64 - 1)))[0]
    if w == 16:
        return struct.unpack("<e", struct.pack("<H", v & 0xFFFF))[0]
    return struct.unpack("<f", struct.pack("<I", v & 0xFFFFFFFF))[0]


def _bf16(v: float) -> int:
    """fp32 -> bf16 bits, round to nearest even."""
    if math.isnan(v):
        return 0x7FC0
    b = _f2i(v, 32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def _sx(v: int, w: int) -> int:
    v &= (1 << w) - 1
    return v - (1 << w) if v >> (w - 1) else v


_TYPES = {"pred": ("p", 1), "b8": ("b", 8), "b16": ("b", 16), "b32": ("b", 32), "b64": ("b", 64), "b128": ("b", 128),
          "u8": ("u", 8), "u16": ("u", 16), "u32": ("u", 32), "u64": ("u", 64),
          "s8": ("s", 8), "s16": ("s", 16), "s32": ("s", 32), "s64": ("s", 64),
          "f16": ("f", 16), "f16x2": ("b", 32), "bf16": ("f", 16), "bf16x2": ("b", 32), "f32": ("f", 32), "f64": ("f", 64),
          "tf32": ("b", 32), "e4m3": ("b", 8), "e5m2": ("b", 8)}




@dataclass
class MapSpec:
    """What a tensor map describes: the tensor's name (as :class:`Elem` will call it), its shape
    (rows, cols) or (heads, rows, cols), the box (rows, cols), the element size, the swizzle."""
    tensor: str
    shape: tuple
    box: tuple
    itemsize: int
    swizzle: str = "128B"


SWIZZLE_BITS = {"none": 0, "32B": 1, "64B": 2, "128B": 3}


def swizzle_addr(addr: int, swizzle: str) -> int:
    """Swizzle<B, 4, 3> on a shared-memory byte address (CUTLASS's name): the 16-byte chunk bits
    [4, 4 + B) XOR the bits [7, 7 + B); B = 3, 2, 1, 0 for 128B, 64B, 32B, none."""
    b = SWIZZLE_BITS[swizzle]
    return addr ^ (((addr >> 7) & ((1 << b) - 1)) << 4)


@dataclass
class TmaOp:
    kind: str              # "load" / "store"
    tid: int
    smem: int              # shared address of the box
    coords: tuple          # innermost first, as the instruction names them
    spec: MapSpec
    barrier: int | None
    seq: int
    line: int
    multicast: int | None = None


@dataclass
class WgmmaRead:
    """One wgmma as issued by a warpgroup and what it read when a wait retired it."""
    warpgroup: int
    seq: int                # issue order in the block
    shape: tuple            # (M, N, K)
    dtype: str              # "bf16" / "e4m3" / ...
    desc_a: int | None      # None: A from registers
    desc_b: int
    trans_a: int
    trans_b: int
    line: int
    tid: int
    scale_d: object = None  # the scale-d operand: False = D is overwritten (a fresh accumulator)
    a: dict = field(default_factory=dict)     # (i, kk) -> (address, value)
    b: dict = field(default_factory=dict)     # (n, kk) -> (address, value)
    done: bool = False


class Deadlock(Exception):
    pass


class _Yield(Exception):
    pass


_SHARED_BASE = 0x400              # where static shared memory starts (Hopper reserves the first KiB)
_GEN_SHARED = 0x7F00_0000_0000    # generic addresses of the shared window
_GEN_PARAM = 0x7E00_0000_0000     # generic addresses of kernel parameters
_GEN_LOCAL = 0x7D00_0000_0000
_GLOBAL_BASE = 0x1000_0000_0000   # pointers the caller passes


# ---------------------------------------------------------------- shared by the instruction families
_NUM = (int, float)


def _type_of(mods):
    """The last type modifier of an opcode: (kind, width)."""
    for m in reversed(mods):
        if m in _TYPES:
            return _TYPES[m]
    return ("b", 32)


def _space(mods):
    for m in mods:
        base = m.split("::")[0]
        if base in ("shared", "global", "param", "local", "const"):
            return base
    return ""


def _unknown(*vals):
    for v in vals:
        if not isinstance(v, _NUM):
            return True
    return False


def _unsupported(ins, nxt, why=""):
    def op(t):
        raise ReplayError(f"line {ins.line}: the replay does not model `{ins.text}`{why}")
    return op


def _noop(b, f, k, ins, mods, nxt):
    return lambda t: nxt
