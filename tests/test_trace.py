"""grader.sim.trace: who touched which element, from a simulated run.

Runs under the simulator: NUMBA_ENABLE_CUDASIM is set here before numba is
imported.  Plots use matplotlib Figures directly (no pyplot, no display).
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from numba import cuda  # noqa: E402

from grader.sim.trace import Counts, trace  # noqa: E402

pytestmark = pytest.mark.skipif(
    os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
    reason="needs the CUDA simulator (numba was imported without it)",
)

B0 = (0, 0, 0)


def t(x, y=0, z=0):
    return (x, y, z)


@cuda.jit
def vector_add(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def vector_add_unguarded(a, b, out):
    i = cuda.grid(1)
    out[i] = a[i] + b[i]


TILE = 4


@cuda.jit
def transpose_tiled(src, dst):
    tile = cuda.shared.array((TILE, TILE), np.float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    x = cuda.blockIdx.x * TILE + tx
    y = cuda.blockIdx.y * TILE + ty
    tile[ty, tx] = src[y, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE + tx
    y = cuda.blockIdx.x * TILE + ty
    dst[y, x] = tile[tx, ty]


@cuda.jit
def histogram(values, bins):
    i = cuda.grid(1)
    if i < values.size:
        cuda.atomic.add(bins, values[i], 1)


@cuda.jit
def everyone_writes_zero(out):
    out[0] = cuda.threadIdx.x


def test_vector_add_each_element_written_once_by_thread_i():
    n = 10
    a = np.arange(n, dtype=np.float32)
    b = np.ones(n, np.float32)
    out = np.zeros(n, np.float32)
    tr = trace(vector_add, 2, 8, a, b, out)

    np.testing.assert_array_equal(out, a + 1)  # the launch really ran
    assert set(tr.arrays) == {"a", "b", "out"}
    writers = tr.writers("out")
    for i in range(n):
        assert writers[(i,)] == [(t(i // 8), t(i % 8))]
        assert tr.readers("a")[(i,)] == [(t(i // 8), t(i % 8))]
    assert tr.written_by_many() == []
    assert tr.never_written("out") == []
    assert tr.out_of_bounds == []

    counts = tr.thread_counts()
    assert counts[t(0), t(3)] == Counts(2, 1, 0, 0, 0)
    assert counts[t(1), t(7)] == Counts(0, 0, 0, 0, 0)  # thread 15 is past the end
    assert tr.counts_table().shape == (16, 5)
    assert tr.global_thread_id(t(1), t(2)) == 10


def test_missing_bounds_guard_is_flagged_as_out_of_bounds():
    n = 10
    a = np.arange(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    tr = trace(vector_add_unguarded, 2, 8, a, a, out)

    flagged = {(acc.thread[0] + 8 * acc.block[0], acc.array, acc.kind) for acc in tr.out_of_bounds}
    for i in range(n, 16):
        assert {(i, "a", "read"), (i, "out", "write")} <= flagged
    assert all(acc.index[0] >= n for acc in tr.out_of_bounds)
    np.testing.assert_array_equal(out, 2 * a)  # in-range work still done
    assert "OUT OF BOUNDS" in tr.summary()

    with pytest.raises(IndexError, match="out of bounds for shape"):
        trace(vector_add_unguarded, 2, 8, a, a, out, out_of_bounds="raise")


def test_transpose_through_shared_tile_counts_shared_accesses():
    src = np.arange(64, dtype=np.float32).reshape(8, 8)
    dst = np.zeros_like(src)
    tr = trace(transpose_tiled, (2, 2), (TILE, TILE), src, dst)

    np.testing.assert_array_equal(dst, src.T)
    assert tr.arrays["tile"].space == "shared"
    assert tr.arrays["tile"].shape == (TILE, TILE)
    for key, counts in tr.thread_counts().items():
        assert counts == Counts(global_reads=1, global_writes=1, shared_reads=1, shared_writes=1, atomics=0), key
    # thread (tx, ty) writes tile[ty, tx] and reads tile[tx, ty] in each block
    block = t(1, 0)
    assert tr.writers("tile")[block, (2, 1)] == [(block, t(1, 2))]
    assert tr.readers("tile")[block, (2, 1)] == [(block, t(2, 1))]
    assert tr.written_by_many() == []
    assert tr.never_written("dst") == []
    # element dst[y, x] is written by block (y // 4, x // 4)
    assert tr.writers("dst")[(1, 6)][0][0] == t(0, 1)


def test_elements_written_by_many_threads_and_never_written():
    out = np.zeros(3, np.int64)
    tr = trace(everyone_writes_zero, 1, 4, out)
    [(name, index, who)] = tr.written_by_many()
    assert (name, index) == ("out", (0,))
    assert sorted(who) == [(B0, t(k)) for k in range(4)]
    assert tr.never_written("out") == [(1,), (2,)]


def test_atomics_are_counted_but_not_flagged_as_races():
    values = np.array([0, 1, 1, 2, 1, 0], np.int64)
    bins = np.zeros(3, np.int64)
    tr = trace(histogram, 1, 8, values, bins)
    np.testing.assert_array_equal(bins, [2, 3, 1])
    assert tr.written_by_many() == []
    assert tr.thread_counts()[B0, t(1)] == Counts(1, 0, 0, 0, 1)
    assert tr.writers("bins", include_atomics=True)[(1,)] == [(B0, t(k)) for k in (1, 2, 4)]


def test_plots_return_figures():
    src = np.arange(64, dtype=np.float32).reshape(8, 8)
    tr = trace(transpose_tiled, (2, 2), (TILE, TILE), src, np.zeros_like(src))
    for fig in (tr.plot_writes("dst"), tr.plot_writes("dst", color_by="block"),
                tr.plot_writes("tile", block=(1, 1)), tr.plot_counts()):
        assert isinstance(fig, Figure)
        fig.canvas.draw()  # renders without a display

    a = np.arange(10, dtype=np.float32)
    tr = trace(vector_add_unguarded, 2, 8, a, a, np.zeros(10, np.float32))
    fig = tr.plot_writes("out")
    assert "out-of-bounds" in fig.axes[0].get_title()
    assert isinstance(tr.plot_counts(), Figure)  # bars up to 32 threads
    wide = trace(vector_add, 1, 100, np.ones(100), np.ones(100), np.zeros(100))
    assert isinstance(wide.plot_counts(), Figure)  # heat map beyond 32 threads
