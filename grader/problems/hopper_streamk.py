"""Chapter 05, lesson 04 (schedules): a persistent tile scheduler, Stream-K for the last wave, and a
fused epilogue, on 05.03's warp-specialized Hopper GEMM (grader/include/gemm_sm90.cuh).

* :func:`streamk_plan` — how many tiles a data-parallel + Stream-K launch computes whole: every
  full wave of the persistent grid, and the last wave too unless it is less than half full; the
  tiles left over are split along K over every CTA.
* :data:`streamk_gemm` — 05.03's bf16 GEMM (``hopper.ws_gemm``: same reference and tolerance, cuBLAS
  as the peer) timed at :data:`WAVE_SHAPE`, a shape whose 128 × 256 tiles fill 132 SMs once and
  then 4 more: a data-parallel kernel runs two waves for 1.03 waves of work. Its sizes add shapes
  whose split tiles are shared by dozens of CTAs. The launch allocates a workspace (one fp32 tile
  and one flag per CTA), bounded by ``max_scratch_bytes``: a split-K that keeps an fp32 copy of C
  per split fails it.
* :func:`streamk_gemm_launch` — launches an ``sk_gemm<Cfg>`` kernel ``(a_map, b_map, c_map, bias,
  partials, counts, M, N, K, dp_tiles)`` on a persistent grid of one CTA per SM.
* :data:`fused_gemm` — C = GELU(A·B + bias) in bf16 (GELU's tanh form), bias (N,) bf16; its peer
  is cuBLAS followed by torch's bias add and GELU, timed as one call (:func:`grader.peers.gemm_bias_gelu`).
  :func:`fused_gemm_launch` launches the same kernel with every tile whole.
"""
from __future__ import annotations

import math

import numpy as np

from .. import integrity as _integrity
from .. import peers
from ..formats import BF16, bf16_to_f64, f32_to_bf16
from ..problem import Problem
from .gemm import Shape, _bf16_inputs, bf16_output_tolerance, flops
from .hopper import WS_HIDDEN, WS_SIZES, _map_cache, gemm_launch_shape, require_tma_gemm, ws_gemm

SMS_AT_MOST = 160                     # the workspace bound allows a persistent grid of up to 160 CTAs
TILE = (128, 256)
# 34 × 4 = 136 tiles of 128 × 256 = 132 + 4 on an H100 or H200 (132 SMs); K long, so a tile is long
# (256 k steps, about 160 µs) and the second wave's 4 tiles cost as much as the first's 132.
WAVE_SHAPE = Shape(4352, 1024, 16384)
# 18 × 8 = 144 tiles = 132 + 12, K = 8192: checked (a visible size), and timed in the lesson's text
WAVE_SHAPE_2 = Shape(2304, 2048, 8192)


def streamk_plan(tiles: int, k_tiles: int, ctas: int, split: str = "auto") -> int:
    """The tiles computed whole (data-parallel) by a grid of ``ctas`` CTAs; the others, never more
    than ``ctas`` (the workspace's slots), are split along K. ``split``: "auto" (split the last wave
    when it is less than half full), "tail" (always split the last wave), "all" (Stream-K over the
    last ``ctas`` tiles: every tile when there are fewer), "none" (data-parallel only)."""
    full, tail = divmod(tiles, ctas)
    if split == "none" or tail == 0 or k_tiles <= 1:
        return tiles
    if split == "all":
        return max(tiles - ctas, 0)
    if split == "auto" and 2 * tail >= ctas:
        return tiles
    if split not in ("auto", "tail"):
        raise ValueError("split is 'auto', 'tail', 'all' or 'none'")
    return full * ctas


def streamk_scratch_bytes(s=None) -> int:
    """One fp32 128 × 256 tile and one int32 count per CTA of a persistent grid of up to 160 CTAs
    (20 MiB, whatever the shape): a split-K with an fp32 copy of C per split needs more as soon as
    C is larger than a few tiles."""
    return SMS_AT_MOST * (TILE[0] * TILE[1] * 4 + 4)


