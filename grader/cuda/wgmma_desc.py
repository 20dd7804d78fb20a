"""Hopper's wgmma shared-memory matrix descriptor: its bits, the byte each (row, k) of an operand is
read from, one descriptor checked against a tile (:func:`check_desc`, :func:`draw`), and what a replayed
wgmma read (:func:`fit`) (PTX ISA, "Matrix Descriptor Format" and the canonical layouts; CUTLASS ``GmmaDescriptor``).
The replay (:mod:`grader.cuda.ptx`) reads a wgmma's operands through these; :mod:`grader.cuda.wgmma_replay`
checks them. Standard library and NumPy."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from . import umma
from .ptx_values import Elem

#: Swizzle name -> the 2-bit code in bits 62–63 of a wgmma descriptor (not the tensor map's enum:
#: CU_TENSOR_MAP_SWIZZLE_128B is 3, which here would mean 32B).
SWIZZLE_CODE = {"none": 0, "128B": 1, "64B": 2, "32B": 3}
_CODE_NAME = {v: k for k, v in SWIZZLE_CODE.items()}
MAP_ENUM = {"none": 0, "32B": 1, "64B": 2, "128B": 3}
BITS = {"bf16": 16, "f16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8}
_FIELDS = (("start", 0, 14), ("lbo", 16, 14), ("sbo", 32, 14), ("base_offset", 49, 3), ("swizzle_code", 62, 2))
_USED = sum(((1 << w) - 1) << lo for _, lo, w in _FIELDS)


@dataclass(frozen=True)
class Desc:
    """A wgmma descriptor's fields in bytes (start, LBO, SBO are stored >> 4)."""
    start: int
    lbo: int
    sbo: int
    swizzle: str = "128B"
    base_offset: int = 0
    reserved: int = 0

    def __str__(self):
        s = f"start 0x{self.start:05x}, LBO {self.lbo} B, SBO {self.sbo} B, swizzle {self.swizzle}"
        return s + (f", base offset {self.base_offset}" if self.base_offset else "") + \
            (f", reserved bits {self.reserved:#x}" if self.reserved else "")

    def as_umma(self) -> umma.SmemDesc:
        return umma.SmemDesc(start=self.start, lbo=self.lbo, sbo=self.sbo, swizzle=self.swizzle,
                             base_offset=self.base_offset, version=0)


def encode(d: Desc) -> int:
    """The 64-bit value (``course::make_smem_desc``'s); ValueError for a field that does not fit."""
    for name in ("start", "lbo", "sbo"):
        v = getattr(d, name)
        if v % 16 or not 0 <= v < 1 << 18:
            raise ValueError(f"{name} = {v}: a multiple of 16 below {1 << 18} (stored >> 4 in 14 bits)")
    vals = {"start": d.start >> 4, "lbo": d.lbo >> 4, "sbo": d.sbo >> 4, "base_offset": d.base_offset,
            "swizzle_code": SWIZZLE_CODE[d.swizzle]}
    out = 0
    for name, lo, w in _FIELDS:
        out |= (vals[name] & ((1 << w) - 1)) << lo
    return out


def decode(x: int) -> Desc:
    x = int(x) & (2 ** 64 - 1)
    f = {name: (x >> lo) & ((1 << w) - 1) for name, lo, w in _FIELDS}
    return Desc(start=f["start"] << 4, lbo=f["lbo"] << 4, sbo=f["sbo"] << 4, swizzle=_CODE_NAME[f["swizzle_code"]],
                base_offset=f["base_offset"], reserved=x & ~_USED)


def operand_address(d: Desc, major: str, bits: int, i: int, kk: int) -> int:
    """Shared-memory byte address of element (i along M or N, kk along the instruction's K)."""
    return umma.descriptor_address(d.as_umma(), major, bits, i, kk)


def k_elems(dtype: str) -> int:
    """K of one wgmma: 32 bytes of K (16 bf16, 32 e4m3, 8 tf32)."""
    return 256 // BITS[dtype]


def operand_reads(block, rec) -> None:
    """Fill ``rec.a`` / ``rec.b`` of a replayed wgmma: for each (i, kk) the address its descriptor
    makes it read and the value shared memory holds there now (called by the replay when a
    ``wgmma.wait_group`` retires the wgmma)."""
    bits = BITS.get(rec.dtype, 16)
    M, N, K = rec.shape
    get = block.mem.get
    for desc, rows, trans, out in ((rec.desc_a, M, rec.trans_a, rec.a), (rec.desc_b, N, rec.trans_b, rec.b)):
        if desc is None:
            continue
        for key, a in zip(_keys(rows, K), operand_addresses(decode(desc), "MN" if trans else "K", bits, rows, K)):
            c = get(a)
            if c is None or type(c[0]) is not tuple:
                out[key] = (a, None)
            else:
                out[key] = (a, c[0][0] if c[2] == 0 else ("part", c[0][0], c[2]))


_KEYS: dict = {}


