"""plot: the pictures that close a lesson.

roofline      where each measurement sits under the memory and compute ceilings
perf_vs_size  GB/s (or TFLOP/s) against problem size for several versions and the peer
ladder        every version as a fraction of its peer, one bar each
chapter_ladder  a whole chapter's versions from one measurement run (results/<chapter>/*.json)
class_speeds  a class's measured fractions of the peer for one speed problem (the class report)
class_points  each student's points for an assignment (the class report)

Each returns a matplotlib Figure made without pyplot, so a notebook shows it exactly once: as
the cell's result when the call is the cell's last line (pyplot would draw it a second time).
Tests and scripts save it with ``fig.savefig``.
"""
from __future__ import annotations

import math
import sys

import numpy as np


def show_figures_as_png(shell) -> None:
    """Make an IPython ``shell`` show a matplotlib Figure as a PNG. IPython learns that only when
    pyplot is imported (the inline backend registers it then); these figures bypass pyplot, so
    without this a lesson's picture would print as the text "<Figure size … with 1 Axes>"."""
    from IPython.core.pylabtools import print_figure

    shell.display_formatter.formatters["image/png"].for_type_by_name(
        "matplotlib.figure", "Figure", lambda fig: print_figure(fig, "png", bbox_inches="tight"))


if "IPython" in sys.modules:                  # in a notebook's kernel: from the first `import grader` on
    _shell = sys.modules["IPython"].get_ipython()
    if _shell is not None:
        show_figures_as_png(_shell)


def subplots(nrows: int = 1, ncols: int = 1, **kw):
    """(Figure, axes) like pyplot.subplots, but the figure belongs to no pyplot state."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=kw.pop("figsize", None))
    return fig, fig.subplots(nrows, ncols, **kw)


def _cmap(name: str):
    import matplotlib

    return matplotlib.colormaps[name]


def roofline(points: list, mem_GBps: float, peak_TFLOPs: float, title: str = "Roofline", ax=None):
    """points: (label, FLOP per byte, achieved GFLOP/s). Ceilings from measured or published figures."""
    fig, ax = (ax.figure, ax) if ax is not None else subplots(figsize=(6.5, 4.2))
    ridge = peak_TFLOPs * 1e3 / mem_GBps
    xs = np.logspace(-3, 3, 200)
    ax.loglog(xs, np.minimum(xs * mem_GBps, peak_TFLOPs * 1e3), "k-", lw=1.5)
    ax.axvline(ridge, color="0.7", ls=":", lw=1)
    ax.text(ridge, peak_TFLOPs * 1e3 * 1.15, f"ridge {ridge:.0f} FLOP/B", ha="center", fontsize=8, color="0.4")
    ax.text(xs[8], xs[8] * mem_GBps * 1.3, f"{mem_GBps:,.0f} GB/s", rotation=33, fontsize=8, color="0.3")
    for label, intensity, gflops in points:
        ax.plot([intensity], [gflops], "o", ms=7)
        ax.annotate(label, (intensity, gflops), textcoords="offset points", xytext=(6, -10), fontsize=8)
    ax.set_xlabel("arithmetic intensity (FLOP / byte moved)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.25)
    fig.tight_layout()
    return fig


def perf_vs_size(series: dict, unit: str = "GB/s", ceiling: float | None = None,
                 ceiling_label: str = "copy bandwidth", title: str = "", ax=None,
                 xlabel: str = "problem size (elements)"):
    """series: label -> list of (x, value), x a size by default. A dashed line marks the peer's ceiling."""
    fig, ax = (ax.figure, ax) if ax is not None else subplots(figsize=(6.5, 4.2))
    for label, pts in series.items():
        pts = sorted(p for p in pts if p[1] == p[1] and p[1] is not None)   # unmeasured points (NaN) left out
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
    if ceiling:
        ax.axhline(ceiling, color="k", ls="--", lw=1, label=f"{ceiling_label} ({ceiling:,.0f} {unit})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(unit)
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.25)
    fig.tight_layout()
    return fig


