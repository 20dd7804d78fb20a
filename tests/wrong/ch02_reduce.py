"""Wrong kernels for chapter 02 that the checks must catch (tests/test_ch02_reduce.py).

Each is a plausible mistake, kept beside the right answer so the check that
catches it stays honest. Launch signatures match the problems in
grader/problems/reduce.py.
"""
import math

import numpy as np
from numba import cuda, float32
from numba.types import float16

from grader import bf16

FULL = 0xFFFFFFFF
THREADS = 256


# ---------------------------------------------------------------- block sum: tree without barriers
@cuda.jit
def _tree_no_sync(x, sums):
    s = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if t < stride:
            s[t] += s[t + stride]
        stride //= 2                      # WRONG: no cuda.syncthreads() between the steps
    if t == 0:
        sums[cuda.blockIdx.x] = s[0]


def block_sum_missing_syncthreads(x, sums):
    _tree_no_sync[sums.size, THREADS](x, sums)


# ---------------------------------------------------------------- sum: shuffles gone wrong
@cuda.jit
def _zero(out):
    if cuda.grid(1) < out.size:
        out[cuda.grid(1)] = 0.0


@cuda.jit
def _sum_half_mask(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.size else float32(0.0)
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0x0000FFFF, v, offset)   # WRONG: the mask leaves out lanes 16-31, which call too
        offset //= 2
    if cuda.laneid == 0:
        cuda.atomic.add(out, 0, v)


def sum_wrong_mask(x, out):
    _zero[1, 32](out)
    _sum_half_mask[(x.size + 255) // 256, 256](x, out)


@cuda.jit
def _sum_width16(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.size else float32(0.0)
    offset = 8                                           # WRONG: starts at 8, as if the warp were 16 lanes wide
    while offset > 0:
        v += cuda.shfl_down_sync(FULL, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        cuda.atomic.add(out, 0, v)                       # lanes 16-31's half-warp sum is lost


def sum_wrong_width(x, out):
    _zero[1, 32](out)
    _sum_width16[(x.size + 255) // 256, 256](x, out)


@cuda.jit(device=True)
def _block_sum(v):
    s = cuda.shared.array(32, float32)
    lane, warp = cuda.threadIdx.x % 32, cuda.threadIdx.x // 32
    for k in range(5):
        v += cuda.shfl_xor_sync(FULL, v, 16 >> k)
    if lane == 0:
        s[warp] = v
    cuda.syncthreads()
    v = s[lane] if lane < cuda.blockDim.x // 32 else float32(0.0)
    for k in range(5):
        v += cuda.shfl_xor_sync(FULL, v, 16 >> k)
    return v


@cuda.jit
def _partials(x, partials):
    i = cuda.grid(1)
    total = _block_sum(x[i] if i < x.size else float32(0.0))
    if cuda.threadIdx.x == 0:
        partials[cuda.blockIdx.x] = total


@cuda.jit
def _finish(partials, out):
    acc = float32(0.0)
    j = cuda.threadIdx.x
    while j < partials.size:
        acc += partials[j]
        j += cuda.blockDim.x
    total = _block_sum(acc)
    if cuda.threadIdx.x == 0:
        out[0] = total


def sum_drops_last_block(x, out):
    blocks = max(1, x.size // THREADS)                   # WRONG: rounds down, the partial last block is dropped
    partials = cuda.device_array(blocks, np.float32)
    _partials[blocks, THREADS](x, partials)
    _finish[1, 64](partials, out)


# ---------------------------------------------------------------- softmax without the max
@cuda.jit
def _softmax_no_max(x, y):
    row, t, cols = cuda.blockIdx.x, cuda.threadIdx.x, x.shape[1]
    acc = float32(0.0)
    for j in range(t, cols, THREADS):
        acc += math.exp(bf16.to_float(x[row, j]))        # WRONG: exp(x) overflows for x > 88.7
    total = _block_sum(acc)
    for j in range(t, cols, THREADS):
        y[row, j] = bf16.from_float(math.exp(bf16.to_float(x[row, j])) / total)


def softmax_without_max(x, y):
    _softmax_no_max[x.shape[0], THREADS](x, y)


# ---------------------------------------------------------------- RMSNorm accumulating in float16
@cuda.jit
def _rms_fp16(x, w, y):
    row, t, cols = cuda.blockIdx.x, cuda.threadIdx.x, x.shape[1]
    acc = float16(0.0)
    for j in range(t, cols, 32):                          # one warp per row: long partial sums
        v = float16(bf16.to_float(x[row, j]))
        acc = float16(acc + v * v)                        # WRONG: float16 accumulator (max 65504, 11 bits)
    total = float32(acc)
    for k in range(5):
        total += cuda.shfl_xor_sync(FULL, total, 16 >> k)
    r = float32(1.0) / math.sqrt(total / cols + float32(1e-6))
    for j in range(t, cols, 32):
        y[row, j] = bf16.from_float(bf16.to_float(x[row, j]) * r * bf16.to_float(w[j]))


def rmsnorm_fp16_accumulation(x, w, y):
    _rms_fp16[x.shape[0], 32](x, w, y)
