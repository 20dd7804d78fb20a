"""TMA boxes on the CPU: 05.01's transpose replayed block by block, every element followed.

The lesson's launch function encodes the tensor maps (here: described, :mod:`grader.cuda.replay`);
each block of the kernel then runs from its PTX (:mod:`grader.cuda.ptx`): a TMA load writes a's box
into shared memory swizzled as its map says, each 4-byte slot holding the name of the element of
``a`` it came from; the threads move those names as the kernel moves floats; a TMA store reads its
box back through the map's swizzle and writes them into ``t``. :func:`transpose` then asks of every
element of ``t`` whether it holds the element of ``a`` it should — and when not, which box, which
coordinates or which swizzle explains it — and :func:`draw` pictures it.

What the replay also finds, because it models the mbarrier: a wait that can never complete (a hang
on the GPU: wrong parity, expect-tx bytes that never come) and a box read before it landed; and a
TMA store of shared memory that the threads wrote without ``fence.proxy.async``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .ptx_values import Deadlock, Elem, ReplayError


@dataclass
class BoxReport:
    kernel: str
    shape: tuple
    problems: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    grid: object = None          # (N, M) array: 0 never written, 1 right, 2 wrong
    loads: list = field(default_factory=list)
    stores: list = field(default_factory=list)

    @property
    def ok(self):
        return not self.problems

    def __str__(self):
        if self.ok:
            n = len(self.loads)
            return "\n".join([f"✓ {self.kernel}: the replay's {n} TMA loads and {len(self.stores)} stores put every "
                              f"element of a {self.shape[0]} × {self.shape[1]} a where the transpose needs it",
                              *(f"  · {x}" for x in self.notes)])
        return "\n".join([f"✗ {self.kernel}:", *(f"  - {p}" for p in self.problems), *(f"  · {x}" for x in self.notes)])

    def figure(self):
        return draw(self)


def transpose(kernel, make_launch=None, shape: tuple = (100, 68)) -> BoxReport:
    """Replay every block of ``tma_transpose<Cfg>`` on a ``shape`` (rows and columns multiples of 4, as
    TMA needs; ragged against the 32 × 32 box by default) through the lesson's launch function
    (default :func:`grader.problems.hopper.tma_transpose_launch`) and check t = aᵀ element by element."""
    import numpy as np

    from . import replay
    from ..problems import hopper

    M, N = shape
    make_launch = make_launch or hopper.tma_transpose_launch
    a, t = replay.FakeTensor("a", (M, N), "f32"), replay.FakeTensor("t", (N, M), "f32")
    rep = BoxReport(kernel=kernel.name, shape=shape)
    try:
        replay.refuse_stub(kernel.module)
    except NotImplementedError as e:
        rep.problems.append(f"not implemented yet: {e}")
        return rep
    launches = replay.record_launch(make_launch, kernel, a, t)
    if not launches:
        rep.problems.append("the launch function launched nothing")
        return rep
    L = launches[0]
    outputs: dict = {}
    for bz in range(L.grid[2]):
        for by in range(L.grid[1]):
            for bx in range(L.grid[0]):
                try:
                    blk = replay.run(L, (bx, by, bz))
                except ReplayError as e:
                    rep.problems.append(f"the CPU replay could not follow the kernel: {e}")
                    return rep
                except Deadlock as e:
                    rep.problems.append(f"block ({bx}, {by}): {e} — on a GPU the launch never ends (the grader's "
                                        "timeout stops it)")
                    return rep
                if blk.trapped:
                    rep.problems.append(f"block ({bx}, {by}): {blk.trapped}")
                    return rep
                rep.loads += [op for op in blk.tma if op.kind == "load"]
                rep.stores += [op for op in blk.tma if op.kind == "store"]
                for p in blk.proxy_problems:
                    if p not in rep.problems:
                        rep.problems.append(p)
                rep.notes += [n for n in blk.notes if n not in rep.notes]
                for (h, r, c), v in blk.outputs.get("t", {}).items():
                    outputs[(r, c)] = v
    grid = np.zeros((N, M), dtype=np.int8)
    wrong, never, stale = [], [], []
    for r in range(N):
        for c in range(M):
            v = outputs.get((r, c), "never")
            if v == "never":
                never.append((r, c))
                continue
            if v == Elem("a", c, r):
                grid[r, c] = 1
            else:
                grid[r, c] = 2
                (wrong if isinstance(v, Elem) else stale).append(((r, c), v))
    rep.grid = grid
    if wrong:
        (r, c), v = wrong[0]
        rep.problems.append(f"{len(wrong)} of {N * M} elements of t hold the wrong element of a; the first, t[{r}, {c}], "
                            f"holds {v} where it needs a[{c}, {r}]" + _diagnose(wrong, rep))
    if stale:
        (r, c), v = stale[0]
        rep.problems.append(f"{len(stale)} elements of t hold no element of a (the first: t[{r}, {c}]): a box was read "
                            "from shared memory before TMA's load landed in it, or from where no box was loaded — "
                            "the wait before the transpose must name the parity of the slot's use, (i / S) & 1")
    if never:
        (r, c) = never[0]
        rep.problems.append(f"{len(never)} elements of t were never written (the first: t[{r}, {c}]): a TMA store "
                            "missing, or stored to other coordinates")
    return rep


def _diagnose(wrong, rep) -> str:
    """One sentence on what the wrong elements have in common."""
    offs = Counter()
    box_only = Counter()
    for (r, c), v in wrong:
        want_r, want_c = c, r                                   # t[r, c] must be a[c, r]
        offs[(v.row - want_r, v.col - want_c)] += 1
        box_only[((v.row % 32, v.col % 32) == (want_c % 32, want_r % 32))] += 1
    if all(dr % 32 == 0 and dc % 32 == 0 for dr, dc in offs):
        return (" — each wrong element sits a whole number of 32 × 32 boxes away from its place: whole boxes "
                "landed in the wrong place, so look at the coordinates of the TMA loads and stores: TMA takes "
                "{column, row} of the tensor its map describes (t's rows are a's columns)")
    same_row = sum(1 for (r, c), v in wrong if v.row // 8 == c // 8 and v.col // 4 != r // 4)
    if same_row > len(wrong) // 2:
        return (" — the right rows of a, the wrong 16-byte chunks within them: the swizzle. TMA stored chunk j of "
                "box row r at chunk j XOR (r mod 8) (128-byte swizzle): read it back through the same pattern")
    return ""


def draw(rep: BoxReport, ax=None):
    """t as the replay left it: green right, red a wrong element, white never written."""
    from matplotlib.colors import ListedColormap

    from ..plot import subplots

    fig = None
    if ax is None:
        fig, ax = subplots(figsize=(5, 4))
    if rep.grid is None:
        ax.axis("off")
        ax.text(0.5, 0.5, "\n".join(rep.problems)[:300], ha="center", va="center", fontsize=7, wrap=True)
        return fig or ax.figure
    ax.imshow(rep.grid, cmap=ListedColormap(["white", "#3a3", "#d22"]), vmin=0, vmax=2, aspect="auto",
              interpolation="nearest")
    for k in range(32, max(rep.grid.shape), 32):
        if k < rep.grid.shape[1]:
            ax.axvline(k - 0.5, color="0.6", lw=0.5)
        if k < rep.grid.shape[0]:
            ax.axhline(k - 0.5, color="0.6", lw=0.5)
    right = int((rep.grid == 1).sum())
    ax.set_title(f"t = aᵀ, replayed: {right} of {rep.grid.size} right\n(green right, red wrong element, white never "
                 "written; lines: 32 × 32 boxes)", fontsize=8)
    ax.set_xlabel("column of t")
    ax.set_ylabel("row of t")
    return fig or ax.figure


def require(rep: BoxReport) -> BoxReport:
    """Print the verdict, or show the picture and raise :class:`grader.errors.CheckFailed`."""
    from ..errors import CheckFailed

    if rep.ok:
        print(str(rep).splitlines()[0])
        return rep
    try:
        from IPython.display import display

        display(rep.figure())
    except ImportError:
        pass
    if len(rep.problems) == 1 and rep.problems[0].startswith("not implemented yet"):
        raise CheckFailed(f"{rep.kernel}: {rep.problems[0]}")
    raise CheckFailed(str(rep).replace("✗ ", "", 1))


__all__ = ["transpose", "BoxReport", "draw", "require"]