_HINT = ("C[m, n] = sum over k of A[m, k]·B[k, n], all row-major. Wrong only on some tiles, or from run "
         "to run: the tiles split along K. Every iteration of the split tiles must lie in exactly one "
         "CTA's range (range_begin(gridDim.x) must be all of them); a later piece adds into the tile's "
         "slot before it counts itself (fence, barrier, release); the CTA that holds a tile's first k step "
         "waits until the count reaches the number of later CTAs whose range starts inside the tile "
         "(empty ranges do not count), then leaves the slot and the count at zero. A launch that fails "
         "after about two seconds: a count that never came (wait_flag_or_trap).")

# 05.03's sizes, plus: a wave-quantized shape (a data-parallel first wave, then 12 tiles each split
# over 11 CTAs); one tile of 129 k steps and two tiles of 160 (each split over dozens of CTAs, some
# ranges spanning two tiles); a ragged K whose last, partial k tile ends a range.
STREAMK_SIZES = WS_SIZES + [WAVE_SHAPE_2, Shape(120, 200, 8200), Shape(300, 264, 10240)]
STREAMK_HIDDEN = WS_HIDDEN + [Shape(2200, 2000, 4104), Shape(136, 520, 9000)]

streamk_gemm = ws_gemm.variant(
    name="stream-k gemm bf16",
    sizes=STREAMK_SIZES, hidden_sizes=STREAMK_HIDDEN,
    hint=_HINT,
    bench_size=WAVE_SHAPE,
    target=0.60,
    floor=0.30,                      # half of what a data-parallel kernel reaches here (66%: two waves for 1.03)
    max_scratch_bytes=streamk_scratch_bytes,
)


# ---------------------------------------------------------------- the launch
_workspaces: dict = {}


def _workspace(ctas: int):
    """(partials, counts) device addresses for up to ``ctas`` split tiles: one fp32 tile and one int32
    count each, zeros, allocated once per process through Numba (counted by grader.memory on the
    launch that allocates them; the arrays are kept here). Each launch leaves them at zero again:
    the CTA that finishes a split tile clears its slot and its count."""
    if ctas not in _workspaces:
        from numba import cuda

        partials = cuda.to_device(np.zeros(ctas * TILE[0] * TILE[1], dtype=np.float32))
        counts = cuda.to_device(np.zeros(ctas, dtype=np.int32))
        _workspaces[ctas] = (partials, counts, partials.device_ctypes_pointer.value,
                             counts.device_ctypes_pointer.value)
    return _workspaces[ctas][2:]


