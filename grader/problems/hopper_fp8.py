"""Chapter 05, lesson 04: an FP8 (e4m3) GEMM with DeepSeek-style block scaling, on Hopper.

* :func:`e4m3_encode` / :func:`e4m3_decode` — fp32 ↔ e4m3 (OCP "fn": 4 exponent bits, bias 7, 3
  mantissa bits, no infinities, largest 448) in NumPy, round to nearest even, saturating.
* :func:`quantize_rows` / :func:`quantize_blocks` — the two block scalings: activations A (M, K)
  with one fp32 scale per row per 128-wide block of K (1 × 128), weights B (N, K) with one per
  128 × 128 block; each scale is the block's largest magnitude / 448. :func:`quantize_tensor`:
  one scale for the whole tensor (per-tensor scaling, what the lesson compares against).
* :data:`fp8_gemm` — C (M, N) bf16 = Σ_kb sa[kb, m]·sb[kb, n // 128]·Σ_{k in kb} A[m, k]·B[n, k]:
  inputs ``a`` (M, K) and ``b`` (N, K) e4m3 bits (uint8), and the scales **k-block-major**, one row
  per 128-wide block of K: ``sa`` (K/128, M₄) and ``sb`` (K/128, N₄) fp32, M₄ = M and N₄ = ⌈N/128⌉
  rounded up to multiples of 4 (zeros past M and ⌈N/128⌉), so that a k tile's scales are one
  16-byte-aligned row a TMA box can load with the tile (the layout DeepGEMM takes for A's scales;
  :func:`kb_major` / :func:`from_kb_major`). The data has outlier rows and blocks of different magnitudes, so the scales
  vary along K and down M: a kernel that applies one scale per tensor, or scales once after summing
  all of K, or takes B's scale from the wrong k block, is wrong by far more than the tolerance. K is
  a multiple of 128 (the scale blocks; DeepGEMM asks the same); M is anything, N a multiple of 8
  (TMA: C's rows 16 bytes apart). Its peer is cuBLAS's FP8 GEMM through ``torch._scaled_mm`` with
  per-tensor scales at the same shape (:func:`grader.peers.scaled_mm`).
* :func:`fp8_gemm_launch` — launches an ``fp8_gemm<Cfg>``-style kernel ``(a_map, b_map, c_map, sa_map,
  sb_map, M, N, K)`` on a persistent grid (05.03's launch, with FP8 boxes and the scales' maps).
"""
from __future__ import annotations

import math

import numpy as np

from .. import integrity as _integrity
from .. import peers
from ..formats import BF16
from ..problem import Problem
from .gemm import Shape, flops

E4M3_MAX = 448.0
BLOCK = 128
SB_BOX = 8          # B's scales a k tile loads: blocks (n0 / 128) & ~3 … + 7, two for any tile of ≤ 192 columns


# ---------------------------------------------------------------- e4m3 in NumPy
def _e4m3_table() -> np.ndarray:
    codes = np.arange(256)
    e, m, sign = (codes >> 3) & 15, codes & 7, np.where(codes & 128, -1.0, 1.0)
    mag = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7.0))
    val = sign * mag
    val[(codes & 127) == 127] = np.nan                 # 0x7F and 0xFF: NaN (no infinities in e4m3fn)
    return val.astype(np.float32)


E4M3_VALUES = _e4m3_table()


def e4m3_decode(bits: np.ndarray) -> np.ndarray:
    """e4m3 bits (uint8) to float32."""
    return E4M3_VALUES[np.asarray(bits, dtype=np.uint8)]