def _keys(rows, K):
    k = _KEYS.get((rows, K))
    if k is None:
        k = _KEYS[(rows, K)] = [(i, kk) for i in range(rows) for kk in range(K)]
    return k


def operand_addresses(d: Desc, major: str, bits: int, rows: int, K: int) -> list:
    """The addresses :func:`operand_address` gives for every (i < rows, kk < K), row by row: the same
    canonical layouts as :func:`grader.cuda.umma.descriptor_address`, on arrays (the replay reads some
    5,000 addresses a wgmma; tests/test_replay.py proves the two agree)."""
    import numpy as np

    i = np.arange(rows)[:, None]
    kk = np.arange(K)[None, :]
    kb = kk * bits // 8
    w = umma.SWIZZLE_BYTES.get(d.swizzle, 16)
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
    a = (d.start + off).astype(np.int64)
    b = umma.SWIZZLE_BYTES and {"none": 0, "32B": 1, "64B": 2, "128B": 3}[d.swizzle]
    a = a ^ (((a >> 7) & ((1 << b) - 1)) << 4)
    return a.ravel().tolist()


# ---------------------------------------------------------------- one descriptor against a tile
@dataclass
class DescCheck:
    """What :func:`check_desc` found (``problems`` empty: right) — also what :func:`draw` pictures."""
    desc: Desc
    tile: umma.Tile
    problems: list = field(default_factory=list)
    reads: dict = field(default_factory=dict)       # (i, kk) -> address the descriptor reads
    wants: dict = field(default_factory=dict)       # (i, kk) -> address where the element is
    notes: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self):
        body = ["  ✓ every element of the slice is read from where it is"] if self.ok else [f"  ✗ {p}" for p in self.problems]
        return "\n".join([f"descriptor {self.desc}", *body, *(f"  · {n}" for n in self.notes)])


def expected_desc(t: umma.Tile, k_step: int = 0, row0: int = 0) -> Desc:
    """The descriptor that reads K slice ``k_step`` (32 bytes of K) of rows [row0, …) of tile ``t``
    (the canonical layouts are Blackwell's too: :func:`grader.cuda.umma.expected_smem`)."""
    d = umma.expected_smem(t, k_step, None, row0)
    return Desc(start=d.start, lbo=d.lbo, sbo=d.sbo, swizzle=d.swizzle)


_FIELD_NAMES = {"start": "start address", "lbo": "leading byte offset (LBO)", "sbo": "stride byte offset (SBO)"}


def _explain(d: Desc, want: Desc, t: umma.Tile, code_value: int | None = None) -> list[str]:
    out = []
    if d.swizzle != want.swizzle:
        code = SWIZZLE_CODE.get(d.swizzle, "?")
        msg = (f"swizzle code {code} means {d.swizzle}; the tile is {t.swizzle}-swizzled (TMA wrote it so): "
               f"code {SWIZZLE_CODE[t.swizzle]}")
        if MAP_ENUM.get(t.swizzle) == code:
            msg += (f" — {code} is CU_TENSOR_MAP_SWIZZLE_{t.swizzle}'s value in the driver's enum, not the "
                    "descriptor's")
        out.append(msg)
    if d.lbo == want.sbo and d.sbo == want.lbo and d.lbo != d.sbo and not (t.major == "K" and t.swizzle != "none"):
        out.append(f"LBO and SBO are swapped: LBO {d.lbo} B, SBO {d.sbo} B; this tile needs LBO {want.lbo} B "
                   f"(the next {'box along M/N' if t.major == 'MN' else '16 bytes of K'}) and SBO {want.sbo} B "
                   f"(the next 8 {'rows of K' if t.major == 'MN' else 'rows'})")
        return out
    for f in ("start", "lbo", "sbo"):
        if f == "lbo" and t.major == "K" and t.swizzle != "none":
            continue                                   # not used by a swizzled K-major operand
        have, need = getattr(d, f), getattr(want, f)
        if have != need:
            extra = ""
            if f == "sbo":
                extra = f" (8 {'rows of K' if t.major == 'MN' else 'rows'} × {t.width} B)"
            elif f == "lbo" and t.major == "MN":
                extra = " (from one box of M/N to the next)"
            elif f == "start":
                extra = f" (off by {have - need:+d} B)"
            out.append(f"{_FIELD_NAMES[f]} is {have} B; this slice needs {need} B{extra}")
    return out


