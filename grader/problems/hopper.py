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
* :data:`wgmma_gemm` (05.02) — chapter 03's bf16 GEMM (``gemm.hgemm_bf16``: C = A·B, row-major,
  fp32 accumulation, cuBLAS through torch.matmul as the peer at the kernel's own shape) for a
  TMA + WGMMA kernel: ``arch="sm_90a"`` (wgmma exists only on Hopper). The sizes keep what TMA can
  describe — rows of A, B and C a multiple of 16 bytes apart, so K and N multiples of 8 — and are
  ragged against the tiles everywhere else (M anything), so TMA's zero fill at the edges is what
  makes the last partial tiles right. Lesson 03 builds its problem from this one with ``variant``.
* :func:`wgmma_gemm_launch` — the launch function of a ``wgmma_gemm<Cfg>``-style kernel
  ``(a_map, b_map, c, M, N, K)``: encodes A's map (box TILE_M × TILE_K) and B's (box TILE_K × 64,
  the 128-byte swizzle's span of bf16), launches one block per TILE_M × TILE_N tile of C (a 1-D
  grid: the kernel orders its tiles), threads and shared memory from the type.
* :data:`ws_gemm` (05.03) — 05.02's GEMM for a warp-specialized, persistent kernel (``variant``: the
  same reference, tolerance and peer), with shapes of more tiles than SMs and of an odd number of tile
  rows added; :func:`ws_gemm_launch` launches a ``ws_gemm<Cfg>`` kernel ``(a_map, b_map, c_map, M, N,
  K)`` on a persistent grid (clusters of the type's CLUSTER, as many as the GPU holds at once);
  :func:`cutlass_gemm_launch` calls a CUTLASS GEMM built as a host library (grader.cuda.host).
"""
from __future__ import annotations

from .. import integrity as _integrity
from .elementwise import transpose as _transpose
from .gemm import Shape, hgemm_bf16 as _hgemm_bf16


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
    floor=0.35,                         # 01.03's unpadded 32 × 32 tile reached 35% of copy on an H200 (naive: 13%)
    simulator=False, arch="sm_90", arrays="torch",
)


def _map_cache():
    """``map(x, box, swizzle, cols=None)``: the tensor map of torch tensor ``x`` (of its rows' first
    ``cols`` elements, if given), encoded once per (address, shape, box, swizzle, cols) — the timed
    loop reuses its tensors, and encoding is a driver call."""
    from ..cuda.tma import tiled_2d

    maps: dict = {}

    def _map(x, box, swizzle, cols=None):
        key = (int(x.data_ptr()), tuple(x.shape), tuple(x.stride()), str(x.dtype), box, swizzle, cols)
        if key not in maps:
            if len(maps) > 64:
                maps.clear()
            maps[key] = tiled_2d(x, box, swizzle, cols)
        return maps[key]
    return _map


def tma_transpose_launch(kernel, swizzle: str = "128B"):
    """``launch(a, t)`` of a ``tma_transpose<Cfg>`` kernel: a (M, N) and t (N, M) fp32 torch tensors.
    Both tensor maps use 32 × 32 boxes (the type's TILE_N) with ``swizzle``; the grid is
    (⌈N / TILE_N⌉, ⌈M / TILE_M⌉): one block per strip of TILE_M rows by TILE_N columns of a."""
    import numpy as np

    from ..cuda.module import _torch_stream_handle
    from ..cuda.tma import layout_problems

    _map = _map_cache()

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


# ---------------------------------------------------------------- 05.02 WGMMA GEMM
# GPU sizes: one tile; ragged against 128 × 256 × 64 on every side; one row of C; one 8-wide column
# block; long K (8200: a bf16 or fp16 accumulator is far off there); a large square.
WGMMA_SIZES = [Shape(128, 256, 64), Shape(1000, 1032, 1016), Shape(1, 768, 512), Shape(640, 8, 320),
               Shape(200, 136, 8200), Shape(2048, 2048, 2048)]
WGMMA_HIDDEN = [Shape(1, 8, 8), Shape(999, 1000, 1000), Shape(1, 1032, 1016), Shape(1032, 8, 1016),
                Shape(255, 264, 8192), Shape(4096, 1024, 1536), Shape(3000, 4104, 520)]


def tma_gemm_shape_ok(s) -> bool:
    """Can TMA describe A (M, K), B (K, N) and C (M, N) bf16, row-major? Rows 16 B apart: K and N
    multiples of 8 (M is free)."""
    return s.K % 8 == 0 and s.N % 8 == 0


def require_tma_gemm(M: int, N: int, K: int) -> None:
    """Raise unless TMA can describe a bf16 M × N × K GEMM's A, B and C (:func:`tma_gemm_shape_ok`)."""
    if not tma_gemm_shape_ok(Shape(M, N, K)):
        raise ValueError(f"TMA cannot describe a {M}×{N}×{K} GEMM in bf16: rows must be a multiple of "
                         "16 bytes apart, so K and N must be multiples of 8")


def gemm_launch_shape(kernel):
    """The launch shape of a GEMM kernel configured by a type, which must state its tiles."""
    shape = kernel.launch_shape
    if shape is None or not (shape.tile_m and shape.tile_n and shape.tile_k):
        raise ValueError(f"{kernel.name}: its configuration type must state THREADS, SMEM_BYTES, TILE_M, "
                         "TILE_N and TILE_K (see grader/include/course.cuh)")
    return shape


wgmma_gemm = _hgemm_bf16.variant(
    name="wgmma gemm bf16",
    sizes=WGMMA_SIZES, hidden_sizes=WGMMA_HIDDEN, sim_sizes=[], hidden_sim_sizes=[],
    hint=("C[m, n] = sum over k of A[m, k]·B[k, n], all row-major. TMA fills the parts of a box past "
          "the edge of A or B with zeros, so the ragged last tiles need no guards in the main loop; "
          "the stores of C must skip rows ≥ M and columns ≥ N. Wrong everywhere: check the descriptors "
          "(start address, LBO, SBO, swizzle code 1 = 128 B) against the layout TMA wrote, and the "
          "imm-trans-b flag (B is N-major). Wrong only with long K: accumulate in fp32."),
    target=0.50,
    floor=0.05,                      # a tenth of the target, as chapter 03's GEMMs
    simulator=False, arch="sm_90a", arrays="torch",
)


def wgmma_gemm_launch(kernel, swizzle: str = "128B"):
    """``launch(a, b, c)`` of a ``wgmma_gemm<Cfg>``-style kernel ``(a_map, b_map, c, M, N, K)``:
    a (M, K), b (K, N), c (M, N) bf16 bits in torch tensors. A's map: boxes TILE_M rows × TILE_K
    columns; B's: TILE_K rows × 64 columns (128 bytes: the swizzle's span), TILE_N / 64 of them per
    k tile; both with ``swizzle``. One block per TILE_M × TILE_N tile of C, on a 1-D grid."""
    import numpy as np

    from ..cuda.module import _torch_stream_handle

    _map = _map_cache()
    shape = gemm_launch_shape(kernel)
    a_box, b_box = (shape.tile_m, shape.tile_k), (shape.tile_k, 64)

    def launch(a, b, c):
        M, K = a.shape
        N = b.shape[1]
        if M == 0 or N == 0:
            return
        require_tma_gemm(M, N, K)
        tiles_m, tiles_n = shape.tiles(M, N)
        kernel.launch((tiles_m * tiles_n,), _map(a, a_box, swizzle), _map(b, b_box, swizzle), c,
                      np.int32(M), np.int32(N), np.int32(K), stream=_torch_stream_handle(a))
    launch.__name__ = f"launch {kernel.name}"
    return launch


# ---------------------------------------------------------------- 05.03 warp specialization
# 05.02's sizes, plus shapes with more tiles than an H100 has SMs (a persistent CTA then computes
# several tiles, and its ring's phases run on across them) and an odd number of tile rows (with
# clusters of two along M, the last cluster's second tile lies wholly below C).
WS_SIZES = WGMMA_SIZES + [Shape(2304, 4104, 256)]
WS_HIDDEN = WGMMA_HIDDEN + [Shape(4104, 2056, 328)]

ws_gemm = wgmma_gemm.variant(
    name="warp-specialized gemm bf16",
    sizes=WS_SIZES, hidden_sizes=WS_HIDDEN,
    hint=("C[m, n] = sum over k of A[m, k]·B[k, n], all row-major. Wrong values: compare the parity "
          "each wait names with the ring's use count (slot it % S, its (it / S)-th use: consumers wait "
          "full[s] for parity (it / S) & 1, the producer waits empty[s] for the parity before), and "
          "check that every consumer warpgroup releases each slot on every CTA of its cluster. A launch "
          "that fails after about two seconds: a wait that never completed (course::mbar_wait_or_trap)."),
    target=0.70,
    floor=0.35,                      # about 05.02's untuned start (two warpgroups, no specialization)
)


def persistent_grid(kernel, cluster: int, ctas: int | None = None):
    """``grid(units)`` of a persistent kernel in clusters of ``cluster``: the CTAs the GPU holds at
    once (whole clusters, as many as cuOccupancyMaxActiveClusters allows; asked once, on the first
    launch), never more than ``units`` clusters; ``ctas`` overrides it."""
    resident: list = []

    def grid(units: int) -> int:
        if ctas:
            return ctas
        if not resident:
            from .. import device

            n = device.info().sm_count
            if cluster > 1:
                try:
                    n = kernel.max_active_clusters(cluster) * cluster
                except Exception:       # an older driver: one CTA per SM, whole clusters
                    n = n // cluster * cluster
            resident.append(max(n, cluster))
        return min(resident[0], units * cluster)
    return grid


def ws_gemm_launch(kernel, swizzle: str = "128B", ctas: int | None = None):
    """``launch(a, b, c)`` of a persistent ``ws_gemm<Cfg>``-style kernel ``(a_map, b_map, c_map, M, N,
    K)``: A's map with boxes TILE_M × TILE_K, B's TILE_K × 64, C's 64 × 64 (the epilogue's TMA
    stores), all ``swizzle``. The grid is persistent: as many CTAs as the GPU holds at once (clusters
    of the type's CLUSTER, as many as fit: cuOccupancyMaxActiveClusters), never more than the tiles;
    ``ctas`` overrides it (a multiple of CLUSTER)."""
    import numpy as np

    from ..cuda.module import _torch_stream_handle

    _map = _map_cache()
    shape = gemm_launch_shape(kernel)
    cluster = max(shape.cluster, 1)
    a_box, b_box, c_box = (shape.tile_m, shape.tile_k), (shape.tile_k, 64), (64, 64)
    grid = persistent_grid(kernel, cluster, ctas)

    def launch(a, b, c):
        M, K = a.shape
        N = b.shape[1]
        if M == 0 or N == 0:
            return
        require_tma_gemm(M, N, K)
        tiles_m, tiles_n = shape.tiles(M, N)
        units = -(-tiles_m // cluster) * tiles_n
        kernel.launch((grid(units),), _map(a, a_box, swizzle), _map(b, b_box, swizzle), _map(c, c_box, swizzle),
                      np.int32(M), np.int32(N), np.int32(K), stream=_torch_stream_handle(a))
    launch.__name__ = f"launch {kernel.name}"
    return launch


def cutlass_gemm_launch(library, function: str = "cutlass_gemm"):
    """``launch(a, b, c)`` of a CUTLASS GEMM built as a host library (grader.cuda.host):
    ``int function(const void* a, const void* b, void* c, int M, int N, int K, void* stream)``, which
    returns 0 or an error code (CUTLASS's device layer checks the arguments, encodes the TMA
    descriptors and launches on the stream)."""
    import ctypes

    from ..cuda.module import _torch_stream_handle
    from ..launches import note_launch

    fn = library.function(function, ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                                   ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p])

    def launch(a, b, c):
        M, K = a.shape
        N = b.shape[1]
        if M == 0 or N == 0:
            return
        note_launch()                   # the library launches its kernel itself, from C++
        err = fn(a.data_ptr(), b.data_ptr(), c.data_ptr(), M, N, K, _torch_stream_handle(a))
        if err:
            raise RuntimeError(f"{function} returned {err} for a {M}×{N}×{K} GEMM "
                               "(1000 + a cutlass::Status, 2000: needs a workspace, else a CUDA error)")
    launch.__name__ = f"launch {function}"
    return launch


__all__ = ["tma_transpose", "tma_transpose_launch", "wgmma_gemm", "wgmma_gemm_launch", "tma_gemm_shape_ok",
           "require_tma_gemm", "gemm_launch_shape",
           "WGMMA_SIZES", "WGMMA_HIDDEN", "ws_gemm", "ws_gemm_launch", "cutlass_gemm_launch", "WS_SIZES", "WS_HIDDEN"]

_integrity.record_problems(globals())   # the fields checks rely on, before any learner code
