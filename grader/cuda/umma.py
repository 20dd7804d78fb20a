"""Blackwell (tcgen05 / UMMA) descriptors on the CPU: encode, decode, check against a tile, draw.

A ``tcgen05.mma`` reads its operands through two descriptors that nothing checks before the GPU
runs them: a wrong field is a launch failure or silent garbage. This module lets a lesson (and
its learner) check them on any machine.

* :class:`SmemDesc` and :func:`encode_smem` / :func:`decode_smem`: the 64-bit shared-memory
  matrix descriptor (start address, leading / stride byte offsets, the fixed version bits 46–48
  = 0b001, base offset, LBO mode, swizzle code), every byte field stored without its 4 low bits.
* :class:`InstrDesc` and :func:`encode_instr` / :func:`decode_instr`: the 32-bit instruction
  descriptor of ``kind::f16 / tf32 / f8f6f4 / i8`` and of the block-scaled kinds (formats, majors,
  N >> 3, M >> 4, scale-factor type and ids).
* :class:`Tile`: how TMA (or any copy) placed an operand tile in shared memory — rows along M
  (or N), columns along K, K- or MN-major, swizzle — and :func:`tile_address` of each element.
* :func:`check_smem` replays the address generation the descriptor describes (CUTLASS's
  canonical UMMA layouts, ``cute/atom/mma_traits_sm100.hpp``) for one instruction's K slice and
  compares it, element by element, with where the tile really holds each element; it names the
  field that is wrong. :func:`check_instr` checks the shape and types against the kind and the
  CTA group (PTX ISA, tcgen05 "Matrix shape" table). :func:`draw_smem` pictures which bytes the
  descriptor addresses.

Bit layouts read from the PTX ISA (tcgen05 shared memory descriptor, instruction descriptor) and
CUTLASS (``cute/arch/mma_sm100_desc.hpp``); nothing here was checked against a Blackwell GPU.
Standard library only, except :func:`draw_smem` (matplotlib).
"""
from __future__ import annotations

from dataclasses import dataclass, field

#: Swizzle name -> the 3-bit code in bits 61–63 of the shared-memory descriptor.
SWIZZLE_CODE = {"none": 0, "128B_base32B": 1, "128B": 2, "64B": 4, "32B": 6}
#: Swizzle name -> bytes in one row of its atom (the span TMA writes per row; 16: no swizzle).
SWIZZLE_BYTES = {"none": 16, "32B": 32, "64B": 64, "128B": 128}
#: Bytes of K one MMA instruction consumes, every kind (16 bf16, 32 fp8, 64 fp4 values).
K_BYTES = 32
#: Element width in bits per operand format.
BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "e2m3": 8, "e3m2": 8, "e2m1": 4,
        "u8": 8, "s8": 8}

_SMEM_FIELDS = (("start", 0, 14), ("lbo", 16, 14), ("sbo", 32, 14), ("version", 46, 2),
                ("base_offset", 49, 3), ("lbo_mode", 52, 1), ("swizzle_code", 61, 3))


# ---------------------------------------------------------------- the shared-memory descriptor
@dataclass(frozen=True)
class SmemDesc:
    """Byte values (start address, LBO, SBO), not the encoded ones: encoding drops 4 low bits."""
    start: int
    lbo: int
    sbo: int
    swizzle: str = "128B"
    base_offset: int = 0
    lbo_mode: int = 0
    version: int = 1                      # bits 46–48 must be 0b001 on Blackwell
    reserved: int = 0                     # any other bit set (decode only)

    def __str__(self):
        return (f"start 0x{self.start:05x}, LBO {self.lbo} B, SBO {self.sbo} B, swizzle {self.swizzle}, "
                f"version {self.version}, base offset {self.base_offset}, LBO mode {self.lbo_mode}")


