"""Wrong kernels for chapter 02 that the checks must catch (tests/test_ch02_reduce.py).

Each is a plausible mistake, kept beside the right answer so the check that
catches it stays honest. Launch signatures match the problems in
grader/problems/reduce.py.
"""
import functools
import math

import numpy as np
from numba import cuda, float32
from numba.types import float16

from grader import bf16
from tests.wrong import lesson_variant

FULL = 0xFFFFFFFF
THREADS = 256


# ---------------------------------------------------------------- block sum: tree without barriers
@functools.cache
def _tree_no_sync():
    """Lesson 02.01's v3 (sequential addressing) without the barrier between the tree's steps."""
    ns = lesson_variant("02_reduce", "01_atomics_and_trees.ipynb", "v3_sequential",
                        [("            s[t] += s[t + stride]\n        cuda.syncthreads()\n",
                          "            s[t] += s[t + stride]\n")],       # WRONG: no barrier between the steps
                        before=("setup", "v1_atomic"))
    return ns["launch_block_sum"]


def block_sum_missing_syncthreads(x, sums):
    _tree_no_sync()(x, sums)


# ---------------------------------------------------------------- sum: shuffles gone wrong
@functools.cache
def _warp_sum_with(old: str, new: str):
    """launch_v1 of lesson 02.02 (a warp's shuffle sum, one atomic per warp) with one line changed."""
    return lesson_variant("02_reduce", "02_warps.ipynb", "v1_warp", [(old, new)])["launch_v1"]


def sum_wrong_mask(x, out):
    # WRONG: the mask leaves out lanes 16-31, which call too
    _warp_sum_with("cuda.shfl_down_sync(FULL, v, offset)", "cuda.shfl_down_sync(0x0000FFFF, v, offset)")(x, out)


def sum_wrong_width(x, out):
    # WRONG: starts at 8, as if the warp were 16 lanes wide: lanes 16-31's half-warp sum is lost
    _warp_sum_with("    offset = 16\n", "    offset = 8\n")(x, out)


# every thread gets its block's total: the lesson's own helper (02.04's given cell), not itself a mistake
_block_sum = lesson_variant("02_reduce", "04_norms.ipynb", "given", [])["block_allreduce_sum"]


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