def streamk_gemm_launch(kernel, split: str = "auto", ctas: int | None = None):
    """``launch(a, b, c)`` (or ``launch(a, b, bias, c)`` when the kernel's epilogue reads a bias) of
    an ``sk_gemm<Cfg>`` kernel: A's map with boxes TILE_M × 64, B's and C's 64 × 64, all 128-byte
    swizzled; one CTA per SM (``ctas`` overrides); :func:`streamk_plan` with ``split`` decides which
    tiles are split, and the workspace is allocated when some are."""
    from ..cuda.module import _torch_stream_handle

    _map = _map_cache()
    shape = gemm_launch_shape(kernel)
    if (shape.tile_m, shape.tile_n) != TILE:
        raise ValueError(f"{kernel.name}: the workspace holds {TILE[0]} × {TILE[1]} tiles")
    a_box, b_box, c_box = (shape.tile_m, shape.tile_k), (shape.tile_k, 64), (64, 64)
    sms: list = []

    def launch(a, b, *rest):
        *bias, c = rest
        bias = bias[0] if bias else None
        M, K = a.shape
        N = b.shape[1]
        if M == 0 or N == 0:
            return
        require_tma_gemm(M, N, K)
        if not sms:
            from .. import device

            sms.append(min(ctas or device.info().sm_count, SMS_AT_MOST))
        tiles_m, tiles_n = shape.tiles(M, N)
        tiles, k_tiles = tiles_m * tiles_n, -(-K // shape.tile_k)
        dp = streamk_plan(tiles, k_tiles, sms[0], split)
        grid = sms[0] if dp < tiles else min(sms[0], tiles)
        partials, counts = _workspace(sms[0]) if dp < tiles else (0, 0)    # addresses: no conversion per launch
        kernel.launch((grid,), _map(a, a_box, "128B"), _map(b, b_box, "128B"), _map(c, c_box, "128B"),
                      bias, partials, counts, np.int32(M), np.int32(N), np.int32(K), np.int32(dp),
                      stream=_torch_stream_handle(a))
    launch.__name__ = f"launch {kernel.name}"
    return launch


# ---------------------------------------------------------------- the fused epilogue
GELU_C = math.sqrt(2 / math.pi)


def gelu_tanh(x):
    """GELU's tanh form (GPT-2's; torch's ``gelu(x, approximate="tanh")``), in the dtype of x."""
    return 0.5 * x * (1 + np.tanh(GELU_C * (x + 0.044715 * x ** 3)))


def _fused_inputs(rng, s: Shape) -> dict:
    inputs = _bf16_inputs(rng, s)
    # a bias of the size of C's elements (rms sqrt(K/9)), so it moves GELU's input by as much as A·B
    inputs["bias"] = f32_to_bf16(rng.uniform(-1, 1, s.N).astype(np.float32) * np.float32(math.sqrt(s.K / 3)))
    return inputs


def _fused_reference(a, b, bias) -> dict:
    return {"c": gelu_tanh(bf16_to_f64(a) @ bf16_to_f64(b) + bf16_to_f64(bias)[None, :])}


def fused_tolerance(s: Shape, dtype=None) -> tuple:
    """GELU's slope is at most 1.13, so the GEMM's error (bf16_output_tolerance) passes through about
    unchanged; twice its atol for the bias's bf16 sum and the fast tanh (2^-11 relative)."""
    rtol, atol = bf16_output_tolerance(s)
    return (rtol, 2 * atol)


FUSED_SIZES = [Shape(128, 256, 64), Shape(1000, 1032, 1016), Shape(1, 768, 512), Shape(640, 8, 320),
               Shape(200, 136, 8200), Shape(2304, 4104, 256)]
FUSED_HIDDEN = [Shape(1, 8, 8), Shape(999, 1000, 1000), Shape(255, 264, 8192), Shape(3000, 4104, 520)]

fused_gemm = Problem(
    name="gemm + bias + gelu bf16",
    make_inputs=_fused_inputs,
    outputs=lambda s, inputs: {"c": ((s.M, s.N), BF16)},
    reference=_fused_reference,
    sizes=FUSED_SIZES, hidden_sizes=FUSED_HIDDEN,
    tolerance=fused_tolerance,
    hint=("C[m, n] = GELU(sum over k of A[m, k]·B[k, n] + bias[n]) with GELU(x) = 0.5·x·(1 + tanh(√(2/π)·"
          "(x + 0.044715·x³))). Wrong only in some columns: the bias of column n, not of the element's "
          "position in the tile. Wrong everywhere by a smooth factor: the GELU's constants."),
    bytes_moved=lambda s: 2 * (s.M * s.K + s.K * s.N + s.M * s.N + s.N), flops=flops,
    bench_size=Shape(4096, 4096, 4096), peer=peers.gemm_bias_gelu(),
    target=0.60, floor=0.06, library_free=True,
    simulator=False, arch="sm_90a", arrays="torch",
)


def fused_gemm_launch(kernel, ctas: int | None = None):
    """``launch(a, b, bias, c)`` of an ``sk_gemm<Cfg>`` kernel whose epilogue reads the bias: every
    tile whole (a data-parallel persistent grid; no workspace)."""
    return streamk_gemm_launch(kernel, split="none", ctas=ctas)


__all__ = ["streamk_plan", "streamk_scratch_bytes", "streamk_gemm", "streamk_gemm_launch", "fused_gemm",
           "fused_gemm_launch", "gelu_tanh", "fused_tolerance", "WAVE_SHAPE", "WAVE_SHAPE_2", "STREAMK_SIZES", "STREAMK_HIDDEN",
           "FUSED_SIZES", "FUSED_HIDDEN", "TILE"]

_integrity.record_problems(globals())