def encode_smem(d: SmemDesc) -> int:
    """The 64-bit descriptor; ValueError when a byte field is not a multiple of 16 or too large."""
    out = 0
    for name, value in (("start", d.start), ("lbo", d.lbo), ("sbo", d.sbo)):
        if value % 16 or not 0 <= value < 16 << 14:
            raise ValueError(f"{name} = {value}: must be a multiple of 16 below {16 << 14} (stored >> 4 in 14 bits)")
    values = {"start": d.start >> 4, "lbo": d.lbo >> 4, "sbo": d.sbo >> 4, "version": d.version,
              "base_offset": d.base_offset, "lbo_mode": d.lbo_mode, "swizzle_code": SWIZZLE_CODE[d.swizzle]}
    for name, lo, width in _SMEM_FIELDS:
        out |= (values[name] & ((1 << width) - 1)) << lo
    return out


def decode_smem(x: int) -> SmemDesc:
    f = {name: (x >> lo) & ((1 << width) - 1) for name, lo, width in _SMEM_FIELDS}
    used = sum(((1 << w) - 1) << lo for _, lo, w in _SMEM_FIELDS)
    code = {v: k for k, v in SWIZZLE_CODE.items()}.get(f["swizzle_code"], f"invalid({f['swizzle_code']})")
    return SmemDesc(start=f["start"] << 4, lbo=f["lbo"] << 4, sbo=f["sbo"] << 4, swizzle=code,
                    base_offset=f["base_offset"], lbo_mode=f["lbo_mode"], version=f["version"],
                    reserved=x & ~used & (2 ** 64 - 1))


# ---------------------------------------------------------------- where a tile's elements are
@dataclass(frozen=True)
class Tile:
    """An operand tile in shared memory as TMA writes it: ``rows`` along M (A) or N (B), ``cols``
    along K. K-major: K is contiguous, the tile is ⌈K bytes / W⌉ boxes of rows × W bytes, one after
    the other (W: the swizzle's row bytes, 16 without one). MN-major: the same with M/N contiguous,
    boxes of cols × W bytes. Inside a box, row r starts r·W bytes in; the swizzle permutes 16-byte
    chunks by the address bits above them (so the tile must start on a multiple of 8·W)."""
    rows: int
    cols: int
    dtype: str = "bf16"
    major: str = "K"
    swizzle: str = "128B"
    address: int = 0

    @property
    def bits(self) -> int:
        return BITS[self.dtype]

    @property
    def width(self) -> int:
        return SWIZZLE_BYTES[self.swizzle]

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * self.bits // 8


def swizzle(addr: int, name: str) -> int:
    """Swizzle<B, 4, 3> on a byte address: the 16-byte chunk bits [4, 4+B) XOR the bits [7, 7+B)."""
    b = {"none": 0, "32B": 1, "64B": 2, "128B": 3}[name]
    return addr ^ (((addr >> 7) & ((1 << b) - 1)) << 4)


def tile_address(t: Tile, r: int, c: int) -> int:
    """Byte address of element (r along M/N, c along K) of the tile (of its first byte, for fp4)."""
    w, bits = t.width, t.bits
    inner, outer, extent = (c, r, t.rows) if t.major == "K" else (r, c, t.cols)
    byte = inner * bits // 8
    box = byte // w
    return swizzle(t.address + box * extent * w + outer * w + byte % w, t.swizzle)