def ladder(rows: list, title: str = "% of the peer", target: float | None = None, ax=None,
           clip: float | None = None):
    """rows: (label, fraction of peer). A vertical line marks the target; its legend sits below the
    axes (or beside them, on an axes the caller made), never over a bar. ``clip`` (a %): bars past it
    are cut there and marked "›", their label still the true figure (one 1269% bar would flatten
    every other)."""
    own = ax is None
    fig, ax = (ax.figure, ax) if ax is not None else subplots(figsize=(6.5, 1.6 + 0.45 * len(rows)))
    labels = [r[0] for r in rows]
    vals = [100 * r[1] if r[1] is not None and math.isfinite(r[1]) else 0 for r in rows]
    shown = [min(v, clip) if clip else v for v in vals]
    ax.barh(labels, shown, color="tab:blue")
    for y, (v, w) in enumerate(zip(vals, shown)):
        ax.text(w + 1, y, f"{v:.0f}%" + (" ›" if w < v else ""), va="center", fontsize=8)
    if target:
        ax.axvline(100 * target, color="tab:red", ls="--", lw=1, label=f"target {100 * target:.0f}%")
    ax.invert_yaxis()
    ax.set_xlim(0, max(110, 1.18 * max(shown, default=0) + 10))
    ax.set_xlabel("% of peer (same GPU, same run)")
    ax.set_title(title)
    if target and own:
        # The legend goes in a strip under the axes, never inside them: inside, "lower right"
        # sat on the tallest bar whenever that bar was the last row (a library peer at 188%).
        strip = 0.32 / fig.get_figheight()                  # ~0.3 inch, whatever the number of rows
        fig.legend(loc="lower center", fontsize=8, frameon=False)
        fig.tight_layout(rect=(0, strip, 1, 1))
    else:
        if target:                                          # an axes of someone else's figure: beside it
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        fig.tight_layout()
    return fig


