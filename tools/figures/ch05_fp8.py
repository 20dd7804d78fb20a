"""Figures of lesson 05.06 (FP8 GEMM with block scaling), drawn from the kernel's configuration.

    .venv/bin/python tools/figures/ch05_fp8.py      # writes solutions/05_hopper_blackwell/figures/fp8_*.svg

* ``fp8_ring_slot.svg`` — one slot of the producer/consumer ring of ``fp8_gemm<Fp8<128, 192, 4, 1, 8>>``: A's
  and B's e4m3 tiles for one 128-wide k block, the k block's scales that travel with them (sa's 128 row scales,
  an 8-float box of sb), and the slot's two mbarriers (``full``: one producer arrival plus the bytes of four TMA
  loads; ``empty``: one arrival per consumer warpgroup).
* ``fp8_promotion.svg`` — what a consumer warpgroup does with one k block: four ``wgmma m64n192k32`` into a fresh
  fp32 partial, ``wgmma.wait_group 0``, then each element times its row's A scale and its column block's B scale,
  added into the fp32 accumulator (the promotion).

The sizes are the lesson's (the numbers printed on the boxes are computed here from BM, BN, BK, SB_BOX, not typed).
Run again after changing the configuration; commit the SVGs (nbgrader's release copies figures/ to course/).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "solutions" / "05_hopper_blackwell" / "figures"

# the lesson's configuration: Fp8<128, 192, 4, 1, 8>
BM, BN, BK, STAGES, SB_BOX = 128, 192, 128, 4, 8
A_BYTES, B_BYTES = BM * BK, BN * BK                   # e4m3: one byte an element
SCALE_BYTES = BM * 4 + SB_BOX * 4                     # fp32 scales of one k block
CONSUMERS = BM // 64

BLUE, ORANGE, GREEN, GREY, RED = "#4c72b0", "#dd8452", "#55a868", "#8c8c8c", "#c44e52"

plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "ch05-fp8", "font.size": 9,
                     "font.family": "DejaVu Sans"})


def box(ax, x, y, w, h, text, color, fc_alpha=0.18, fontsize=9, weight="normal"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                ec=color, fc=matplotlib.colors.to_rgba(color, fc_alpha), lw=1.4))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, weight=weight)


def arrow(ax, a, b, text="", color="black", rad=0.0, offset=(0, 0.12), fontsize=8, ha="center"):
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=12, color=color, lw=1.2,
                                 connectionstyle=f"arc3,rad={rad}"))
    if text:
        ax.text((a[0] + b[0]) / 2 + offset[0], (a[1] + b[1]) / 2 + offset[1], text, ha=ha, va="bottom",
                fontsize=fontsize, color=color)


def kib(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} B"


def ring_slot(path: Path) -> None:
    fig, ax = plt.subplots(figsize=(9.6, 4.6))
    ax.set_xlim(0, 12); ax.set_ylim(0, 6.2); ax.axis("off")
    ax.text(6, 5.95, f"ring slot s (one of {STAGES}): everything one 128-wide k block kb of the tile needs",
            ha="center", fontsize=10.5, weight="bold")
    # the slot
    ax.add_patch(FancyBboxPatch((3.0, 0.55), 5.6, 4.95, boxstyle="round,pad=0.03,rounding_size=0.12",
                                ec=GREY, fc="none", lw=1.2, ls="--"))
    ax.text(5.8, 5.22, "shared memory, slot s", ha="center", color=GREY, fontsize=8.5)
    box(ax, 3.25, 3.55, 2.5, 1.45,
        f"A tile\n{BM} rows × {BK} e4m3\n(K-major, 128B swizzle)\n{kib(A_BYTES)}", BLUE)
    box(ax, 5.95, 3.55, 2.45, 1.45,
        f"B tile\n{BN} rows of B (N, K)\n× {BK} e4m3, K-major\n{kib(B_BYTES)}", BLUE)
    box(ax, 3.25, 2.05, 2.5, 1.25,
        f"sa_s[s]: {BM} fp32\nA's scale of each tile\nrow, block kb ({BM * 4} B)", ORANGE)
    box(ax, 5.95, 2.05, 2.45, 1.25,
        f"sb_s[s]: {SB_BOX} fp32\nB's scales of column\nblocks (n0/128)&~3 … +{SB_BOX - 1}", ORANGE)
    box(ax, 3.25, 0.75, 2.5, 1.05, "full[s]  mbarrier\n1 arrival + "
        f"{A_BYTES + B_BYTES + SCALE_BYTES:,} bytes", GREEN, fontsize=8.5)
    box(ax, 5.95, 0.75, 2.45, 1.05, f"empty[s]  mbarrier\n{CONSUMERS} arrivals (one per\nconsumer warpgroup)",
        RED, fontsize=8.5)
    # the producer
    box(ax, 0.15, 2.6, 2.2, 1.6, "producer\n(1 thread)\nwait empty[s],\narrive.expect_tx,\n4 TMA loads", GREY,
        fontsize=8.5)
    arrow(ax, (2.35, 3.9), (3.2, 4.2), "TMA", color=BLUE, offset=(-0.05, 0.02))
    arrow(ax, (2.35, 3.2), (3.2, 2.7), "TMA", color=ORANGE, offset=(-0.05, -0.3))
    arrow(ax, (2.35, 2.7), (3.2, 1.3), "bytes land:\ncomplete_tx", color=GREEN, offset=(-0.45, -0.55), fontsize=7.5)
    # the consumers
    box(ax, 9.15, 2.45, 2.7, 1.95, f"{CONSUMERS} consumer warpgroups\n(64 rows each)\nwait full[s];\nwgmma reads A, B;\n"
        "LDS reads the scales;\narrive on empty[s]", GREY, fontsize=8.5)
    arrow(ax, (8.45, 4.25), (9.1, 3.95), "wgmma", color=BLUE, offset=(0.05, 0.2))
    arrow(ax, (8.45, 2.65), (9.1, 2.95), "LDS", color=ORANGE, offset=(0.1, -0.55))
    arrow(ax, (9.1, 2.55), (8.45, 1.25), "release", color=RED, offset=(0.35, -0.25))
    ax.text(6.0, 0.18, "The scales ride in the slot with their tile and are counted on the same full barrier: "
            "no global load on the consumers' path.", ha="center", fontsize=8.5, style="italic")
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def promotion(path: Path) -> None:
    fig, ax = plt.subplots(figsize=(10.2, 2.9))
    ax.set_xlim(0, 13.2); ax.set_ylim(0.55, 4.6); ax.axis("off")
    ax.text(6.6, 4.35, "one consumer warpgroup, one k block kb (repeated K/128 times per tile)", ha="center",
            fontsize=10.5, weight="bold")
    box(ax, 0.1, 1.7, 2.3, 1.6, f"slot s:\nA rows (64 × {BK})\nB tile ({BN} × {BK})\ne4m3", BLUE, fontsize=8.5)
    box(ax, 3.0, 1.7, 2.45, 1.6, f"{BK // 32} × wgmma\nm64n{BN}k32 e4m3\n(scale-d 0, then 1)\ncommit; wait_group 0",
        BLUE, fontsize=8.5)
    box(ax, 6.05, 1.7, 2.2, 1.6, f"part: fp32\n64 × {BN} partial\n({BN // 2} registers a\nthread): ≤ {BK} products",
        BLUE, fontsize=8.5)
    box(ax, 8.75, 1.7, 2.0, 1.6, "× sa[kb, row]\n× sb[kb, n / 128]\n(one scale product\nper row, 64-col chunk)",
        ORANGE, fontsize=8.5)
    box(ax, 11.45, 1.7, 1.7, 1.6, f"acc += …\nfp32, 64 × {BN}\n({BN // 2} registers\na thread)", GREEN,
        fontsize=8.5)
    arrow(ax, (2.4, 2.5), (2.95, 2.5))
    arrow(ax, (5.45, 2.5), (6.0, 2.5))
    arrow(ax, (8.25, 2.5), (8.7, 2.5))
    arrow(ax, (10.8, 2.5), (11.4, 2.5))
    ax.text(11.1, 2.75, "FFMA", ha="center", va="bottom", fontsize=8, color=GREEN)
    ax.text(4.2, 1.25, "tensor core: accumulates in\nits own (not full fp32) sum", ha="center", va="top", fontsize=7.5,
            color=BLUE)
    ax.text(9.75, 1.25, f"{BN // 2} FMAs a thread per k block:\nthe promotion", ha="center", va="top", fontsize=7.5,
            color=ORANGE)
    ax.text(12.3, 1.25, "after the last k block:\nbf16 → TMA store of C", ha="center", va="top", fontsize=7.5,
            color=GREEN)
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, draw in (("fp8_ring_slot.svg", ring_slot), ("fp8_promotion.svg", promotion)):
        draw(OUT / name)
        print(OUT / name, (OUT / name).stat().st_size, "bytes")


if __name__ == "__main__":
    main()
