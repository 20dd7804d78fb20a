"""The pictures of lesson 03.04 (mma.sync, ldmatrix, the shared-memory swizzle, the cp.async ring).

    .venv/bin/python tools/figures/ch03_mma.py            # writes solutions/03_gemm/figures/*.svg
    .venv/bin/python tools/figures/ch03_mma.py --out DIR  # the same files into DIR (tests compare them)

Every map drawn here is computed from the rule the PTX ISA states (section "Matrix Fragments for
mma.m16n8k16 with floating point type" and "Warp-level matrix load instruction: ldmatrix") and
checked against a second way of writing it (the register view course.cuh's comments use) before
anything is drawn. The swizzle is the kernel's own (swz_a, swz_b of 03.04's cell); the bank group
of a 16-byte chunk is its byte address / 16 mod 8 (32 banks of 4 bytes = 8 groups of 16 bytes).
The output is deterministic (no dates, fixed ids) so that regenerating changes nothing.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "solutions" / "03_gemm" / "figures"
COLORS = ["#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5"]


# ------------------------------------------------------------------ the maps, from the PTX ISA
def a_owner(m: int, k: int) -> tuple[int, int]:
    """(lane, register 0-3) holding A[m][k] of an m16n8k16 bf16/f16 A fragment.

    PTX ISA: element a_i (i = 0..7, two per 32-bit register) of lane (groupID = lane >> 2,
    threadID_in_group = lane % 4) sits at row groupID for i < 2 or 4 <= i < 6, else groupID + 8;
    column threadID_in_group * 2 + (i & 1), plus 8 for i >= 4."""
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(8):
            row = g if (i < 2 or 4 <= i < 6) else g + 8
            col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
            if (row, col) == (m, k):
                return lane, i // 2
    raise AssertionError((m, k))


def b_owner(k: int, n: int) -> tuple[int, int]:
    """(lane, register 0-1) holding B[k][n]: b_i at row threadID_in_group * 2 + (i & 1), + 8 for
    i >= 2, column groupID."""
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(4):
            if (t * 2 + (i & 1) + (8 if i >= 2 else 0), g) == (k, n):
                return lane, i // 2
    raise AssertionError((k, n))


def c_owner(m: int, n: int) -> tuple[int, int]:
    """(lane, float 0-3) holding C[m][n] (and D): c_i at row groupID (i < 2) or groupID + 8,
    column threadID_in_group * 2 + (i & 1)."""
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(4):
            if (g if i < 2 else g + 8, t * 2 + (i & 1)) == (m, n):
                return lane, i
    raise AssertionError((m, n))


def check_maps() -> None:
    """The same maps as course.cuh's comments state them (the register view), and each element
    held exactly once."""
    for lane in range(32):
        g, t = lane // 4, lane % 4
        want_a = {(g, 2 * t): 0, (g, 2 * t + 1): 0, (g + 8, 2 * t): 1, (g + 8, 2 * t + 1): 1,
                  (g, 2 * t + 8): 2, (g, 2 * t + 9): 2, (g + 8, 2 * t + 8): 3, (g + 8, 2 * t + 9): 3}
        for (m, k), reg in want_a.items():
            assert a_owner(m, k) == (lane, reg)
        for (k, n), reg in {(2 * t, g): 0, (2 * t + 1, g): 0, (2 * t + 8, g): 1, (2 * t + 9, g): 1}.items():
            assert b_owner(k, n) == (lane, reg)
        for (m, n), f in {(g, 2 * t): 0, (g, 2 * t + 1): 1, (g + 8, 2 * t): 2, (g + 8, 2 * t + 1): 3}.items():
            assert c_owner(m, n) == (lane, f)
    from collections import Counter
    for owner, rows, cols, per in ((a_owner, 16, 16, 2), (b_owner, 16, 8, 2), (c_owner, 16, 8, 1)):
        held = Counter(owner(r, c) for r in range(rows) for c in range(cols))
        assert set(held.values()) == {per}      # every register holds its elements, nothing twice
    # ldmatrix.x4: lane l gives the address of row l % 8 of matrix l // 8, and receives, of every
    # matrix j, row l // 4, columns 2 (l % 4) and 2 (l % 4) + 1 into its register j. With the A
    # tile's four 8x8 matrices ordered (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
    # (rows 8-15, k 8-15), register j is exactly the mma's a-register j:
    quad = [(0, 0), (8, 0), (0, 8), (8, 8)]
    for lane in range(32):
        for j, (r0, c0) in enumerate(quad):
            for e in range(2):
                assert a_owner(r0 + lane // 4, c0 + 2 * (lane % 4) + e) == (lane, j)
    # ldmatrix.x4.trans on B stored (k, n), n contiguous: matrix j's row r is k row r of its block;
    # transposed, lane l receives (k = 2 (l % 4) + e, n = l // 4) of it: the b-registers.
    bquad = [(0, 0, 0, 0), (8, 0, 0, 1), (0, 8, 1, 0), (8, 8, 1, 1)]   # (k0, n0, n8 tile, register)
    for lane in range(32):
        for k0, n0, tile, reg in bquad:
            for e in range(2):
                lane_b, reg_b = b_owner(k0 + 2 * (lane % 4) + e, lane // 4)
                assert (lane_b, reg_b) == (lane, reg) and n0 == 8 * tile


def swz_a(r: int, c: int) -> int:
    return c ^ ((r >> 1) & 3)        # 03.04: A rows of BK = 32 bf16 = 64 bytes = 4 chunks


def swz_b(r: int, c: int) -> int:
    return c ^ (r & 7)               # 03.04: B rows of BN bf16, a multiple of 128 bytes


def bank_group(byte_addr: int) -> int:
    return (byte_addr // 16) % 8     # 32 banks x 4 B: 8 groups of 16 B per 128-byte line


# ------------------------------------------------------------------ a small SVG writer
# Hand-written SVG (rectangles and text, one shared style sheet) stays a few tens of KB where
# matplotlib's per-glyph styling of ~800 labels took 250 KB.
class Svg:
    def __init__(self, width, height):
        self.w, self.h, self.items = width, height, []

    def rect(self, x, y, w, h, fill, stroke="#ffffff", sw=1.0, opacity=1.0):
        # defaults (white 1-px stroke) come from the style sheet: only what differs is written
        extra = f' style="stroke:{stroke};stroke-width:{sw:g}px"' if (stroke, sw) != ("#ffffff", 1.0) else ""
        extra += f' fill-opacity="{opacity}"' if opacity != 1.0 else ""
        self.items.append(f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" fill="{fill}"{extra}/>')

    def text(self, x, y, s, size=8, anchor="middle", bold=False):
        s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        extra = (f' font-size="{size:g}"' if size != 8 else "") + (f' text-anchor="{anchor}"' if anchor != "middle" else "")
        extra += ' font-weight="bold"' if bold else ""
        self.items.append(f'<text x="{x:g}" y="{y:g}"{extra}>{s}</text>')

    def line(self, x1, y1, x2, y2, color="#888888", dash=True):
        d = ' stroke-dasharray="2,3"' if dash else ""
        self.items.append(f'<line x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" stroke="{color}"{d}/>')

    def save(self, name):
        OUT.mkdir(parents=True, exist_ok=True)
        path = OUT / name
        body = "\n".join(self.items)
        path.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.w}" height="{self.h}" '
                        f'viewBox="0 0 {self.w} {self.h}" font-family="DejaVu Sans, Arial, sans-serif">\n'
                        '<style>rect{stroke:#ffffff;stroke-width:1px}</style>\n'
                        '<rect width="100%" height="100%" fill="#ffffff" style="stroke:none"/>\n'
                        '<g font-size="8" text-anchor="middle" dominant-baseline="central">\n'
                        f'{body}\n</g>\n</svg>\n')
        size = path.stat().st_size
        assert size < 100_000, f"{name}: {size} bytes"
        return path


def grid(svg, x0, y0, rows, cols, cell, label, color, title, xlabel, ylabel, size=8, frame=()):
    """A rows × cols table at (x0, y0): cell (r, c) coloured color(r, c) and labelled label(r, c)."""
    svg.text(x0 + cols * cell / 2, y0 - 30, title, size=10, bold=True)
    for c in range(cols):
        svg.text(x0 + (c + 0.5) * cell, y0 - 10, str(c), size=7)
    for r in range(rows):
        svg.text(x0 - 10, y0 + (r + 0.5) * cell, str(r), size=7)
        for c in range(cols):
            svg.rect(x0 + c * cell, y0 + r * cell, cell, cell, color(r, c))
            lines = label(r, c).split("\n")
            for i, ln in enumerate(lines):
                svg.text(x0 + (c + 0.5) * cell, y0 + (r + 0.5 + (i - (len(lines) - 1) / 2) * 0.36) * cell, ln,
                         size=size)
    for (r, c) in frame:
        svg.rect(x0 + c * cell, y0 + r * cell, cell, cell, "none", stroke="#000000", sw=2)
    svg.text(x0 + cols * cell / 2, y0 + rows * cell + 14, xlabel, size=8)
    svg.text(x0 - 24, y0 + rows * cell / 2, ylabel, size=8)


def legend(svg, x, y, entries, size=8):
    for i, (color, text) in enumerate(entries):
        svg.rect(x, y + 15 * i - 5, 10, 10, color, stroke="#666666", sw=0.5)
        svg.text(x + 15, y + 15 * i, text, size=size, anchor="start")


# ------------------------------------------------------------------ 1. the fragment map
def fragment_map():
    cell = 22
    svg = Svg(16 * cell + 2 * 8 * cell + 200, 16 * cell + 170)
    y0 = 60
    svg.text(svg.w / 2, 14, "mma.sync.m16n8k16 (bf16 in, fp32 out): which lane holds each element. "
             "g = lane / 4, t = lane % 4", size=11, bold=True)
    xa, xb, xc = 50, 50 + 16 * cell + 60, 50 + 16 * cell + 60 + 8 * cell + 60
    grid(svg, xa, y0, 16, 16, cell, lambda m, k: str(a_owner(m, k)[0]), lambda m, k: COLORS[a_owner(m, k)[1]],
         "A (16 × 16): lane, colour = register", "k", "m")
    grid(svg, xb, y0, 16, 8, cell, lambda k, n: str(b_owner(k, n)[0]), lambda k, n: COLORS[4 + b_owner(k, n)[1]],
         "B (16 × 8): lane", "n", "k")
    grid(svg, xc, y0, 16, 8, cell, lambda m, n: str(c_owner(m, n)[0]), lambda m, n: COLORS[c_owner(m, n)[1]],
         "C, D (16 × 8 fp32): lane", "n", "m")
    yl = y0 + 16 * cell + 34
    legend(svg, xa, yl, [(COLORS[0], "a[0]: A[g][2t], A[g][2t+1]"), (COLORS[1], "a[1]: A[g+8][2t], A[g+8][2t+1]"),
                         (COLORS[2], "a[2]: A[g][2t+8], A[g][2t+9]"), (COLORS[3], "a[3]: A[g+8][2t+8], A[g+8][2t+9]")])
    legend(svg, xb, yl, [(COLORS[4], "b[0]: B[2t][g], B[2t+1][g]"), (COLORS[5], "b[1]: B[2t+8][g], B[2t+9][g]")])
    legend(svg, xc, yl, [(COLORS[0], "d[0]: D[g][2t]"), (COLORS[1], "d[1]: D[g][2t+1]"),
                         (COLORS[2], "d[2]: D[g+8][2t]"), (COLORS[3], "d[3]: D[g+8][2t+1]")])
    svg.text(xa, yl + 70, "Each 32-bit register of A and B holds two bf16 neighbours along k. "
             "Source: PTX ISA, Matrix Fragments for mma.m16n8k16 with floating point type.", size=8, anchor="start")
    return svg.save("mma_m16n8k16_fragments.svg")


# ------------------------------------------------------------------ 2. ldmatrix's lanes
def ldmatrix_lanes():
    ch, rh = 190, 17                      # one 16-byte row segment (8 bf16) drawn ch × rh
    svg = Svg(2 * 2 * ch + 220, 16 * rh + 150)
    svg.text(svg.w / 2, 14, "ldmatrix.x4: lane l gives the address of row l % 8 of matrix l / 8 "
             "(one 16-byte row each)", size=11, bold=True)
    panels = ((40, "A tile (rows m, 16 bf16 of k)", False), (40 + 2 * ch + 120, "B tile, .trans (rows k, 16 bf16 of n)", True))
    quad = {(0, 0): 0, (1, 0): 1, (0, 1): 2, (1, 1): 3}      # (row half, column half) -> matrix, A
    for x0, title, is_b in panels:
        y0 = 62
        svg.text(x0 + ch, y0 - 30, title, size=10, bold=True)
        heads = ("n 0-7 (n8 tile 2jj)", "n 8-15 (tile 2jj+1)") if is_b else ("k 0-7", "k 8-15")
        for h in range(2):
            svg.text(x0 + (h + 0.5) * ch, y0 - 10, heads[h], size=8)
        for r in range(16):
            svg.text(x0 - 10, y0 + (r + 0.5) * rh, str(r), size=7)
            for h in range(2):
                j = (2 * h + r // 8) if is_b else quad[(r // 8, h)]   # the matrix this 16-byte row belongs to
                svg.rect(x0 + h * ch, y0 + r * rh, ch, rh, COLORS[j])
                if r % 8 == 0:                                         # the block's first row names it
                    name = f"n8 tile {'2jj' if j < 2 else '2jj+1'}: b[{j % 2}]" if is_b else f"a[{j}]"
                    svg.text(x0 + (h + 0.5) * ch, y0 + (r + 0.5) * rh, f"lane {8 * j} · matrix {j} → {name}",
                             size=7.5, bold=True)
                else:
                    svg.text(x0 + (h + 0.5) * ch, y0 + (r + 0.5) * rh, f"lane {8 * j + r % 8}", size=8)
        for j in range(4):                                             # a frame around each 8 × 8 matrix
            svg.rect(x0 + (j // 2) * ch, y0 + (j % 2) * 8 * rh, ch, 8 * rh, "none", stroke="#000000", sw=1.5)
        svg.text(x0 - 26, y0 + 8 * rh, "k" if is_b else "m", size=8)
    y = 62 + 16 * rh + 40
    svg.text(40, y, "Lane l receives, of every matrix j, row l / 4, columns 2·(l % 4) and 2·(l % 4)+1 "
             "(.trans: of the transposed matrix) in its register j.", size=8, anchor="start")
    svg.text(40, y + 16, "For A that is the mma's a[0..3]; for B, stored (k, n) with n contiguous, the transpose "
             "gives b[0], b[1] of two n8 tiles.", size=8, anchor="start")
    svg.text(40, y + 32, "Source: PTX ISA, Warp-level matrix load instruction: ldmatrix.", size=8, anchor="start")
    return svg.save("ldmatrix_x4_lanes.svg")


# ------------------------------------------------------------------ 3. the swizzle
def swizzle():
    cell = 40
    svg = Svg(4 * cell * 2 + 8 * cell + 260, 8 * cell + 130)
    svg.text(svg.w / 2, 14, "Swizzle: the 8 rows one ldmatrix matrix reads (framed), and the bank group g "
             "(16 bytes of the 128-byte line) of each chunk", size=11, bold=True)
    frame = [(r, 0) for r in range(8)]

    def lab(bytes_per_row, f):
        return lambda r, c: f"c{c}\ng{bank_group(bytes_per_row * r + 16 * f(r, c))}"

    def col(bytes_per_row, f):
        return lambda r, c: COLORS[bank_group(bytes_per_row * r + 16 * f(r, c))]

    x, y0 = 50, 80
    for f, title in ((lambda r, c: c, "A, plain (64-byte rows)"), (swz_a, "A, chunk c ^ ((r / 2) % 4)")):
        n = len({bank_group(64 * r + 16 * f(r, 0)) for r in range(8)})
        grid(svg, x, y0, 8, 4, cell, lab(64, f), col(64, f), title, f"chunk c (8 bf16 of k); framed: {n} groups",
             "row", size=9, frame=frame)
        x += 4 * cell + 60
    n = len({bank_group(256 * r + 16 * swz_b(r, 0)) for r in range(8)})
    grid(svg, x, y0, 8, 8, cell, lab(256, swz_b), col(256, swz_b), "B, chunk c ^ (r % 8) (256-byte rows, first 8 chunks)",
         f"chunk c (8 bf16 of n); framed: {n} groups (plain: 1)", "row", size=9, frame=frame)
    svg.text(50, y0 + 8 * cell + 38, "Banks: 32 × 4 bytes, so a 16-byte chunk at byte address a sits in group "
             "(a / 16) % 8. cp.async writes and ldmatrix reads through the same swizzle.", size=8, anchor="start")
    return svg.save("smem_swizzle.svg")


# ------------------------------------------------------------------ 4. the cp.async ring
def ring(stages=4, tiles=8):
    cw, rh, x0, y0 = 92, 30, 110, 60
    svg = Svg(x0 + (tiles + 1) * cw + 20, y0 + stages * rh + 80)
    svg.text(svg.w / 2, 14, f"The cp.async ring, STAGES = {stages}: tile kt is multiplied while tiles kt+1 … "
             f"kt+{stages - 1} are in flight", size=11, bold=True)
    xs = lambda t: x0 + (t + 1) * cw      # noqa: E731  column of iteration t (t = -1: the prologue)
    svg.text(xs(-1) + cw / 2, y0 - 12, "prologue", size=8)
    for t in range(tiles):
        svg.text(xs(t) + cw / 2, y0 - 12, f"kt = {t}", size=8)
        svg.line(xs(t), y0 - 4, xs(t), y0 + stages * rh + 4)
    for s in range(stages):
        svg.text(x0 - 8, y0 + (s + 0.5) * rh, f"stage {s}", size=8, anchor="end")

    def load(tile, start):                # in flight from its issue until the iteration that multiplies it
        s = tile % stages
        svg.rect(xs(start) + 3, y0 + s * rh + 3, (tile - start) * cw - 6, rh - 6, COLORS[4], stroke="none", opacity=0.55)
        svg.text(xs(start) + 6, y0 + (s + 0.5) * rh, f"load {tile} (cp.async)", size=8, anchor="start")

    for tile in range(stages - 1):
        load(tile, -1)
    for t in range(tiles):
        s = t % stages
        svg.rect(xs(t) + 3, y0 + s * rh + 3, cw - 6, rh - 6, COLORS[3], stroke="none")
        svg.text(xs(t) + cw / 2, y0 + (s + 0.5) * rh, f"mma {t}", size=8, bold=True)
        if t + stages - 1 < tiles:
            load(t + stages - 1, t)
    y = y0 + stages * rh + 22
    svg.text(x0, y, f"Dotted lines: cp.async.wait_group {stages - 2} (this thread's tile kt has landed) + "
             "__syncthreads (everyone's has, and every warp is done with tile kt−1).", size=8, anchor="start")
    svg.text(x0, y + 16, "The refill issued at kt (tile kt+3) goes into the stage tile kt−1 was read from: "
             "the barrier just proved it free.", size=8, anchor="start")
    return svg.save("cp_async_ring.svg")


def main(argv: list[str]) -> int:
    global OUT
    if "--out" in argv:
        OUT = Path(argv[argv.index("--out") + 1])
    check_maps()
    # the swizzle does what the lesson says: one ldmatrix matrix's 8 rows fall in 2 bank groups (A)
    # or 1 (B) when plain, in 8 when swizzled
    assert all(len({bank_group(64 * r + 16 * c) for r in range(8)}) == 2 for c in range(4))
    assert all(len({bank_group(256 * r + 16 * c) for r in range(8)}) == 1 for c in range(16))
    assert all(len({bank_group(64 * r + 16 * swz_a(r, c)) for r in range(8)}) == 8 for c in range(4))
    assert all(len({bank_group(256 * r + 16 * swz_b(r, c)) for r in range(8)}) == 8 for c in range(16))
    for path in (fragment_map(), ldmatrix_lanes(), swizzle(), ring()):
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