def e4m3_encode(x: np.ndarray) -> np.ndarray:
    """float32 to e4m3 bits (uint8): round to nearest even, magnitudes past 448 saturate to 448."""
    x = np.asarray(x, dtype=np.float32)
    sign = (np.signbit(x).astype(np.uint8) << 7)
    a = np.minimum(np.abs(x), np.float32(E4M3_MAX))
    bits = a.view(np.uint32)
    # normal range (≥ 2^-6): keep 3 of fp32's 23 mantissa bits, ties to even, then rebias 127 -> 7
    r = (bits + np.uint32(0x7FFFF) + ((bits >> np.uint32(20)) & np.uint32(1))) & np.uint32(0xFFF00000)
    exp = (r >> np.uint32(23)).astype(np.int32) - 127 + 7
    normal = ((exp << 3) | ((r >> np.uint32(20)) & np.uint32(7)).astype(np.int32))
    # subnormal range: multiples of 2^-9 (code = the multiple; 8 is 2^-6, the first normal code)
    sub = np.rint(a * np.float32(2.0 ** 9)).astype(np.int32)
    code = np.where(a < np.float32(2.0 ** -6), sub, normal)
    return (code.astype(np.uint8) | sign).astype(np.uint8)


# ---------------------------------------------------------------- scalings
def _scale_of(amax: np.ndarray) -> np.ndarray:
    return np.where(amax > 0, amax / np.float32(E4M3_MAX), np.float32(1.0)).astype(np.float32)


