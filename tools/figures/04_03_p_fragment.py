"""04.03's picture of why P never leaves registers: one lane's part of the S accumulator (two n8 tiles of
an m16n8k16 mma) sits exactly where the A fragment of the next mma (P·V, one k16 step) wants it.

Layouts from the PTX ISA ("Matrix Fragments for mma.m16n8k16 with floating point type"): with
g = lane / 4 and t = lane % 4, accumulator c0, c1 are row g, columns 2t, 2t + 1 of the n8 tile and c2, c3
row g + 8; the bf16 A fragment's registers hold (a0, a1) row g, (a2, a3) row g + 8, columns 2t, 2t + 1,
and (a4, a5), (a6, a7) the same rows at columns 2t + 8, 2t + 9.

    python tools/figures/04_03_p_fragment.py      # writes solutions/04_attention/figures/fa2_p_fragment.svg
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

OUT = Path(__file__).resolve().parents[2] / "solutions" / "04_attention" / "figures" / "fa2_p_fragment.svg"
LANE = 5
G, T = LANE // 4, LANE % 4
COLOURS = ["tab:blue", "tab:orange", "tab:green", "tab:red"]


def cells():
    """(register index, row, column) of the lane's 8 values in the 16 x 16 block of one k16 step."""
    out = []
    for reg in range(4):                        # pa[i][kk][reg] = pack_bf16 of two accumulator values
        tile, half = reg // 2, reg % 2          # n8 tile 2kk + tile; hh = half (row g or g + 8)
        row = G + 8 * half
        for e in range(2):
            out.append((reg, row, 8 * tile + 2 * T + e))
    return out


def panel(ax, x0, title, label, rows=True):
    for k in range(17):                                     # the 16 x 16 grid as lines (a small SVG)
        ax.plot([x0, x0 + 16], [k, k], color="0.85", lw=0.5)
        ax.plot([x0 + k, x0 + k], [0, 16], color="0.85", lw=0.5)
    ax.plot([x0 + 8, x0 + 8], [0, 16], color="0.3", lw=1.2)
    for reg, r, c in cells():
        ax.add_patch(Rectangle((x0 + c, 15 - r), 1, 1, facecolor=COLOURS[reg], alpha=0.8, edgecolor="0.2", lw=0.6))
    for reg in range(4):
        _, r, c = [x for x in cells() if x[0] == reg][0]
        ax.text(x0 + c + 1, 15 - r + 1.25, label(reg), fontsize=6.5, va="bottom", ha="center", color=COLOURS[reg])
    ax.text(x0 + 8, 17.4, title, ha="center", fontsize=8.5)
    if rows:
        ax.text(x0 - 0.4, 15.5 - G, f"row g = {G}", ha="right", va="center", fontsize=6.5)
        ax.text(x0 - 0.4, 7.5 - G, f"row g + 8 = {G + 8}", ha="right", va="center", fontsize=6.5)


def draw() -> Figure:
    fig = Figure(figsize=(9.2, 3.6))
    ax = fig.subplots()
    panel(ax, 0, "S = Q·Kᵀ accumulators, fp32:\nn8 tiles 2kk | 2kk + 1 (keys 16kk … 16kk + 15)",
          lambda reg: f"s[{'2kk' if reg < 2 else '2kk+1'}][{2 * (reg % 2)},{2 * (reg % 2) + 1}]")
    panel(ax, 27, "A fragment of P·V, key step kk, bf16x2 registers:\ncolumns 0-7 | 8-15 of the k16 step",
          lambda reg: f"pa[kk][{reg}]", rows=False)
    ax.add_patch(FancyArrowPatch((17, 8), (26.5, 8), arrowstyle="->", mutation_scale=12, lw=1.2))
    ax.text(21.75, 8.6, "p = ex2(…)\npack_bf16(p0, p1)", ha="center", va="bottom", fontsize=7.5)
    ax.text(21.75, 7.4, "same rows, same\ncolumns: no shuffle,\nno shared memory", ha="center", va="top",
            fontsize=7, color="0.3")
    ax.text(21.5, -1.6, f"lane {LANE} (g = {G}, t = {T}) shown; every lane holds rows g, g + 8 and columns 2t, 2t + 1 "
            "of each n8 tile (PTX ISA, m16n8k16 fragments)", ha="center", fontsize=7)
    ax.set_xlim(-5, 44)
    ax.set_ylim(-2.5, 19)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "fa2"}):   # text as text; stable ids
        draw().savefig(OUT, format="svg", metadata={"Date": None})
    print(OUT, OUT.stat().st_size, "bytes")
