"""The course's naive attention: three Numba kernels and an S × S buffer (lesson 04.01's reference).

It is lesson 04.02's peer — flash attention on CUDA cores must beat it in the same run — so the
grader keeps this trusted copy instead of timing the learner's own lesson-01 kernels:

    scores   s[b, h, i, j] = q[b, h, i] · k[b, h, j] / √d        one thread per score
    softmax  p[b, h, i, :] = softmax(s[b, h, i, :]) in place       one warp per row; causal: j > i → 0
    pv       o[b, h, i, c] = Σ_j p[b, h, i, j] · v[b, h, j, c]      one thread per output element

All fp32. The S × S buffer is what the lesson measures: 4·B·H·S² bytes, allocated by
:func:`launch` at every call (and once, outside the timed region, by the peer). Kernels are
compiled at their first launch.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

FULL = 0xFFFFFFFF
TILE = 16          # 16 × 16 threads per block for the score and P·V kernels
ROWS = 4           # rows (warps) per block of the softmax kernel


# Module-level kernels (Numba compiles each at its first launch; in the simulator the kernels'
# global `cuda` is what the simulator swaps in while they run). grader is imported first, so
# Numba's CUDA target (or the simulator) is already chosen when this module imports numba.cuda.
@cuda.jit
def scores(q, k, s, scale):
    # q, k (B, H, S, d) fp32; s (B, H, S, S) fp32. x: key j (coalesced stores), y: query i
    j, i = cuda.grid(2)
    bh = cuda.blockIdx.z
    H, S, d = q.shape[1], q.shape[2], q.shape[3]
    if i < S and j < S:
        b, h = bh // H, bh % H
        acc = float32(0.0)
        for c in range(d):
            acc += q[b, h, i, c] * k[b, h, j, c]
        s[b, h, i, j] = acc * scale


@cuda.jit
def softmax_rows(s, causal):
    # one warp per row (b, h, i) of s, in place; a causal row keeps keys j <= i, the rest -> 0
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * ROWS + cuda.threadIdx.x // 32
    B, H, S = s.shape[0], s.shape[1], s.shape[2]
    if row >= B * H * S:
        return
    b, h, i = row // (H * S), (row // S) % H, row % S
    n = i + 1 if causal else S
    m = float32(-math.inf)
    for j in range(lane, n, 32):
        m = max(m, s[b, h, i, j])
    for k in range(5):
        m = max(m, cuda.shfl_xor_sync(FULL, m, 16 >> k))
    total = float32(0.0)
    for j in range(lane, n, 32):
        total += math.exp(s[b, h, i, j] - m)
    for k in range(5):
        total += cuda.shfl_xor_sync(FULL, total, 16 >> k)
    inv = float32(1.0) / total
    for j in range(lane, S, 32):
        s[b, h, i, j] = math.exp(s[b, h, i, j] - m) * inv if j < n else float32(0.0)


@cuda.jit
def pv(p, v, o):
    # o[b, h, i, c] = Σ_j p[b, h, i, j] · v[b, h, j, c]. x: column c (coalesced), y: query i
    c, i = cuda.grid(2)
    bh = cuda.blockIdx.z
    H, S, d = v.shape[1], v.shape[2], v.shape[3]
    if i < S and c < d:
        b, h = bh // H, bh % H
        acc = float32(0.0)
        for j in range(S):
            acc += p[b, h, i, j] * v[b, h, j, c]
        o[b, h, i, c] = acc


def run(q, k, v, causal, o, s) -> None:
    """Attention of q, k, v (B, H, S, d) into o through the (B, H, S, S) fp32 buffer ``s``."""
    B, H, S, d = q.shape
    if B * H * S == 0:
        return
    scale = np.float32(1.0 / math.sqrt(d))
    scores[((S + TILE - 1) // TILE, (S + TILE - 1) // TILE, B * H), (TILE, TILE)](q, k, s, scale)
    softmax_rows[(B * H * S + ROWS - 1) // ROWS, 32 * ROWS](s, bool(causal))
    pv[((d + TILE - 1) // TILE, (S + TILE - 1) // TILE, B * H), (TILE, TILE)](s, v, o)


def launch(q, k, v, causal, o) -> None:
    """The lesson-01 launch function: allocates the S × S buffer, then the three kernels."""
    B, H, S, _ = q.shape
    run(q, k, v, causal, o, cuda.device_array((B, H, S, S), np.float32))


def prepare_peer(ctx):
    """A peer's prepare (grader.peers): the buffers outside the timed region, three launches in it."""
    q, k, v, causal = (ctx.arrays[n] for n in ("q", "k", "v", "causal"))
    q, k, v = (cuda.as_cuda_array(x) if not hasattr(x, "copy_to_host") else x for x in (q, k, v))
    B, H, S, d = q.shape
    s = cuda.device_array((B, H, S, S), np.float32)
    o = cuda.device_array((B, H, S, d), np.float32)
    return lambda: run(q, k, v, causal, o, s)


__all__ = ["scores", "softmax_rows", "pv", "run", "launch", "prepare_peer"]