def quantize_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A (M, K), K a multiple of 128 -> (e4m3 bits (M, K), scales (M, K/128)): 1 × 128 blocks."""
    M, K = a.shape
    blocks = a.reshape(M, K // BLOCK, BLOCK)
    s = _scale_of(np.abs(blocks).max(axis=2))
    return e4m3_encode(blocks / s[:, :, None]).reshape(M, K), s


def quantize_blocks(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """B (N, K), K a multiple of 128 -> (e4m3 bits (N, K), scales (⌈N/128⌉, K/128)): 128 × 128 blocks."""
    N, K = b.shape
    nb = -(-N // BLOCK)
    padded = np.zeros((nb * BLOCK, K), np.float32)
    padded[:N] = b
    blocks = padded.reshape(nb, BLOCK, K // BLOCK, BLOCK)
    s = _scale_of(np.abs(blocks).max(axis=(1, 3)))
    q = e4m3_encode(blocks / s[:, None, :, None]).reshape(nb * BLOCK, K)[:N]
    return q, s


def quantize_tensor(x: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """One scale for the whole tensor (per-tensor scaling)."""
    s = _scale_of(np.abs(x).max())
    return e4m3_encode(x / s), np.float32(s)


def kb_major(s: np.ndarray) -> np.ndarray:
    """Scales (R, K/128) -> the problem's layout: (K/128, R₄), R₄ = R rounded up to a multiple of 4
    (16 bytes of fp32, TMA's row alignment), zeros in the columns past R."""
    rows, kb = s.shape
    out = np.zeros((kb, -(-rows // 4) * 4), np.float32)
    out[:, :rows] = s.T
    return out


def from_kb_major(t: np.ndarray, rows: int) -> np.ndarray:
    """The inverse of :func:`kb_major`: (K/128, R₄) -> (R, K/128)."""
    return np.ascontiguousarray(t[:, :rows].T)


def dequantize_rows(q, s):
    M, K = q.shape
    return (e4m3_decode(q).reshape(M, K // BLOCK, BLOCK) * s[:, :, None]).reshape(M, K)


def dequantize_blocks(q, s):
    N, K = q.shape
    return e4m3_decode(q) * np.repeat(np.repeat(s, BLOCK, axis=0)[:N], BLOCK, axis=1)


# ---------------------------------------------------------------- the problem
OUTLIER = 8.0            # outlier rows of A: 8× the others
FACTORS = np.array([0.5, 1.0, 2.0], np.float32)   # magnitudes of A's 1 × 128 and B's 128 × 128 blocks


def fp8_data(rng, s: Shape) -> tuple[np.ndarray, np.ndarray]:
    """The unquantized A (M, K) and B (N, K), fp32: uniform(-1, 1) entries, each of A's 1 × 128 and
    B's 128 × 128 blocks times 0.5, 1 or 2, and one row of A in 16 (at least one) times OUTLIER."""
    if s.K % BLOCK:
        raise ValueError(f"K must be a multiple of {BLOCK} (the scale blocks), not {s.K}")
    kb = s.K // BLOCK
    a = rng.uniform(-1, 1, (s.M, s.K)).astype(np.float32)
    a *= np.repeat(rng.choice(FACTORS, (s.M, kb)), BLOCK, axis=1)
    rows = rng.random(s.M) < 1 / 16
    rows[rng.integers(s.M)] = True
    a[rows] *= np.float32(OUTLIER)
    b = rng.uniform(-1, 1, (s.N, s.K)).astype(np.float32)
    nb = -(-s.N // BLOCK)
    b *= np.repeat(np.repeat(rng.choice(FACTORS, (nb, kb)), BLOCK, axis=0)[:s.N], BLOCK, axis=1)
    return a, b


def _inputs(rng, s: Shape) -> dict:
    a, b = fp8_data(rng, s)
    qa, sa = quantize_rows(a)
    qb, sb = quantize_blocks(b)
    return {"a": qa, "b": qb, "sa": kb_major(sa), "sb": kb_major(sb)}


def _reference(a, b, sa, sb) -> dict:
    # float64 from the dequantized operands the kernel sees: FP8 rounding is not the kernel's error
    A = dequantize_rows(a, from_kb_major(sa, a.shape[0])).astype(np.float64)
    B = dequantize_blocks(b, from_kb_major(sb, -(-b.shape[0] // BLOCK))).astype(np.float64)
    return {"c": A @ B.T}


def fp8_tolerance(s: Shape, dtype=None) -> tuple:
    """rtol 2^-7: one bf16 rounding of the output (2^-8 relative, ×2). atol, for elements near 0:
    2^-9 × the rms of an outlier row's element, OUTLIER·sqrt(K·⟨a²⟩⟨b²⟩) with ⟨a²⟩ = ⟨b²⟩ = 7/12
    (uniform(-1, 1) times 0.5, 1 or 2) — room for the fp32 promotions' rounding and for FP8 wgmma's
    accumulator, which adds each 32 products with fewer mantissa bits than fp32 (here it never sums
    more than 128 before the promotion). A scale from the wrong block or row misses by about a
    block's contribution, sqrt(128·⟨a²⟩⟨b²⟩) ≈ 6.6 — 8 times this atol at K = 8192, 60 times at K = 128."""
    rms = OUTLIER * math.sqrt(max(s.K, 1)) * 7 / 12
    return (2.0 ** -7, 2.0 ** -9 * rms)


def fp8_shape_ok(s) -> bool:
    """K a multiple of 128 (the scale blocks; rows of A and B then 16-byte multiples for TMA); N a
    multiple of 8 (C's bf16 rows 16 bytes apart). M is free."""
    return s.K % BLOCK == 0 and s.K > 0 and s.N % 8 == 0


# GPU sizes: one tile; ragged M and N against 128 × 128; one row; an 8-wide C; long K (8192: 64
# promotions; skipping them is far off); 2048³; more tiles than SMs, odd tile rows.
FP8_SIZES = [Shape(128, 128, 128), Shape(1000, 1032, 1024), Shape(1, 136, 512), Shape(640, 8, 384),
             Shape(200, 136, 8192), Shape(2048, 2048, 2048), Shape(2304, 4104, 256)]
FP8_HIDDEN = [Shape(1, 8, 128), Shape(999, 1000, 1024), Shape(1032, 8, 640), Shape(255, 264, 8192),
              Shape(4096, 1024, 1536), Shape(3000, 4104, 640), Shape(4104, 2056, 384)]

fp8_gemm = Problem(
    name="fp8 gemm block-scaled",
    make_inputs=_inputs,
    outputs=lambda s, inputs: {"c": ((s.M, s.N), BF16)},
    reference=_reference,
    sizes=FP8_SIZES, hidden_sizes=FP8_HIDDEN,
    tolerance=fp8_tolerance,
    hint=("C[m, n] = Σ over k blocks kb of sa[kb, m]·sb[kb, n // 128]·Σ_{k in kb} A[m, k]·B[n, k]; A is "
          "(M, K), B is (N, K), both e4m3, K-major. Wrong everywhere: the descriptors (both K-major, "
          "SBO 1024, 128-byte swizzle; +32 bytes per k32 step). Wrong by factors of 0.25 … 4: a scale "
          "from the wrong row or block (one row of sa and of sb per k block: slot s holds k tile kt's; "
          "B's box starts at block (n0 / 128) & ~3); promote (scale and add to the fp32 accumulator) "
          "after every k tile of 128, not once at the end. Wrong in a few 64-column chunks, and not "
          "every run: a staging box rewritten while its TMA store may still read it."),
    bytes_moved=lambda s: s.M * s.K + s.N * s.K + 2 * s.M * s.N, flops=flops,
    bench_size=Shape(4096, 4096, 4096), peer=peers.scaled_mm("tensorwise"),
    target=0.60, floor=0.06, library_free=True,
    simulator=False, arch="sm_90a", arrays="torch",
)


def fp8_gemm_launch(kernel, ctas: int | None = None):
    """``launch(a, b, sa, sb, c)`` of a persistent ``fp8_gemm<Cfg>``-style kernel ``(a_map, b_map, c_map,
    sa_map, sb_map, M, N, K)``: A's map with boxes TILE_M rows × 128 columns of e4m3, B's TILE_N / CLUSTER
    rows × 128 (each CTA of a cluster loads its share of B's rows and multicasts it), C's 64 × 64 bf16;
    all 128-byte swizzled. The scales' maps, unswizzled fp32 over the k-block-major (K/128, M) and
    (K/128, ⌈N/128⌉) (the padding columns left out: zeros are read past the edge): sa's box one k block
    × TILE_M rows of A, sb's one k block × 8 blocks of B (a box starts at a multiple of 4, 16 bytes).
    The grid: 05.03's (as many CTAs as fit at once, whole clusters)."""
    import numpy as np

    from ..cuda.module import _torch_stream_handle
    from .hopper import _map_cache, persistent_grid

    _map = _map_cache()
    shape = kernel.launch_shape
    if shape is None or not (shape.tile_m and shape.tile_n):
        raise ValueError(f"{kernel.name}: its configuration type must state THREADS, SMEM_BYTES, TILE_M and TILE_N")
    cluster = max(shape.cluster, 1)
    a_box, b_box, c_box = (shape.tile_m, BLOCK), (shape.tile_n // cluster, BLOCK), (64, 64)
    sa_box, sb_box = (1, shape.tile_m), (1, SB_BOX)
    grid = persistent_grid(kernel, cluster, ctas)

    def launch(a, b, sa, sb, c):
        M, K = a.shape
        N = b.shape[0]
        if M == 0 or N == 0:
            return
        if not fp8_shape_ok(Shape(M, N, K)):
            raise ValueError(f"{M}×{N}×{K}: K must be a multiple of 128 (the scale blocks) and N of 8 (TMA)")
        nb = -(-N // BLOCK)
        for name, t, rows in (("sa", sa, M), ("sb", sb, nb)):
            want = (K // BLOCK, -(-rows // 4) * 4)
            if tuple(t.shape) != want:
                raise ValueError(f"{name} must be k-block-major, {want[0]} × {want[1]} (K/128 rows of "
                                 f"{rows} scales padded to a multiple of 4), not {tuple(t.shape)}")
        tiles_m, tiles_n = shape.tiles(M, N)
        units = -(-tiles_m // cluster) * tiles_n
        kernel.launch((grid(units),), _map(a, a_box, "128B"), _map(b, b_box, "128B"), _map(c, c_box, "128B"),
                      _map(sa, sa_box, "none", cols=M), _map(sb, sb_box, "none", cols=nb),
                      np.int32(M), np.int32(N), np.int32(K), stream=_torch_stream_handle(a))
    launch.__name__ = f"launch {kernel.name}"
    return launch


__all__ = ["fp8_gemm", "fp8_gemm_launch", "fp8_shape_ok", "fp8_tolerance", "fp8_data", "e4m3_encode",
           "e4m3_decode", "quantize_rows", "quantize_blocks", "quantize_tensor", "kb_major", "from_kb_major",
           "dequantize_rows",
           "dequantize_blocks", "FP8_SIZES", "FP8_HIDDEN", "E4M3_MAX", "BLOCK"]

_integrity.record_problems(globals())
