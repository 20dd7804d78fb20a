"""Pictures of a simulated run's memory accesses (grader.sim.trace.Trace.plot_writes / plot_counts).

The functions take the Trace itself and import nothing of grader.sim.trace."""
from __future__ import annotations

from collections import Counter

import numpy as np



def plot_writes(trace, name, color_by="thread", block=(0, 0, 0), ax=None, annotate=None):
    """Grid of an array's elements coloured by the thread (or block) that wrote it.

    Grey: never written.  Red frame and "xN": written by N threads.  For a
    shared array, shows the copy of ``block``.  1-D arrays are drawn in
    rows of 32; annotate (default: 256 elements or fewer) writes each
    element's index and writer.  Returns the matplotlib Figure.
    """
    from matplotlib.colors import BoundaryNorm
    from matplotlib.patches import Rectangle

    if color_by not in ("thread", "block"):
        raise ValueError('color_by must be "thread" or "block"')
    info = trace.arrays[name]
    writers = trace.writers(name, include_atomics=True)
    if info.space == "shared":
        block = trace.dim3(block)
        writers = {idx: who for (b, idx), who in writers.items() if b == block}
    shape = tuple(info.shape) or (1,)
    if len(shape) == 1:
        cols = min(shape[0], 32)
        rows = -(-shape[0] // cols)
    else:
        cols = shape[-1]
        rows = int(np.prod(shape[:-1]))
    if color_by == "thread":
        ncolors = int(np.prod(trace.griddim) * np.prod(trace.blockdim))
    else:
        ncolors = int(np.prod(trace.griddim))

    def colour_of(who):
        b, t = who[-1]
        return trace.global_thread_id(b, t) if color_by == "thread" else trace._linear(b, trace.griddim)

    grid = np.full((rows, cols), np.nan)
    labels = {}
    for flat, idx in enumerate(np.ndindex(*shape)):
        r, c = divmod(flat, cols)
        who = writers.get(idx)
        if who:
            grid[r, c] = colour_of(who)
        labels[r, c] = (idx, who)
    for r, c in [(r, c) for r in range(rows) for c in range(cols) if (r, c) not in labels]:
        grid[r, c] = np.nan  # padding of the last row

    fig, ax = _figure_and_axes(ax, (max(4, cols * 0.45 + 1.5), max(1.8, rows * 0.45 + 1.2)))
    cmap = _discrete_cmap(ncolors)
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap,
                      norm=BoundaryNorm(np.arange(ncolors + 1) - 0.5, ncolors),
                      aspect="equal")
    ticks = np.unique(np.linspace(0, ncolors - 1, min(ncolors, 9)).round().astype(int))
    fig.colorbar(image, ax=ax, ticks=ticks, shrink=0.8,
                 label=f"writing {color_by} ({'global id' if color_by == 'thread' else 'linear id'})")
    if annotate is None:
        annotate = rows * cols <= 256
    for (r, c), (idx, who) in labels.items():
        if who and len(who) > 1:
            ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
        if annotate:
            text = ",".join(map(str, idx))
            if who:
                text += f"\nt{colour_of(who)}" if color_by == "thread" else f"\nb{colour_of(who)}"
                if len(who) > 1:
                    text += f" x{len(who)}"
            ax.text(c, r, text, ha="center", va="center", fontsize=6)
    ax.set_xticks([])
    ax.set_yticks([])
    title = f"{info.space} {name}{list(info.shape)}: who wrote each element"
    if info.space == "shared":
        title += f" (block {block})"
    oob = [a for a in trace.out_of_bounds if a.array == name]
    if oob:
        title += f"\n{len(oob)} out-of-bounds access(es), e.g. index {list(oob[0].index)}"
    ax.set_title(title, fontsize=9)
    return fig

def plot_counts(trace, ax=None):
    """Per-thread global/shared reads and writes (atomics, out-of-bounds if any).

    Grouped bars for up to 32 threads, a heat map beyond.  Returns the Figure.
    """
    from matplotlib.ticker import MaxNLocator

    table = trace.counts_table()
    fields = list(trace.COUNT_FIELDS)
    if not table[:, fields.index("atomics")].any():
        table = table[:, :-1]
        fields = fields[:-1]
    if trace.out_of_bounds:
        tally = Counter(trace.global_thread_id(a.block, a.thread) for a in trace.out_of_bounds)
        column = [[tally[k]] for k in range(table.shape[0])]
        table = np.hstack([table, np.array(column, dtype=np.int64)])
        fields.append("out_of_bounds")
    nthreads = table.shape[0]
    labels = [f.replace("_", " ") for f in fields]
    if nthreads <= 32:
        fig, ax = _figure_and_axes(ax, (min(10, max(5, nthreads * 0.3 + 2)), 3.2))
        x = np.arange(nthreads)
        width = 0.8 / len(fields)
        for k, label in enumerate(labels):
            ax.bar(x + (k - (len(fields) - 1) / 2) * width, table[:, k], width, label=label)
        ax.set_xticks(x if nthreads <= 16 else x[::2])
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=7, ncols=len(fields))
        ax.set_ylabel("accesses")
    else:
        fig, ax = _figure_and_axes(ax, (9, 2.8))
        image = ax.imshow(table.T, aspect="auto", cmap="viridis", interpolation="nearest")
        ax.set_yticks(range(len(fields)), labels, fontsize=7)
        fig.colorbar(image, ax=ax, label="accesses")
    ax.set_xlabel("thread (global id)")
    ax.set_title("memory accesses per thread", fontsize=9)
    return fig


def _figure_and_axes(ax, size):
    if ax is not None:
        return ax.figure, ax
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.add_subplot()


def _discrete_cmap(n):
    import matplotlib

    base = matplotlib.colormaps["tab20" if n <= 20 else "viridis"]
    cmap = base.resampled(n) if n > 20 else matplotlib.colors.ListedColormap(base.colors[:max(n, 1)])
    return cmap.with_extremes(bad="lightgrey")
