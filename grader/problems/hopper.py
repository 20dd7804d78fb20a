"""Chapter 05, Hopper and Blackwell: the problems of its lessons and the launch functions of their
compiled kernels. Targets from CURRICULUM.md.

* :data:`tma_transpose` (05.01) — chapter 01's fp32 transpose (``elementwise.transpose``), moved
  entirely by TMA: a compiled kernel (``simulator=False``) on torch tensors that needs a GPU with
  the bulk tensor copy engine (``arch="sm_90"``: Hopper, or newer). The sizes keep what TMA can
  describe — rows a multiple of 16 bytes apart, so both sides a multiple of 4 floats — and are
  ragged against the 32 × 32 box everywhere else, so the loads' zero fill and the stores' clipping
  at the edges are exercised. Its peer is the copy bandwidth, as in 01.03.
* :func:`tma_transpose_launch` — the launch function of a ``tma_transpose<Cfg>`` kernel: encodes
  the two tensor maps (grader.cuda.tma) and derives the grid from the type's TILE_M × TILE_N.
"""
from __future__ import annotations

from .. import integrity as _integrity
from .elementwise import transpose as _transpose


# ---------------------------------------------------------------- 05.01 TMA transpose
def _tma_shape_ok(shape) -> bool:
    return shape[0] % 4 == 0 and shape[1] % 4 == 0          # rows of a and of t: multiples of 16 B


tma_transpose = _transpose.variant(
    name="transpose by TMA",
    # one box, a row and a column of boxes, ragged against the 32 × 32 box on both sides, a square one
    sizes=[(4, 4), (4, 1000), (1000, 4), (1020, 516), (4096, 4096)],
    hidden_sizes=[(12, 20), (4, 65_540), (65_540, 4), (2052, 1028), (3000, 4100)],
    sim_sizes=[], hidden_sim_sizes=[],
    hint=("t[j, i] must equal a[i, j]. The boxes at the right and bottom edges are partial: TMA reads "
          "zeros past the edge of `a` and drops writes past the edge of `t`, so the kernel needs no "
          "guards, but its box coordinates must be {column, row} of the tensor each map describes."),
    bench_size=(8192, 8192),            # 256 MiB each way, 5× the L2 of an H100
    target=0.70,
    floor=0.35,                         # the naive transpose (01.03) reached 41% of copy on an H200
    simulator=False, arch="sm_90", arrays="torch",
)


def tma_transpose_launch(kernel, swizzle: str = "128B"):
    """``launch(a, t)`` of a ``tma_transpose<Cfg>`` kernel: a (M, N) and t (N, M) fp32 torch tensors.
    Both tensor maps use 32 × 32 boxes (the type's TILE_N) with ``swizzle``; the grid is
    (⌈N / TILE_N⌉, ⌈M / TILE_M⌉): one block per strip of TILE_M rows by TILE_N columns of a."""
    import numpy as np

    from ..cuda.module import _torch_stream_handle
    from ..cuda.tma import layout_problems, tiled_2d

    maps: dict = {}

    def _map(x, box, swizzle):
        """The tensor map of ``x``, encoded once per (address, shape): the timed loop reuses its tensors."""
        key = (int(x.data_ptr()), tuple(x.shape), tuple(x.stride()), str(x.dtype), box, swizzle)
        if key not in maps:
            if len(maps) > 64:
                maps.clear()
            maps[key] = tiled_2d(x, box, swizzle)
        return maps[key]

    shape = kernel.launch_shape
    if shape is None or not (shape.tile_m and shape.tile_n):
        raise ValueError(f"{kernel.name}: its configuration type must state THREADS, SMEM_BYTES, TILE_M and TILE_N")
    box = (shape.tile_n, shape.tile_n)

    def launch(a, t):
        M, N = a.shape
        if M == 0 or N == 0:
            return
        for name, (r, c) in (("a", (M, N)), ("t", (N, M))):
            if layout_problems((r, c), 4 * c, 4, box, swizzle):
                raise ValueError(f"TMA cannot describe {name} ({r} × {c} fp32): its rows must be a multiple "
                                 f"of 16 bytes apart, so both sides of a must be multiples of 4")
        a_map, t_map = _map(a, box, swizzle), _map(t, box, swizzle)
        m_boxes = -(-M // box[0])
        kernel.launch((-(-N // shape.tile_n), -(-M // shape.tile_m)), a_map, t_map, np.int32(m_boxes),
                      stream=_torch_stream_handle(a))
    launch.__name__ = f"launch {kernel.name}"
    return launch


__all__ = ["tma_transpose", "tma_transpose_launch"]

_integrity.record_problems(globals())   # the fields checks rely on, before any learner code
