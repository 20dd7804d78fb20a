"""Candidate kernels for chapter 01's references (saxpy, transpose, bias+GELU), before they go into
the lessons. Plain Numba, no grader import, so `cuda.compile_ptx` can count instructions on a machine
without a GPU (perf01_variants.py and perf01_gelu_rows.py in this folder time them on one).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, uint32, uint64


def cdiv(a, b):
    return (a + b - 1) // b


# ------------------------------------------------------------------ saxpy
def make_saxpy_chunk(K):
    """Grid-stride over chunks: on each trip a block covers K * blockDim consecutive elements,
    thread t takes elements t, t + blockDim, ... (K loads of x and K of y in flight)."""

    if K == 4:
        @cuda.jit
        def k(a, x, y, z):
            n = z.size
            t = cuda.blockDim.x
            i = cuda.blockIdx.x * 4 * t + cuda.threadIdx.x
            step = cuda.gridDim.x * 4 * t
            while i + 3 * t < n:
                x0, x1, x2, x3 = x[i], x[i + t], x[i + 2 * t], x[i + 3 * t]
                y0, y1, y2, y3 = y[i], y[i + t], y[i + 2 * t], y[i + 3 * t]
                z[i] = a * x0 + y0
                z[i + t] = a * x1 + y1
                z[i + 2 * t] = a * x2 + y2
                z[i + 3 * t] = a * x3 + y3
                i += step
            for j in range(i, min(i + 4 * t, n), t):     # the last, partial chunk
                z[j] = a * x[j] + y[j]
    else:
        @cuda.jit
        def k(a, x, y, z):
            n = z.size
            t = cuda.blockDim.x
            i = cuda.blockIdx.x * 8 * t + cuda.threadIdx.x
            step = cuda.gridDim.x * 8 * t
            while i + 7 * t < n:
                x0, x1, x2, x3 = x[i], x[i + t], x[i + 2 * t], x[i + 3 * t]
                x4, x5, x6, x7 = x[i + 4 * t], x[i + 5 * t], x[i + 6 * t], x[i + 7 * t]
                y0, y1, y2, y3 = y[i], y[i + t], y[i + 2 * t], y[i + 3 * t]
                y4, y5, y6, y7 = y[i + 4 * t], y[i + 5 * t], y[i + 6 * t], y[i + 7 * t]
                z[i] = a * x0 + y0
                z[i + t] = a * x1 + y1
                z[i + 2 * t] = a * x2 + y2
                z[i + 3 * t] = a * x3 + y3
                z[i + 4 * t] = a * x4 + y4
                z[i + 5 * t] = a * x5 + y5
                z[i + 6 * t] = a * x6 + y6
                z[i + 7 * t] = a * x7 + y7
                i += step
            for j in range(i, min(i + 8 * t, n), t):
                z[j] = a * x[j] + y[j]
    return k


def saxpy_launcher(kernel, K, sms, waves=1):
    """waves: blocks = waves × one full wave (2048 threads per SM); 0 = no cap (one chunk per block)."""
    def launch(a, x, y, z, threads=256):
        blocks = cdiv(z.size, K * threads)
        if waves:
            blocks = min(blocks, waves * (2048 // threads) * sms)
        kernel[max(blocks, 1), threads](a, x, y, z)
    return launch


# ------------------------------------------------------------------ transpose
def make_transpose_fast(TILE=64, ROWS=4, PAD=1):
    """Tiled transpose; whole tiles (the block-uniform test) run without per-element guards."""
    TILE_SHAPE = (TILE, TILE + PAD)

    @cuda.jit
    def kernel(a, t):
        tile = cuda.shared.array(TILE_SHAPE, float32)
        R, C = a.shape
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        r0 = cuda.blockIdx.y * TILE
        c0 = cuda.blockIdx.x * TILE
        if r0 + TILE <= R and c0 + TILE <= C:          # a whole tile: no guards
            for dr in range(0, TILE, ROWS):
                for dc in range(0, TILE, 32):
                    tile[ty + dr, tx + dc] = a[r0 + ty + dr, c0 + tx + dc]
            cuda.syncthreads()
            for dr in range(0, TILE, ROWS):
                for dc in range(0, TILE, 32):
                    t[c0 + ty + dr, r0 + tx + dc] = tile[tx + dc, ty + dr]
        else:
            for dr in range(0, TILE, ROWS):
                for dc in range(0, TILE, 32):
                    r, c = r0 + ty + dr, c0 + tx + dc
                    if r < R and c < C:
                        tile[ty + dr, tx + dc] = a[r, c]
            cuda.syncthreads()
            for dr in range(0, TILE, ROWS):
                for dc in range(0, TILE, 32):
                    r, c = c0 + ty + dr, r0 + tx + dc
                    if r < C and c < R:
                        t[r, c] = tile[tx + dc, ty + dr]

    def launch(a, t):
        R, C = a.shape
        kernel[(cdiv(C, TILE), cdiv(R, TILE)), (32, ROWS)](a, t)

    launch.kernel = kernel
    return launch


def make_transpose_words(TILE=64, ROWS=4, PAD=1):
    """Whole tiles move 8-byte words (two float32 side by side) through a uint32 tile; partial tiles
    and odd shapes fall back to the float32 kernel with guards. TILE: a multiple of 64."""
    TILE_SHAPE = (TILE, TILE + PAD)
    HALF = TILE // 2
    fallback = make_transpose_fast(TILE, ROWS, PAD)

    @cuda.jit
    def kernel(a, t, a2, t2):
        # a: (R, C) float32, t: (C, R) float32; a2 = a as (R, C/2) uint64, t2 = t as (C, R/2) uint64
        tile = cuda.shared.array(TILE_SHAPE, uint32)
        ftile = cuda.shared.array(TILE_SHAPE, float32)
        R, C = a.shape
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        r0 = cuda.blockIdx.y * TILE
        c0 = cuda.blockIdx.x * TILE
        if r0 + TILE <= R and c0 + TILE <= C:
            for dr in range(0, TILE, ROWS):
                for dc in range(0, HALF, 32):
                    w = a2[r0 + ty + dr, c0 // 2 + tx + dc]
                    tile[ty + dr, 2 * (tx + dc)] = uint32(w & 0xFFFFFFFF)
                    tile[ty + dr, 2 * (tx + dc) + 1] = uint32(w >> 32)
            cuda.syncthreads()
            for dr in range(0, TILE, ROWS):
                for dc in range(0, HALF, 32):
                    i = 2 * (tx + dc)
                    j = ty + dr
                    t2[c0 + j, r0 // 2 + tx + dc] = uint64(tile[i, j]) | (uint64(tile[i + 1, j]) << uint64(32))
        else:
            for dr in range(0, TILE, ROWS):
                for dc in range(0, TILE, 32):
                    r, c = r0 + ty + dr, c0 + tx + dc
                    if r < R and c < C:
                        ftile[ty + dr, tx + dc] = a[r, c]
            cuda.syncthreads()
            for dr in range(0, TILE, ROWS):
                for dc in range(0, TILE, 32):
                    r, c = c0 + ty + dr, r0 + tx + dc
                    if r < C and c < R:
                        t[r, c] = ftile[tx + dc, ty + dr]

    def launch(a, t):
        R, C = a.shape
        if R % 2 or C % 2:
            return fallback(a, t)
        kernel[(cdiv(C, TILE), cdiv(R, TILE)), (32, ROWS)](a, t, a.view(np.uint64), t.view(np.uint64))

    launch.kernel = kernel
    return launch


# ------------------------------------------------------------------ bias + GELU
A = np.float32(-2 * math.sqrt(2 / math.pi))
B = np.float32(-2 * math.sqrt(2 / math.pi) * 0.044715)
ONE = np.float32(1.0)
EXP_MAX = np.float32(80.0)


@cuda.jit(device=True, inline=True)
def gelu(v):
    return v / (ONE + math.exp(min(v * (A + B * v * v), EXP_MAX)))


@cuda.jit(device=True, inline=True)
def round_bf16_hi(f):
    # float32 -> uint32 whose HIGH half is f rounded to bf16 (nearest, ties to even); low half junk
    b = float32(f).view(np.uint32)
    return uint32(b + uint32(0x7FFF) + ((b >> uint32(16)) & uint32(1)))


@cuda.jit(device=True, inline=True)
def act_pair(p, b_lo, b_hi):
    # p: uint32 holding two bf16 (lo, hi) -> uint32 holding gelu(lo + b_lo), gelu(hi + b_hi) as bf16
    lo = gelu(uint32(p << uint32(16)).view(np.float32) + b_lo)
    hi = gelu(uint32(p & uint32(0xFFFF0000)).view(np.float32) + b_hi)
    return (round_bf16_hi(lo) >> uint32(16)) | (round_bf16_hi(hi) & uint32(0xFFFF0000))


@cuda.jit(device=True, inline=True)
def act_word(w, b0, b1, b2, b3):
    lo = act_pair(uint32(w & uint64(0xFFFFFFFF)), b0, b1)
    hi = act_pair(uint32(w >> uint64(32)), b2, b3)
    return uint64(lo) | (uint64(hi) << uint64(32))


@cuda.jit(device=True, inline=True)
def bias4(bw):
    lo = uint32(bw & uint64(0xFFFFFFFF))
    hi = uint32(bw >> uint64(32))
    return (uint32(lo << uint32(16)).view(np.float32), uint32(lo & uint32(0xFFFF0000)).view(np.float32),
            uint32(hi << uint32(16)).view(np.float32), uint32(hi & uint32(0xFFFF0000)).view(np.float32))


@cuda.jit(fastmath=True)
def gelu_words2(x, bias, y):
    m, wn = x.shape
    wc = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if wc < wn:
        b0, b1, b2, b3 = bias4(bias[wc])
        step = cuda.gridDim.y
        for r in range(cuda.blockIdx.y, m, 2 * step):
            w0 = x[r, wc]
            second = r + step < m
            w1 = x[r + step, wc] if second else w0
            y[r, wc] = act_word(w0, b0, b1, b2, b3)
            if second:
                y[r + step, wc] = act_word(w1, b0, b1, b2, b3)


@cuda.jit(fastmath=True)
def gelu_words4(x, bias, y):
    m, wn = x.shape
    wc = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if wc < wn:
        b0, b1, b2, b3 = bias4(bias[wc])
        step = cuda.gridDim.y
        r = cuda.blockIdx.y
        while r + 3 * step < m:                  # four rows per trip: four loads in flight
            w0 = x[r, wc]
            w1 = x[r + step, wc]
            w2 = x[r + 2 * step, wc]
            w3 = x[r + 3 * step, wc]
            y[r, wc] = act_word(w0, b0, b1, b2, b3)
            y[r + step, wc] = act_word(w1, b0, b1, b2, b3)
            y[r + 2 * step, wc] = act_word(w2, b0, b1, b2, b3)
            y[r + 3 * step, wc] = act_word(w3, b0, b1, b2, b3)
            r += 4 * step
        while r < m:
            y[r, wc] = act_word(x[r, wc], b0, b1, b2, b3)
            r += step


def gelu_launcher(kernel, sms, threads_max=256, waves=1):
    """Word kernels only (N % 4 == 0), for timing."""
    def launch(x, bias, y):
        m, n = x.shape
        wn = n // 4
        threads = min(threads_max, 32 * cdiv(wn, 32))
        gx = cdiv(wn, threads)
        gy = max(1, min(m, waves * (2048 // threads) * sms // gx, 65535))
        kernel[(gx, gy), threads](x.view(np.uint64), bias.view(np.uint64), y.view(np.uint64))
    return launch


def make_transpose_staged(TILE=64, ROWS=4, PAD=1):
    """As make_transpose_fast, but a whole tile's loads go into registers first (a per-thread array
    indexed by unrolled constants), so all TILE*TILE/(32*ROWS) loads are in flight before the first
    store to shared memory waits for one."""
    TILE_SHAPE = (TILE, TILE + PAD)
    NR, NC = TILE // ROWS, TILE // 32
    PER = NR * NC

    @cuda.jit
    def kernel(a, t):
        tile = cuda.shared.array(TILE_SHAPE, float32)
        R, C = a.shape
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        r0 = cuda.blockIdx.y * TILE
        c0 = cuda.blockIdx.x * TILE
        if r0 + TILE <= R and c0 + TILE <= C:
            v = cuda.local.array(PER, float32)
            for k in range(PER):
                v[k] = a[r0 + ty + (k // NC) * ROWS, c0 + tx + (k % NC) * 32]
            for k in range(PER):
                tile[ty + (k // NC) * ROWS, tx + (k % NC) * 32] = v[k]
            cuda.syncthreads()
            for k in range(PER):
                t[c0 + ty + (k // NC) * ROWS, r0 + tx + (k % NC) * 32] = tile[tx + (k % NC) * 32, ty + (k // NC) * ROWS]
        else:
            for dr in range(0, TILE, ROWS):
                for dc in range(0, TILE, 32):
                    r, c = r0 + ty + dr, c0 + tx + dc
                    if r < R and c < C:
                        tile[ty + dr, tx + dc] = a[r, c]
            cuda.syncthreads()
            for dr in range(0, TILE, ROWS):
                for dc in range(0, TILE, 32):
                    r, c = c0 + ty + dr, r0 + tx + dc
                    if r < C and c < R:
                        t[r, c] = tile[tx + dc, ty + dr]

    def launch(a, t):
        R, C = a.shape
        kernel[(cdiv(C, TILE), cdiv(R, TILE)), (32, ROWS)](a, t)

    launch.kernel = kernel
    return launch


def make_gelu_rows(ROWS=8, CHUNKED=True):
    """Word kernel with ROWS rows per trip held in a per-thread array (unrolled into registers):
    CHUNKED: rows 4·by.. consecutive, step ROWS·gridDim.y; else rows r, r + gridDim.y, ..."""

    @cuda.jit(fastmath=True)
    def kernel(x, bias, y):
        xw, bw, yw = x.view(np.uint64), bias.view(np.uint64), y.view(np.uint64)
        m, wn = xw.shape
        wc = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if wc < wn:
            b0, b1, b2, b3 = bias4(bw[wc])
            if CHUNKED:
                r, rs, step = ROWS * cuda.blockIdx.y, 1, ROWS * cuda.gridDim.y
            else:
                r, rs, step = cuda.blockIdx.y, cuda.gridDim.y, ROWS * cuda.gridDim.y
            w = cuda.local.array(ROWS, uint64)
            while r + (ROWS - 1) * rs < m:
                for k in range(ROWS):
                    w[k] = xw[r + k * rs, wc]
                for k in range(ROWS):
                    yw[r + k * rs, wc] = act_word(w[k], b0, b1, b2, b3)
                r += step
            while r < m:
                yw[r, wc] = act_word(xw[r, wc], b0, b1, b2, b3)
                r += rs

    def launch(x, bias, y, threads_max=1024, sms=132):
        m, n = x.shape
        wn = n // 4
        threads = min(threads_max, 32 * cdiv(wn, 32))
        gx = cdiv(wn, threads)
        gy = max(1, min(cdiv(m, ROWS) if CHUNKED else m, (2048 // threads) * sms // gx, 65535))
        kernel[(gx, gy), threads](x, bias, y)

    launch.kernel = kernel
    return launch