def chapter_ladder(report, title: str | None = None):
    """One panel per problem size: every version of a chapter as a % of its own peer (cuBLAS fp32
    for CUDA-core kernels, cuBLAS bf16 for tensor-core ones), all from one run.

    report: {"device", "date", "rows": [{"size", "label", "fraction", "peer", "goal"}, ...]} as
    dev/ch03_gemm/measure.py writes it, or the path of such a JSON file (relative: to the checkout). Graded versions show their goal as a red tick."""
    if not isinstance(report, dict):      # a path, relative to the course checkout
        import json
        from pathlib import Path

        from .paths import PACKAGE

        path = Path(report) if Path(report).is_absolute() else PACKAGE.parent / report   # results/ is beside the package
        report = json.loads(path.read_text())
        print(f"Recorded on {report['device']} ({report['date']}), every version in one run "
              f"(re-measure on your GPU: python dev/ch03_gemm/measure.py).")
    sizes = list(dict.fromkeys(r["size"] for r in report["rows"]))
    labels = list(dict.fromkeys(r["label"] for r in report["rows"]))
    fig, axes = subplots(1, len(sizes), sharey=True, squeeze=False,
                             figsize=(4.2 * len(sizes) + 2.5, 1.4 + 0.38 * len(labels)))
    for ax, size in zip(axes[0], sizes):
        by_label = {r["label"]: r for r in report["rows"] if r["size"] == size}
        for y, label in enumerate(labels):
            r = by_label.get(label)
            if r is None:
                continue
            v = 100 * r["fraction"] if r["fraction"] is not None and math.isfinite(r["fraction"]) else 0
            colour = "tab:orange" if "bf16" in r["peer"] or "fp16" in r["peer"] else "tab:blue"
            ax.barh(y, v, color=colour)
            ax.text(v + 1, y, f"{v:.0f}%", va="center", fontsize=8)
            if r.get("goal"):
                ax.plot([100 * r["goal"]] * 2, [y - 0.4, y + 0.4], color="tab:red", lw=2)
        ax.set_yticks(range(len(labels)), labels)
        ax.set_xlim(0, 110)
        ax.set_title(size, fontsize=10)
        ax.set_xlabel("% of cuBLAS (same run)")
    axes[0][0].invert_yaxis()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    handles = [Rectangle((0, 0), 1, 1, color=c) for c in ("tab:blue", "tab:orange")]
    handles.append(Line2D([0], [0], color="tab:red", lw=2))
    fig.legend(handles, ["vs cuBLAS fp32 (TF32 off)", "vs cuBLAS bf16", "goal (graded version)"],
               loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(title or f"The chapter's ladder: {report['device']}, {report['date']}", fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def grid_diagram(n: int, threads_per_block: int, blocks: int | None = None, title: str | None = None):
    """Which thread handles which element: blocks of threads laid over an array of n elements.

    Threads whose global index is ≥ n are drawn hatched: they exist (the grid is
    rounded up to whole blocks) and must do nothing, which is what the bounds
    guard ``if i < n`` is for.
    """
    from matplotlib.patches import Rectangle

    blocks = blocks if blocks is not None else -(-n // threads_per_block)
    total = blocks * threads_per_block
    fig, ax = subplots(figsize=(min(12, 0.42 * total + 1.5), 2.3))
    colors = _cmap("tab10")
    for i in range(total):
        b, t = divmod(i, threads_per_block)
        idle = i >= n
        ax.add_patch(Rectangle((i, 1), 0.95, 0.9, facecolor="white" if idle else colors(b % 10),
                               alpha=0.85, hatch="///" if idle else None, edgecolor="0.3"))
        ax.text(i + 0.47, 1.45, str(t), ha="center", va="center", fontsize=7)
        if i < n:
            ax.add_patch(Rectangle((i, 0), 0.95, 0.9, facecolor="0.92", edgecolor="0.5"))
            ax.text(i + 0.47, 0.45, str(i), ha="center", va="center", fontsize=7)
    for b in range(blocks):
        ax.text(b * threads_per_block + threads_per_block / 2, 2.15, f"block {b}", ha="center", fontsize=8)
    ax.text(-0.3, 1.45, "threadIdx.x", ha="right", va="center", fontsize=8)
    ax.text(-0.3, 0.45, "element i", ha="right", va="center", fontsize=8)
    ax.set_xlim(-4, total + 0.5)
    ax.set_ylim(-0.2, 2.5)
    ax.axis("off")
    ax.set_title(title or f"n = {n}, {threads_per_block} threads per block → {blocks} blocks, "
                 f"{total - n} idle threads (hatched)", fontsize=9)
    fig.tight_layout()
    return fig


def warp_sectors(patterns: dict, sector_bytes: int = 32, word_bytes: int = 4, title: str | None = None):
    """What one warp-wide load fetches from memory, for several access patterns.

    patterns: label -> byte addresses touched by the 32 threads of a warp in one instruction.
    Memory moves in sectors of ``sector_bytes``. Each sector the warp touches is drawn as a
    row of words, the words a thread asked for shaded: a coalesced pattern fills a few sectors,
    a strided one fetches a whole sector per thread and uses one word of it.
    """
    from matplotlib.patches import Rectangle

    words = sector_bytes // word_bytes
    rows = []
    for label, addrs in patterns.items():
        addrs = np.asarray(addrs, dtype=np.int64)
        sectors = np.unique(addrs // sector_bytes)
        rows.append((label, addrs, sectors))
    most = max(len(s) for _, _, s in rows)
    fig, axes = subplots(len(rows), 1, figsize=(min(13, 1.5 + 0.36 * most * words / 8 * 2), 1.25 * len(rows) + 0.4))
    axes = np.atleast_1d(axes)
    cmap = _cmap("viridis")
    for ax, (label, addrs, sectors) in zip(axes, rows):
        where = {int(s): k for k, s in enumerate(sectors)}
        for k in range(len(sectors)):
            ax.add_patch(Rectangle((k * (words + 1), 0), words, 1, facecolor="white", edgecolor="0.4"))
        for t, a in enumerate(addrs):
            k = where[int(a // sector_bytes)]
            w = int(a % sector_bytes) // word_bytes
            ax.add_patch(Rectangle((k * (words + 1) + w, 0), 1, 1, facecolor=cmap(t / max(1, len(addrs) - 1)),
                                   edgecolor="0.4", lw=0.3))
        used = len(np.unique(addrs // word_bytes)) * word_bytes
        fetched = len(sectors) * sector_bytes
        ax.set_title(f"{label}: {len(sectors)} sectors = {fetched} B fetched for {used} B used "
                     f"({100 * used / fetched:.0f}%)", fontsize=9, loc="left")
        ax.set_xlim(-0.5, most * (words + 1))
        ax.set_ylim(-0.2, 1.2)
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


POINT_COLOURS = {"full": "tab:green", "partial": "tab:orange", "none": "tab:red"}


def _earned(points, max_points) -> str:
    if not max_points or points is None:
        return "none"
    return "full" if points >= max_points - 1e-9 else ("partial" if points > 0 else "none")


def class_speeds(rows: list, *, title: str, xlabel: str = "% of the peer (same GPU, same task)",
                 target: float | None = None, floor: float | None = None, reference: tuple | None = None,
                 note: str = "", histogram_over: int = 40):
    """rows: (student, fraction of peer, points, max points, device). One dot per student, best on
    top, coloured by the points it earned (a histogram past ``histogram_over`` students); labelled
    vertical lines mark the target (full points), the floor (no points) and ``reference``
    (fraction, label): the reference solution's own fraction. ``note`` is written under the axes."""
    from matplotlib.lines import Line2D

    rows = sorted(rows, key=lambda r: -(r[1] or 0.0))
    devices = sorted({r[4] or "?" for r in rows})
    markers = dict(zip(devices, "osD^v<>p*h"))
    vals = [100 * (r[1] or 0.0) for r in rows]
    big = len(rows) > histogram_over
    height = 2.4 + (0.9 if big else 0.32 * len(rows)) + (0.3 if note else 0)
    fig, ax = subplots(figsize=(7.5, height))
    handles = []
    if big:
        edges = np.arange(0, max(vals + [100]) + 10, 5)
        ax.hist(vals, bins=edges, color="tab:blue", alpha=0.8)
        ax.set_ylabel("students")
    else:
        for y, (r, v) in enumerate(zip(rows, vals)):
            ax.plot([v], [y], markers[r[4] or "?"], ms=8, color=POINT_COLOURS[_earned(r[2], r[3])], zorder=3)
            ax.text(v + 1.5, y, f"{v:.1f}%  ({r[2]:g}/{r[3]:g} pt)", va="center", fontsize=8,
                    bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=1), zorder=4)
        ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        handles += [Line2D([0], [0], marker="o", ls="", color=c, label=f"{'no' if k == 'none' else k} points")
                    for k, c in POINT_COLOURS.items()]
        if len(devices) > 1:
            handles += [Line2D([0], [0], marker=markers[d], ls="", color="0.4", label=d) for d in devices]
    marks = []
    if target is not None:
        marks.append((100 * target, "tab:red", "--", f"target {100 * target:.0f}% (full points)"))
    if floor is not None:
        marks.append((100 * floor, "0.45", ":", f"floor {100 * floor:.0f}% (no points)"))
    if reference is not None:
        marks.append((100 * reference[0], "tab:blue", "-", reference[1]))
    for x, colour, style, label in marks:
        ax.axvline(x, color=colour, ls=style, lw=1.4, zorder=2)
        handles.append(Line2D([0], [0], color=colour, ls=style, lw=1.4, label=label))
    ax.set_xlim(0, max([110] + [v + 25 for v in vals] + [m[0] + 10 for m in marks]))
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", alpha=0.25)
    ax.legend(handles=handles, fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.2 if not big else -0.28),
              ncol=2, frameon=False)
    if note:
        fig.text(0.01, 0.01, note, fontsize=7.5, color="0.3")
    fig.tight_layout(rect=(0, 0.04 if note else 0, 1, 1))
    return fig


def class_points(rows: list, title: str = "Points per student"):
    """rows: (student, points, max points). One bar per student, in the order given."""
    fig, ax = subplots(figsize=(7.5, 1.4 + 0.3 * len(rows)))
    for y, (name, points, maxi) in enumerate(rows):
        ax.barh(y, points, color=POINT_COLOURS[_earned(points, maxi)])
        ax.text(points + 0.1, y, f"{points:g} / {maxi:g}", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, max([r[2] for r in rows] + [1]) * 1.2)
    ax.set_xlabel("points (the gradebook's)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", alpha=0.25)
    fig.tight_layout()
    return fig
