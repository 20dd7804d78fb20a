"""Candidate kernels for chapter 02's graded references (sum, softmax, RMSNorm), for the sweep
in perf.py (this folder). Each ``make_*`` returns launch(x, ..., out) with the lesson's signature.

Import grader first (it chooses GPU or simulator).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, int32, uint32, uint64

from grader import bf16
from grader.problems import reduce as P

FULL = 0xFFFFFFFF
LOWEST = float32(-3.4028234e38)        # the most negative float32: a max's start (no infinities)
LOG2E = float32(1.4426950408889634)


@cuda.jit(device=True, inline=True)
def warp_sum(v):
    for k in range(5):
        v += cuda.shfl_xor_sync(FULL, v, 16 >> k)
    return v


@cuda.jit(device=True, inline=True)
def warp_max(v):
    for k in range(5):
        v = max(v, cuda.shfl_xor_sync(FULL, v, 16 >> k))
    return v


def make_block_allreduce(threads):
    nwarps = threads // 32

    @cuda.jit(device=True, inline=True)
    def block_sum(v):
        s = cuda.shared.array(32, float32)
        lane, warp = cuda.threadIdx.x % 32, cuda.threadIdx.x // 32
        v = warp_sum(v)
        cuda.syncthreads()
        if lane == 0:
            s[warp] = v
        cuda.syncthreads()
        v = s[lane] if lane < nwarps else float32(0.0)
        return warp_sum(v)

    @cuda.jit(device=True, inline=True)
    def block_max(v):
        s = cuda.shared.array(32, float32)
        lane, warp = cuda.threadIdx.x % 32, cuda.threadIdx.x // 32
        v = warp_max(v)
        cuda.syncthreads()
        if lane == 0:
            s[warp] = v
        cuda.syncthreads()
        v = s[lane] if lane < nwarps else LOWEST
        return warp_max(v)

    return block_sum, block_max


@cuda.jit(device=True, inline=True)
def w_lo(w):          # uint64 word -> its low uint32 (elements 0, 1)
    return uint32(w & uint64(0xFFFFFFFF))


@cuda.jit(device=True, inline=True)
def w_hi(w):          # uint64 word -> its high uint32 (elements 2, 3)
    return uint32(w >> uint64(32))


@cuda.jit(device=True, inline=True)
def join(a, b):       # two uint32 -> one uint64 (a low)
    return uint64(a) | (uint64(b) << uint64(32))


# ------------------------------------------------------------------ sum
def make_sum(acc=4, blocks_per_sm=8, threads=256, zero_kernel=True, sms=132):
    blocks = blocks_per_sm * sms
    block_sum, _ = make_block_allreduce(threads)

    @cuda.jit
    def zero(out):
        if cuda.grid(1) < out.size:
            out[cuda.grid(1)] = 0.0

    if acc == 4:
        @cuda.jit
        def k(x, out):
            i = cuda.grid(1)
            stride = cuda.gridsize(1)
            n = x.size
            a0 = float32(0.0)
            a1 = float32(0.0)
            a2 = float32(0.0)
            a3 = float32(0.0)
            while i + 3 * stride < n:
                a0 += x[i]
                a1 += x[i + stride]
                a2 += x[i + 2 * stride]
                a3 += x[i + 3 * stride]
                i += 4 * stride
            while i < n:
                a0 += x[i]
                i += stride
            total = block_sum((a0 + a1) + (a2 + a3))
            if cuda.threadIdx.x == 0:
                cuda.atomic.add(out, 0, total)
    else:
        @cuda.jit
        def k(x, out):
            i = cuda.grid(1)
            stride = cuda.gridsize(1)
            n = x.size
            a0 = float32(0.0)
            a1 = float32(0.0)
            a2 = float32(0.0)
            a3 = float32(0.0)
            a4 = float32(0.0)
            a5 = float32(0.0)
            a6 = float32(0.0)
            a7 = float32(0.0)
            while i + 7 * stride < n:
                a0 += x[i]
                a1 += x[i + stride]
                a2 += x[i + 2 * stride]
                a3 += x[i + 3 * stride]
                a4 += x[i + 4 * stride]
                a5 += x[i + 5 * stride]
                a6 += x[i + 6 * stride]
                a7 += x[i + 7 * stride]
                i += 8 * stride
            while i < n:
                a0 += x[i]
                i += stride
            total = block_sum(((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)))
            if cuda.threadIdx.x == 0:
                cuda.atomic.add(out, 0, total)

    def launch(x, out):
        if zero_kernel:
            zero[1, 32](out)
        k[blocks, threads](x, out)

    launch.kernel = k
    return launch


def make_sum_lastblock(acc=8, blocks_per_sm=8, threads=256, sms=132):
    """One kernel: partial sums per block, the last block to finish adds them (no zeroing, no float atomics)."""
    blocks = blocks_per_sm * sms
    block_sum, _ = make_block_allreduce(threads)
    partials = cuda.device_array(blocks, np.float32)
    counter = cuda.to_device(np.zeros(1, np.uint32))

    @cuda.jit
    def k(x, out, partials, counter):
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        n = x.size
        a0 = float32(0.0)
        a1 = float32(0.0)
        a2 = float32(0.0)
        a3 = float32(0.0)
        a4 = float32(0.0)
        a5 = float32(0.0)
        a6 = float32(0.0)
        a7 = float32(0.0)
        while i + 7 * stride < n:
            a0 += x[i]
            a1 += x[i + stride]
            a2 += x[i + 2 * stride]
            a3 += x[i + 3 * stride]
            a4 += x[i + 4 * stride]
            a5 += x[i + 5 * stride]
            a6 += x[i + 6 * stride]
            a7 += x[i + 7 * stride]
            i += 8 * stride
        while i < n:
            a0 += x[i]
            i += stride
        total = block_sum(((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)))
        last = cuda.shared.array(1, int32)
        if cuda.threadIdx.x == 0:
            partials[cuda.blockIdx.x] = total
            cuda.threadfence()
            done = cuda.atomic.inc(counter, 0, uint32(cuda.gridDim.x - 1))   # wraps to 0: reset
            last[0] = done == cuda.gridDim.x - 1
        cuda.syncthreads()
        if last[0]:
            acc_ = float32(0.0)
            j = cuda.threadIdx.x
            while j < cuda.gridDim.x:
                acc_ += partials[j]
                j += cuda.blockDim.x
            t = block_sum(acc_)
            if cuda.threadIdx.x == 0:
                out[0] = t

    def launch(x, out):
        k[blocks, threads](x, out, partials, counter)

    return launch


# ------------------------------------------------------------------ softmax
def make_softmax_w32(words=16, threads=256, store_exp=True, fast=True):
    """Block per row, uint32 words in registers; max, then exp once (kept), then sum: one exp per element."""
    block_sum, block_max = make_block_allreduce(threads)
    ne = 2 * words if store_exp else 1

    @cuda.jit(fastmath=fast)
    def k(x2, y2):
        row, t, nw = cuda.blockIdx.x, cuda.threadIdx.x, x2.shape[1]
        w = cuda.local.array(words, uint32)
        for q in range(words):
            j = t + q * threads
            w[q] = x2[row, j] if j < nw else uint32(0)
        m = LOWEST
        for q in range(words):
            if t + q * threads < nw:
                m = max(m, max(bf16.lo(w[q]), bf16.hi(w[q])))
        m = block_max(m)
        e = cuda.local.array(ne, float32)
        s = float32(0.0)
        for q in range(words):
            if t + q * threads < nw:
                a = math.exp(bf16.lo(w[q]) - m)
                b = math.exp(bf16.hi(w[q]) - m)
                s += a + b
                if store_exp:
                    e[2 * q] = a
                    e[2 * q + 1] = b
        inv = float32(1.0) / block_sum(s)
        for q in range(words):
            j = t + q * threads
            if j < nw:
                if store_exp:
                    y2[row, j] = bf16.pack(e[2 * q] * inv, e[2 * q + 1] * inv)
                else:
                    y2[row, j] = bf16.pack(math.exp(bf16.lo(w[q]) - m) * inv,
                                           math.exp(bf16.hi(w[q]) - m) * inv)

    def launch(x, y):
        rows, cols = x.shape
        assert cols % 2 == 0 and cols // 2 <= words * threads
        k[rows, threads](x.view(np.uint32), y.view(np.uint32))

    launch.kernel = k
    return launch


def make_softmax_w64(words=8, threads=256, store_exp=True, fast=True, exp2=False, min_blocks=None):
    """Block per row, uint64 words (4 bf16) in registers; max, exp once, sum.
    exp2: exp(x - m) as exp2(x·log2e - m·log2e) (one FFMA and ex2.approx, no fastmath needed);
    min_blocks: launch bounds asking ptxas to fit that many blocks per SM."""
    block_sum, block_max = make_block_allreduce(threads)
    ne = 4 * words if store_exp else 1
    opts = {"fastmath": fast}
    if min_blocks:
        opts["launch_bounds"] = (threads, min_blocks)

    @cuda.jit(device=True, inline=True)
    def ex(v, m, ml):
        if exp2:
            return math.exp2(v * LOG2E - ml)
        return math.exp(v - m)

    @cuda.jit(**opts)
    def k(x4, y4):
        row, t, nw = cuda.blockIdx.x, cuda.threadIdx.x, x4.shape[1]
        w = cuda.local.array(words, uint64)
        for q in range(words):
            j = t + q * threads
            w[q] = x4[row, j] if j < nw else uint64(0)
        m = LOWEST
        for q in range(words):
            if t + q * threads < nw:
                a, b = w_lo(w[q]), w_hi(w[q])
                m = max(m, max(max(bf16.lo(a), bf16.hi(a)), max(bf16.lo(b), bf16.hi(b))))
        m = block_max(m)
        ml = m * LOG2E
        e = cuda.local.array(ne, float32)
        s = float32(0.0)
        for q in range(words):
            if t + q * threads < nw:
                a, b = w_lo(w[q]), w_hi(w[q])
                e0 = ex(bf16.lo(a), m, ml)
                e1 = ex(bf16.hi(a), m, ml)
                e2 = ex(bf16.lo(b), m, ml)
                e3 = ex(bf16.hi(b), m, ml)
                s += (e0 + e1) + (e2 + e3)
                if store_exp:
                    e[4 * q], e[4 * q + 1], e[4 * q + 2], e[4 * q + 3] = e0, e1, e2, e3
        inv = float32(1.0) / block_sum(s)
        for q in range(words):
            j = t + q * threads
            if j < nw:
                if store_exp:
                    y4[row, j] = join(bf16.pack(e[4 * q] * inv, e[4 * q + 1] * inv),
                                      bf16.pack(e[4 * q + 2] * inv, e[4 * q + 3] * inv))
                else:
                    a, b = w_lo(w[q]), w_hi(w[q])
                    y4[row, j] = join(bf16.pack(ex(bf16.lo(a), m, ml) * inv, ex(bf16.hi(a), m, ml) * inv),
                                      bf16.pack(ex(bf16.lo(b), m, ml) * inv, ex(bf16.hi(b), m, ml) * inv))

    def launch(x, y):
        rows, cols = x.shape
        assert cols % 4 == 0 and cols // 4 <= words * threads
        k[rows, threads](x.view(np.uint64), y.view(np.uint64))

    launch.kernel = k
    return launch


# ------------------------------------------------------------------ RMSNorm
def make_rms_w32(words=8, threads=256):
    block_sum, _ = make_block_allreduce(threads)

    @cuda.jit
    def k(x2, w2, y2):
        row, t, nw = cuda.blockIdx.x, cuda.threadIdx.x, x2.shape[1]
        c = cuda.local.array(words, uint32)
        for q in range(words):
            j = t + q * threads
            c[q] = x2[row, j] if j < nw else uint32(0)
        acc = float32(0.0)
        for q in range(words):
            a, b = bf16.lo(c[q]), bf16.hi(c[q])
            acc += a * a + b * b
        r = float32(1.0) / math.sqrt(block_sum(acc) / float32(2 * nw) + float32(P.RMS_EPS))
        for q in range(words):
            j = t + q * threads
            if j < nw:
                g = w2[j]
                y2[row, j] = bf16.pack(bf16.lo(c[q]) * r * bf16.lo(g), bf16.hi(c[q]) * r * bf16.hi(g))

    def launch(x, w, y):
        rows, cols = x.shape
        assert cols % 2 == 0 and cols // 2 <= words * threads
        k[rows, threads](x.view(np.uint32), w.view(np.uint32), y.view(np.uint32))

    launch.kernel = k
    return launch


def make_rms_w64(words=8, threads=128):
    """Block per row, uint64 words: 4 bf16 per load."""
    block_sum, _ = make_block_allreduce(threads)

    @cuda.jit
    def k(x4, w4, y4):
        row, t, nw = cuda.blockIdx.x, cuda.threadIdx.x, x4.shape[1]
        c = cuda.local.array(words, uint64)
        for q in range(words):
            j = t + q * threads
            c[q] = x4[row, j] if j < nw else uint64(0)
        acc = float32(0.0)
        for q in range(words):
            a, b = w_lo(c[q]), w_hi(c[q])
            x0, x1, x2_, x3 = bf16.lo(a), bf16.hi(a), bf16.lo(b), bf16.hi(b)
            acc += (x0 * x0 + x1 * x1) + (x2_ * x2_ + x3 * x3)
        r = float32(1.0) / math.sqrt(block_sum(acc) / float32(4 * nw) + float32(P.RMS_EPS))
        for q in range(words):
            j = t + q * threads
            if j < nw:
                g = w4[j]
                a, b, ga, gb = w_lo(c[q]), w_hi(c[q]), w_lo(g), w_hi(g)
                y4[row, j] = join(bf16.pack(bf16.lo(a) * r * bf16.lo(ga), bf16.hi(a) * r * bf16.hi(ga)),
                                  bf16.pack(bf16.lo(b) * r * bf16.lo(gb), bf16.hi(b) * r * bf16.hi(gb)))

    def launch(x, w, y):
        rows, cols = x.shape
        assert cols % 4 == 0 and cols // 4 <= words * threads
        k[rows, threads](x.view(np.uint64), w.view(np.uint64), y.view(np.uint64))

    launch.kernel = k
    return launch


def make_rms_warp(words=32, rows_per_block=4):
    """A warp per row, uint64 words: no barriers, only shuffles. Rows up to 4·32·words elements."""
    threads = 32 * rows_per_block

    @cuda.jit
    def k(x4, w4, y4):
        lane = cuda.threadIdx.x % 32
        row = cuda.blockIdx.x * rows_per_block + cuda.threadIdx.x // 32
        rows, nw = x4.shape
        if row < rows:
            c = cuda.local.array(words, uint64)
            for q in range(words):
                j = lane + 32 * q
                c[q] = x4[row, j] if j < nw else uint64(0)
            acc = float32(0.0)
            for q in range(words):
                a, b = w_lo(c[q]), w_hi(c[q])
                x0, x1, x2_, x3 = bf16.lo(a), bf16.hi(a), bf16.lo(b), bf16.hi(b)
                acc += (x0 * x0 + x1 * x1) + (x2_ * x2_ + x3 * x3)
            r = float32(1.0) / math.sqrt(warp_sum(acc) / float32(4 * nw) + float32(P.RMS_EPS))
            for q in range(words):
                j = lane + 32 * q
                if j < nw:
                    g = w4[j]
                    a, b, ga, gb = w_lo(c[q]), w_hi(c[q]), w_lo(g), w_hi(g)
                    y4[row, j] = join(bf16.pack(bf16.lo(a) * r * bf16.lo(ga), bf16.hi(a) * r * bf16.hi(ga)),
                                      bf16.pack(bf16.lo(b) * r * bf16.lo(gb), bf16.hi(b) * r * bf16.hi(gb)))

    def launch(x, w, y):
        rows, cols = x.shape
        assert cols % 4 == 0 and cols // 4 <= words * 32
        k[(rows + rows_per_block - 1) // rows_per_block, threads](x.view(np.uint64), w.view(np.uint64),
                                                                  y.view(np.uint64))

    launch.kernel = k
    return launch


def make_softmax_warp(words=16, rows_per_block=4, fast=True):
    """A warp per row for rows up to 4·32·words elements (2048 for words=16): shuffles only."""
    threads = 32 * rows_per_block

    @cuda.jit(fastmath=fast)
    def k(x4, y4):
        lane = cuda.threadIdx.x % 32
        row = cuda.blockIdx.x * rows_per_block + cuda.threadIdx.x // 32
        rows, nw = x4.shape
        if row < rows:
            w = cuda.local.array(words, uint64)
            for q in range(words):
                j = lane + 32 * q
                w[q] = x4[row, j] if j < nw else uint64(0)
            m = LOWEST
            for q in range(words):
                if lane + 32 * q < nw:
                    a, b = w_lo(w[q]), w_hi(w[q])
                    m = max(m, max(max(bf16.lo(a), bf16.hi(a)), max(bf16.lo(b), bf16.hi(b))))
            m = warp_max(m)
            s = float32(0.0)
            for q in range(words):
                if lane + 32 * q < nw:
                    a, b = w_lo(w[q]), w_hi(w[q])
                    s += (math.exp(bf16.lo(a) - m) + math.exp(bf16.hi(a) - m)) + \
                         (math.exp(bf16.lo(b) - m) + math.exp(bf16.hi(b) - m))
            inv = float32(1.0) / warp_sum(s)
            for q in range(words):
                j = lane + 32 * q
                if j < nw:
                    a, b = w_lo(w[q]), w_hi(w[q])
                    y4[row, j] = join(bf16.pack(math.exp(bf16.lo(a) - m) * inv, math.exp(bf16.hi(a) - m) * inv),
                                      bf16.pack(math.exp(bf16.lo(b) - m) * inv, math.exp(bf16.hi(b) - m) * inv))

    def launch(x, y):
        rows, cols = x.shape
        assert cols % 4 == 0 and cols // 4 <= words * 32
        k[(rows + rows_per_block - 1) // rows_per_block, threads](x.view(np.uint64), y.view(np.uint64))

    launch.kernel = k
    return launch