def descriptor_address(d: SmemDesc, major: str, bits: int, i: int, kk: int) -> int:
    """Where the hardware reads element (i along M/N, kk along the instruction's K) through ``d``:
    the canonical UMMA layouts in 16-byte units (CUTLASS mma_traits_sm100.hpp), then the swizzle.
    K-major: 8 rows of one swizzle row each, groups of 8 rows SBO apart; without swizzle, 8 × 16 B
    core matrices, the next 16 B of K LBO away. MN-major: a swizzle row of M/N values, the next such
    atom LBO away; 8 K rows one swizzle row apart, the next 8 SBO away (without swizzle: SBO along
    M/N, LBO along K)."""
    w = SWIZZLE_BYTES.get(d.swizzle, 16)
    kb = kk * bits // 8
    if major == "K":
        if d.swizzle == "none":
            off = (i % 8) * 16 + (i // 8) * d.sbo + kb % 16 + (kb // 16) * d.lbo
        else:
            off = (i % 8) * w + (i // 8) * d.sbo + kb
    else:
        ib = i * bits // 8
        if d.swizzle == "none":
            off = ib % 16 + (ib // 16) * d.sbo + (kk % 8) * 16 + (kk // 8) * d.lbo
        else:
            off = ib % w + (ib // w) * d.lbo + (kk % 8) * w + (kk // 8) * d.sbo
    return swizzle(d.start + off, d.swizzle if d.swizzle in SWIZZLE_BYTES else "none")


def expected_smem(t: Tile, k_step: int = 0, rows: int | None = None, row0: int = 0) -> SmemDesc:
    """The descriptor of instruction ``k_step``'s K slice (32 bytes of K each) of rows
    [row0, row0 + rows) of tile ``t``: what :func:`check_smem` accepts."""
    w = t.width
    kbytes = K_BYTES * k_step
    if t.major == "K":
        start = t.address + (kbytes // w) * t.rows * w + kbytes % w + row0 * w
        lbo = t.rows * w if t.swizzle == "none" else 16      # swizzled K-major: LBO unused (canonical 1)
        sbo = 8 * w
    else:
        krows = K_BYTES * 8 // t.bits                          # K rows per step: 16 bf16, 32 fp8
        start = t.address + k_step * krows * w + (row0 * t.bits // 8 // w) * t.cols * w
        if t.swizzle == "none":
            lbo, sbo = 8 * 16, t.cols * 16
        else:
            lbo, sbo = t.cols * w, 8 * w
    return SmemDesc(start=start, lbo=lbo, sbo=sbo, swizzle=t.swizzle)


@dataclass
class SmemCheck:
    """What :func:`check_smem` found: ``problems`` (empty: right), the decoded descriptor, the
    addresses read and where the elements are."""
    desc: SmemDesc
    tile: Tile
    problems: list = field(default_factory=list)
    reads: dict = field(default_factory=dict)       # (i, kk) -> address the descriptor reads
    wants: dict = field(default_factory=dict)       # (i, kk) -> address the element is at
    notes: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self):
        head = f"descriptor {self.desc}"
        body = ["  ✓ every element of the slice is read from where it is"] if self.ok else \
            [f"  ✗ {p}" for p in self.problems]
        return "\n".join([head, *body, *(f"  · {n}" for n in self.notes)])


def check_smem(value: int, t: Tile, k_step: int = 0, rows: int | None = None, row0: int = 0) -> SmemCheck:
    """Decode ``value`` and replay the addresses it makes the MMA read for K slice ``k_step`` of
    rows [row0, row0 + rows) of tile ``t``; compare each with where the element really is."""
    d = decode_smem(int(value))
    rows = t.rows - row0 if rows is None else rows
    rep = SmemCheck(desc=d, tile=t)
    want = expected_smem(t, k_step, rows, row0)
    if d.version != 1:
        rep.problems.append(f"version bits 46–48 are {d.version:#05b}: Blackwell needs 0b001 (a Hopper "
                            "wgmma descriptor has 0 there)")
    if d.reserved:
        rep.problems.append(f"reserved bits set: {d.reserved:#x}")
    if d.swizzle != t.swizzle:
        rep.problems.append(f"swizzle code says {d.swizzle}, the tile is stored with {t.swizzle}")
    if t.swizzle != "none" and t.address % (8 * t.width):
        rep.problems.append(f"the tile starts at 0x{t.address:x}, not a multiple of {8 * t.width} B: the "
                            f"{t.swizzle} swizzle pattern repeats every {8 * t.width} B (or set base offset)")
    if d.base_offset:
        rep.problems.append(f"base offset {d.base_offset}: 0 for tiles aligned to the swizzle's repeat")
    if d.lbo_mode:
        rep.problems.append("LBO mode 1 (absolute): only for 48-byte K tiles")
    kelems = K_BYTES * 8 // t.bits
    for i in range(rows):
        for kk in range(kelems):
            rep.reads[(i, kk)] = descriptor_address(d, t.major, t.bits, i, kk)
            rep.wants[(i, kk)] = tile_address(t, row0 + i, k_step * kelems + kk)
    bad = [key for key in rep.reads if rep.reads[key] != rep.wants[key]]
    if bad and not rep.problems:
        fields = [n for n in ("start", "lbo", "sbo") if getattr(d, n) != getattr(want, n)]
        if t.major == "K" and t.swizzle != "none":
            fields = [f for f in fields if f != "lbo"]
        names = {"start": "start address", "lbo": "leading byte offset (LBO)", "sbo": "stride byte offset (SBO)"}
        for f in fields:
            rep.problems.append(f"{names[f]} is {getattr(d, f)} B; this tile needs {getattr(want, f)} B"
                                + (" (the next group of 8 rows)" if f == "sbo" and t.major == "K" else "")
                                + (" (the next box along M/N)" if f == "lbo" and t.major == "MN" else ""))
    if bad:
        (i, kk) = bad[0]
        rep.problems.append(f"{len(bad)} of {len(rep.reads)} elements read from the wrong place; the first, "
                            f"(row {row0 + i}, k {k_step * kelems + kk}), is read at 0x{rep.reads[(i, kk)]:05x}"
                            f" but stored at 0x{rep.wants[(i, kk)]:05x}")
    if t.major == "K" and t.swizzle != "none" and d.lbo != 16:
        rep.notes.append(f"LBO {d.lbo} B is not used by a swizzled K-major operand (16 B, encoded 1, is canonical)")
    return rep


# ---------------------------------------------------------------- the instruction descriptor
#: kind -> (format codes, K per instruction in elements). Block-scaled kinds have their own layout.
FORMATS = {"f16": {"f16": 0, "bf16": 1}, "tf32": {"tf32": 2},
           "f8f6f4": {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5}, "i8": {"u8": 0, "s8": 1},
           "mxf8f6f4": {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5},
           "mxf4": {"e2m1": 1}, "mxf4nvf4": {"e2m1": 1}}
D_FORMATS = {"f16": 0, "f32": 1, "s32": 2}
SCALE_FORMATS = {"ue4m3": 0, "ue8m0": 1}
BLOCK_SCALED = ("mxf8f6f4", "mxf4", "mxf4nvf4")


@dataclass(frozen=True)
class InstrDesc:
    kind: str = "f16"
    M: int = 128
    N: int = 256
    a: str = "bf16"
    b: str = "bf16"
    d: str = "f32"                   # ignored by the block-scaled kinds (always f32)
    a_major: str = "K"
    b_major: str = "K"
    negate_a: bool = False
    negate_b: bool = False
    scale: str = "ue8m0"             # block-scaled kinds: the scale factors' type
    sfa_id: int = 0
    sfb_id: int = 0
    reserved: int = 0                # decode only

    def __str__(self):
        s = (f"kind::{self.kind} M={self.M} N={self.N} A {self.a} ({self.a_major}-major) B {self.b} "
             f"({self.b_major}-major)")
        return s + (f" scales {self.scale}" if self.kind in BLOCK_SCALED else f" D {self.d}")


def _put(fields):
    out = 0
    for value, lo, width in fields:
        if not 0 <= value < 1 << width:
            raise ValueError(f"{value} does not fit in bits {lo}–{lo + width - 1}")
        out |= value << lo
    return out


def encode_instr(i: InstrDesc) -> int:
    fmt = FORMATS[i.kind]
    if i.M % 16 or i.N % 8:
        raise ValueError(f"M must be a multiple of 16 and N of 8 (stored M >> 4, N >> 3): M={i.M}, N={i.N}")
    common = [(fmt[i.a], 7, 3), (fmt[i.b], 10, 3), (int(i.negate_a), 13, 1), (int(i.negate_b), 14, 1),
              (int(i.a_major == "MN"), 15, 1), (int(i.b_major == "MN"), 16, 1), (i.N >> 3, 17, 6), (i.M >> 4, 24, 5)]
    if i.kind in BLOCK_SCALED:
        return _put(common + [(i.sfb_id, 4, 2), (SCALE_FORMATS[i.scale], 23, 1), (i.sfa_id, 29, 2)])
    return _put(common + [(D_FORMATS[i.d], 4, 2)])


def decode_instr(x: int, kind: str) -> InstrDesc:
    g = lambda lo, w: (x >> lo) & ((1 << w) - 1)  # noqa: E731
    names = {v: k for k, v in FORMATS[kind].items()}
    base = dict(kind=kind, M=g(24, 5) << 4, N=g(17, 6) << 3, a=names.get(g(7, 3), f"invalid({g(7, 3)})"),
                b=names.get(g(10, 3), f"invalid({g(10, 3)})"), a_major="MN" if g(15, 1) else "K",
                b_major="MN" if g(16, 1) else "K", negate_a=bool(g(13, 1)), negate_b=bool(g(14, 1)))
    if kind in BLOCK_SCALED:
        used = _put([(3, 4, 2), (7, 7, 3), (7, 10, 3), (15, 13, 4), (63, 17, 6), (1, 23, 1), (31, 24, 5), (3, 29, 2)])
        return InstrDesc(**base, scale="ue8m0" if g(23, 1) else "ue4m3", sfa_id=g(29, 2), sfb_id=g(4, 2),
                         reserved=x & ~used & 0xFFFFFFFF)
    dn = {v: k for k, v in D_FORMATS.items()}
    used = _put([(3, 4, 2), (7, 7, 3), (7, 10, 3), (15, 13, 4), (63, 17, 6), (31, 24, 5)])
    return InstrDesc(**base, d=dn.get(g(4, 2), "invalid"), reserved=x & ~used & 0xFFFFFFFF)


def legal_shapes(kind: str, cta_group: int, M: int | None = None) -> tuple[set, set]:
    """(legal M, legal N for that M) of a dense tcgen05.mma without .ws (PTX ISA's shape table;
    CUTLASS's SM100 MMA atoms assert the same): one CTA M 64 with N 8…256 by 8 (i8: 8, or 16…256
    by 16), M 128 with N 16…256 by 16; a CTA pair M 128 or 256, N 16…256 by 16 (i8: by 32).
    Block-scaled: M 128 alone, M 128 or 256 for a pair (mxf8f6f4 pair: 256)."""
    if cta_group == 1:
        m = {128} if kind in BLOCK_SCALED else {64, 128}
        if M == 128:
            n = set(range(16, 257, 16))
        else:
            n = {8} | set(range(16, 257, 16)) if kind == "i8" else set(range(8, 257, 8))
    else:
        m = {256} if kind == "mxf8f6f4" else {128, 256}
        n = set(range(32, 257, 32)) if kind == "i8" else set(range(16, 257, 16))
    return m, n


def check_instr(value: int, kind: str, cta_group: int = 1, *, a: str | None = None, b: str | None = None,
                a_major: str | None = None, b_major: str | None = None, M: int | None = None,
                N: int | None = None) -> list[str]:
    """Problems with instruction descriptor ``value`` for ``tcgen05.mma.cta_group::{cta_group}.kind::{kind}``
    (empty: none found); the keyword arguments are what the kernel's tiles need."""
    i = decode_instr(int(value), kind)
    out = []
    ms, ns = legal_shapes(kind, cta_group, i.M)
    if i.M not in ms:
        out.append(f"M = {i.M} is not legal for kind::{kind} with cta_group::{cta_group} (legal: {sorted(ms)})")
    if i.N not in ns:
        step = sorted(ns)[-1] - sorted(ns)[-2]
        out.append(f"N = {i.N} is not legal for kind::{kind} with cta_group::{cta_group}" + (f" and M = {i.M}" if cta_group == 1 else "")
                   + f" ({min(ns)} … {max(ns)} in steps of {step})")
    for name, want in (("a", a), ("b", b), ("a_major", a_major), ("b_major", b_major), ("M", M), ("N", N)):
        if want is not None and getattr(i, name) != want:
            out.append(f"{name} is {getattr(i, name)}; the kernel's tiles need {want}")
    for op in ("a", "b"):
        t, major = getattr(i, op), getattr(i, f"{op}_major")
        if t.startswith("invalid"):
            out.append(f"{op.upper()} format code is not one of kind::{kind}'s: {t}")
        elif major == "MN" and (kind in ("mxf4", "mxf4nvf4") or BITS[t] < 8 or kind == "mxf8f6f4" and BITS[t] != 8):
            out.append(f"{op.upper()} is MN-major: kind::{kind} with {t} reads K-major operands only")
    if kind in BLOCK_SCALED:
        if kind == "mxf8f6f4" and i.scale != "ue8m0" or kind == "mxf4" and i.scale != "ue8m0":
            out.append(f"kind::{kind} takes ue8m0 scale factors (MX formats), not {i.scale}")
    elif kind == "f16" and i.d not in ("f16", "f32") or kind in ("tf32", "f8f6f4") and i.d != "f32":
        out.append(f"D format {i.d} is not legal for kind::{kind}")
    if i.reserved:
        out.append(f"reserved bits set: {i.reserved:#x}")
    return out


# ---------------------------------------------------------------- the picture
def draw_smem(check: SmemCheck, ax=None, max_lines: int = 320):
    """The tile's shared memory as lines of 128 bytes (8 chunks of 16 B; 32 B swizzle and none: 64 B):
    grey, the tile; green, a chunk the descriptor reads that holds the elements it wants; red, a chunk
    it reads that holds other elements; orange, a chunk holding wanted elements that it never reads.
    Returns the figure."""
    import numpy as np
    from matplotlib.colors import ListedColormap

    from ..plot import subplots

    t = check.tile
    line = 128 if t.width >= 64 else 64
    base = t.address - t.address % line
    read = {a // 16 for a in check.reads.values()}
    wanted = {a // 16 for a in check.wants.values()}
    right = {check.reads[k] // 16 for k in check.reads if check.reads[k] // 16 == check.wants[k] // 16}
    top = max(max(read | wanted) * 16 + 16, t.address + t.nbytes)
    nlines = min(max_lines, -(-(top - base) // line))
    grid = np.zeros((nlines, line // 16))
    for y in range(nlines):
        for x in range(line // 16):
            chunk = (base + y * line + x * 16) // 16
            inside = t.address // 16 <= chunk < (t.address + t.nbytes) // 16
            grid[y, x] = (2 if chunk in right else 3) if chunk in read else 4 if chunk in wanted else 1 if inside else 0
    fig = None
    if ax is None:
        fig, ax = subplots(figsize=(3.2, 4.5))
    cmap = ListedColormap(["white", "#d9d9d9", "#3a3", "#d22", "#f90"])
    ax.imshow(grid, cmap=cmap, vmin=0, vmax=4, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(line // 16))
    ax.set_xlabel("16-byte chunk")
    ax.set_ylabel(f"{line}-byte line from 0x{base:x}")
    verdict = "all right" if check.ok else f"{sum(check.reads[k] != check.wants[k] for k in check.reads)} elements wrong"
    ax.set_title(f"{t.rows}×{t.cols} {t.dtype} {t.major}-major, {t.swizzle}\n"
                 f"green read right, red read wrong, orange missed: {verdict}", fontsize=8)
    return fig if fig is not None else ax.figure


__all__ = ["SWIZZLE_CODE", "SWIZZLE_BYTES", "K_BYTES", "BITS", "SmemDesc", "encode_smem", "decode_smem", "Tile",
           "swizzle", "tile_address", "descriptor_address", "expected_smem", "SmemCheck", "check_smem",
           "FORMATS", "InstrDesc", "encode_instr", "decode_instr", "legal_shapes", "check_instr", "draw_smem",
           "BLOCK_SCALED"]
