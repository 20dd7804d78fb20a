"""Chapter 05, lesson 05 (FlashAttention-3 ideas): chapter 04's FA2 problem for a TMA + WGMMA,
warp-specialized attention kernel on Hopper, and its launch function. Targets from CURRICULUM.md.

* :data:`flash3` / :data:`flash3_causal` — ``attention.fa2`` (the same inputs, float64 reference,
  bf16 tolerance, NaN-poisoned output) with ``arch="sm_90a"``, chapter 04's sizes plus ones of many
  key tiles, and cuDNN's SDPA as the peer (the fastest attention torch ships for Hopper), timed at
  d 128, S 4096, B·H = 128: learner target 60%, nothing under 6%.
* :func:`flash3_launch` — ``launch(q, k, v, causal, o)`` of ``flash3<Cfg>`` kernels, one per head
  dim (the type's TILE_K): tensor maps of Q (B·H, Sq, d) and of K, V (B·Hkv, Sk, d) seen as 3-D, so
  a box past the end of one head's rows is zero-filled (grader.cuda.tma.tiled_rows_3d), boxes of 64
  columns (the 128-byte swizzle's span) × TILE_M or TILE_N rows; a persistent grid of one CTA per SM
  (never more than the ⌈Sq / TILE_M⌉ · H · B work units).
"""
from __future__ import annotations

import math

import numpy as np

from .. import integrity as _integrity
from .. import peers
from .attention import FA2_BENCH, FA2_GPU, FA2_GPU_HIDDEN, Attn, fa2

LOG2E = 1.4426950408889634

# chapter 04's sizes, plus many key tiles with a growing max (the rescale runs tile after tile),
# a causal ragged S over several 128-row blocks, and GQA over many tiles
FLASH3_GPU = FA2_GPU + [Attn(1, 2, 2000, 128, causal=True, kind="growing"), Attn(2, 2, 777, 64, Sk=3001),
                        Attn(1, 4, 1500, 128, Hkv=1, kind="growing")]
FLASH3_HIDDEN = FA2_GPU_HIDDEN + [Attn(1, 3, 2500, 64, causal=True, kind="growing"), Attn(2, 1, 129, 128, Sk=4097),
                                  Attn(1, 2, 3001, 128, causal=True, kind="large")]

_HINT = ("o[b, h, i] = Σ_j softmax_j(q[b, h, i] · k[b, h', j] / √d) · v[b, h', j], h' = h / (H / Hkv); causal: "
         "keys j ≤ i. Wrong only where a row's max grows along the keys (the 'growing' sizes): O and l must be "
         "rescaled by 2^(m_old − m_new) whenever the max changes. Wrong at ragged S: keys ≥ Sk must be masked "
         "(TMA reads them as zeros, and a zero score still counts). A launch that fails after about two "
         "seconds: a wait that never completed (course::mbar_wait_or_trap) — a full/empty parity, or the "
         "ping-pong turns (each consumer must hand its turn to the other one).")

flash3 = fa2.variant(
    name="FA3-style attention bf16",
    sizes=FLASH3_GPU, hidden_sizes=FLASH3_HIDDEN,
    hint=_HINT,
    bench_size=FA2_BENCH, peer=peers.sdpa("cudnn"), target=0.6, floor=0.06,
    arch="sm_90a",
)
flash3_causal = flash3.variant(name="FA3-style attention bf16 causal", bench_size=FA2_BENCH._replace(causal=True),
                               peer=peers.sdpa("cudnn", causal=True))


def flash3_launch(*kernels, swizzle: str = "128B", ctas: int | None = None, group: int | None = None):
    """``launch(q, k, v, causal, o)`` of persistent ``flash3<Cfg>`` kernels (one per head dim: the
    type's TILE_K). q (B, H, Sq, d), k and v (B, Hkv, Sk, d), o (B, H, Sq, d): bf16 bits in int16 torch
    tensors. The grid: one CTA per SM (``ctas`` overrides it), never more than the work units of
    TILE_M query rows of one head; the kernel loops over them, ``group`` heads at a time (default: one
    without a mask; causal, as many as keep their K and V within 16 MiB of L2)."""
    from ..cuda.module import _torch_stream_handle
    from .attention_launch import sm_count
    from ..cuda.tma import tiled_rows_3d

    by_d, maps = {}, {}
    for k in kernels:
        shape = k.launch_shape
        if shape is None or not (shape.tile_m and shape.tile_n and shape.tile_k):
            raise ValueError(f"{k.name}: its configuration type must state THREADS, SMEM_BYTES, TILE_M, TILE_N and "
                             "TILE_K (see grader/include/course.cuh)")
        by_d[shape.tile_k] = k

    def _map(x, rows):
        key = (int(x.data_ptr()), tuple(x.shape), rows)
        if key not in maps:
            if len(maps) > 64:
                maps.clear()
            maps[key] = tiled_rows_3d(x, (rows, 64), swizzle)
        return maps[key]

    def launch(q, k, v, causal, o):
        B, H, Sq, d = q.shape
        Hkv, Sk = k.shape[1], k.shape[2]
        if causal and Sq != Sk:
            raise ValueError("causal attention here needs as many queries as keys")
        if d not in by_d:
            raise ValueError(f"no kernel for head dimension {d}: compiled for {sorted(by_d)}")
        if H % max(Hkv, 1):
            raise ValueError(f"{H} query heads cannot share {Hkv} KV heads evenly")
        kern = by_d[d]
        if B * H * Sq == 0:
            return
        shape = kern.launch_shape
        q_map = _map(q, shape.tile_m)
        # no key: the kernel loads nothing and writes zeros; any valid map stands in for K and V
        k_map, v_map = (_map(k, shape.tile_n), _map(v, shape.tile_n)) if Sk else (q_map, q_map)
        units = -(-Sq // shape.tile_m) * H * B
        # non-causal: every unit is the same work, one head at a time keeps its K and V hottest in L2;
        # causal: groups of heads whose K and V fit in 16 MiB, so each CTA gets every block length
        # (H100, d 128, the kernel's first version: 90% → 89% of cuDNN non-causal with groups, 85.0 → 85.4% causal at S 4096,
        # 85 → 87% causal at S 16384; results/ch05/flash3_gpu_h100_2026-11-24_run3.log)
        heads = group or (max(1, min(B * H, (16 << 20) // max(1, 4 * Sk * d))) if causal else 1)
        grid = (min(units, ctas or sm_count(q.device.index or 0)),)     # persistent: one CTA per SM
        kern.launch(grid, q_map, k_map, v_map, o, np.int32(Sq), np.int32(Sk), np.int32(B), np.int32(H),
                    np.int32(Hkv), np.int32(heads), np.float32(LOG2E / math.sqrt(d)), np.int32(bool(causal)),
                    stream=_torch_stream_handle(q))
    launch.__name__ = "launch " + "/".join(k.name for k in kernels)
    return launch


__all__ = ["flash3", "flash3_causal", "flash3_launch", "FLASH3_GPU", "FLASH3_HIDDEN"]

_integrity.record_problems(globals())   # the fields checks rely on, before any learner code