def check_desc(value: int, t: umma.Tile, k_step: int = 0, rows: int | None = None, row0: int = 0) -> DescCheck:
    """Decode wgmma descriptor ``value`` and replay the addresses it makes a wgmma read for K slice
    ``k_step`` (32 bytes of K) of rows [row0, row0 + rows) of tile ``t``; compare each with where the
    element is. ``problems`` names the field that differs from :func:`expected_desc`."""
    d = decode(value)
    rows = (t.rows - row0) if rows is None else rows
    rep = DescCheck(desc=d, tile=t)
    if d.reserved:
        rep.problems.append(f"reserved bits set: {d.reserved:#x} (Hopper's descriptor has no version field: bits "
                            "46–48 are 0; a Blackwell tcgen05 descriptor sets bit 46)")
    if d.base_offset:
        rep.problems.append(f"base offset {d.base_offset}: 0 for a tile that starts on its swizzle pattern's "
                            f"boundary ({8 * t.width} B)")
    if t.swizzle != "none" and t.address % (8 * t.width):
        rep.problems.append(f"the tile starts at 0x{t.address:x}, not a multiple of {8 * t.width} B: the "
                            f"{t.swizzle} pattern repeats every {8 * t.width} B (TMA writes it from there)")
    kelems = 256 // t.bits
    for i in range(rows):
        for kk in range(kelems):
            rep.reads[(i, kk)] = operand_address(d, t.major, t.bits, i, kk)
            rep.wants[(i, kk)] = umma.tile_address(t, row0 + i, k_step * kelems + kk)
    bad = [key for key in rep.reads if rep.reads[key] != rep.wants[key]]
    if bad:
        rep.problems.extend(_explain(d, expected_desc(t, k_step, row0), t) or [])
        i, kk = bad[0]
        rep.problems.append(f"{len(bad)} of {len(rep.reads)} elements read from the wrong place; the first, (row "
                            f"{row0 + i}, k {k_step * kelems + kk}), is read at 0x{rep.reads[(i, kk)]:05x} but "
                            f"stored at 0x{rep.wants[(i, kk)]:05x}")
    if t.major == "K" and t.swizzle != "none" and d.lbo not in (16, 0):
        rep.notes.append(f"LBO {d.lbo} B is not used by a swizzled K-major operand (PTX ISA: 'assumed 1', 16 B)")
    return rep


def draw(check, ax=None):
    """The tile's shared memory in 16-byte chunks: grey the tile, green read right, red read but
    holding other elements, orange holding wanted elements never read (:func:`grader.cuda.umma.draw_smem`)."""
    c = umma.SmemCheck(desc=check.desc.as_umma(), tile=check.tile, problems=list(check.problems),
                       reads=check.reads, wants=check.wants)
    return umma.draw_smem(c, ax)


# ---------------------------------------------------------------- what an operand read
@dataclass
class Operand:
    """Which tensor an operand must read, and how: ``along`` "row" when the operand's rows (M of A,
    N of B) are the tensor's rows and its k the tensor's columns (K-major in global memory); "col"
    when its rows are the tensor's columns and its k the tensor's rows (a row-major (K, N) B)."""
    tensor: str
    along: str = "row"


@dataclass
class Fit:
    """How one operand of one wgmma read: ``origin`` (head, first row along M/N, first k) in the
    tensor's coordinates, ``wrong`` the (i, kk) that did not hold the element at origin + (i, kk)."""
    origin: tuple | None
    wrong: list
    total: int
    tensors: Counter


def fit(reads: dict, want: Operand, rows: int = 0, kelems: int = 0) -> Fit:
    """Find the block of ``want.tensor`` a wgmma operand read (of ``rows`` × ``kelems``: its origin is
    then preferred on multiples of them, as every tile of the course is); list the elements off it."""
    implied = {}
    tensors: Counter = Counter()
    row = want.along == "row"
    for (i, kk), (_, v) in reads.items():
        if type(v) is Elem:
            tensors[v.tensor] += 1
            if v.tensor == want.tensor:
                implied[(i, kk)] = (v.head, v.row - i, v.col - kk) if row else (v.head, v.col - i, v.row - kk)
    votes = Counter(implied.values())
    origin = implied.get((0, 0))
    if votes:
        best, n = votes.most_common(1)[0]
        if origin is None or n > votes[origin]:
            origin = best
        if rows and kelems:             # an instruction's block starts on its own multiples
            aligned = [(c, o) for o, c in votes.items() if o[1] % rows == 0 and o[2] % kelems == 0]
            if aligned:
                origin = max(aligned)[1]
    wrong = sorted(key for key in reads if implied.get(key) != origin or origin is None)
    return Fit(origin, wrong, len(reads), tensors)


def refit(reads: dict, want: Operand, origin: tuple) -> Fit:
    """The same reads measured against a given origin (the block the wgmma should have read)."""
    h, mn0, k0 = origin
    row = want.along == "row"
    wrong, tensors = [], Counter()
    for (i, kk), (_, v) in reads.items():
        ok = type(v) is Elem and v.tensor == want.tensor and v.head == h and \
            ((v.row, v.col) == ((mn0 + i, k0 + kk) if row else (k0 + kk, mn0 + i)))
        if type(v) is Elem:
            tensors[v.tensor] += 1
        if not ok:
            wrong.append((i, kk))
    return Fit(origin, sorted(wrong), len(reads), tensors)


__all__ = ["SWIZZLE_CODE", "MAP_ENUM", "BITS", "Desc", "encode", "decode", "operand_address", "k_elems",
           "operand_reads", "operand_addresses", "DescCheck", "expected_desc", "check_desc", "draw", "Operand", "Fit",
           "fit", "refit"]
