"""Wrong kernels for chapter 01: each must fail grader.check (tests/test_ch01_elementwise.py).

Import after ``import grader`` (the simulator must be chosen before numba.cuda loads).
Helpers (bf16 conversions, gelu) come from the lesson 04 notebook, so a wrong kernel differs
from the right one only in its bug.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, uint64
from numba.types import float16

from grader.notebooks import definitions

L04 = definitions("solutions/01_elementwise/04_vectors_half_precision_fusion.ipynb",
                  cells=["l04_setup", "l04_formats", "l04_activations"])
bf16_to_f32, f32_to_bf16, pack_bf16x2 = L04["bf16_to_f32"], L04["f32_to_bf16"], L04["pack_bf16x2"]
gelu = L04["gelu"]
A, B, ONE, EXP_MAX = L04["A"], L04["B"], L04["ONE"], L04["EXP_MAX"]


def cdiv(a, b):
    return (a + b - 1) // b


# ------------------------------------------------------------------ saxpy
@cuda.jit
def _saxpy_no_guard(a, x, y, z):
    i = cuda.grid(1)
    z[i] = a * x[i] + y[i]                  # BUG: no `if i < n`: the last block runs off the end


def saxpy_no_guard(a, x, y, z):
    _saxpy_no_guard[cdiv(z.size, 256), 256](a, x, y, z)


@cuda.jit
def _saxpy_no_tail(a, x, y, z):
    n, stride, i = z.size, cuda.gridsize(1), cuda.grid(1)
    while i + 3 * stride < n:               # full trips only
        z[i] = a * x[i] + y[i]
        z[i + stride] = a * x[i + stride] + y[i + stride]
        z[i + 2 * stride] = a * x[i + 2 * stride] + y[i + 2 * stride]
        z[i + 3 * stride] = a * x[i + 3 * stride] + y[i + 3 * stride]
        i += 4 * stride
    # BUG: no tail loop: the last elements of each thread are never written


def saxpy_no_tail(a, x, y, z):
    _saxpy_no_tail[max(1, min(cdiv(z.size, 1024), 16)), 256](a, x, y, z)


@cuda.jit
def _saxpy_half(a, x, y, z):
    for i in range(cuda.grid(1), z.size // 2, cuda.gridsize(1)):   # BUG: stops halfway
        z[i] = a * x[i] + y[i]


def saxpy_half(a, x, y, z):
    _saxpy_half[8, 256](a, x, y, z)


# ------------------------------------------------------------------ transpose
TILE, ROWS = 32, 8


@cuda.jit
def _transpose_square_only(a, t):
    tile = cuda.shared.array((TILE, TILE + 1), float32)
    n = a.shape[0]                          # BUG: assumes a square matrix: one size for both guards
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    for dr in range(0, TILE, ROWS):
        if r0 + ty + dr < n and c0 + tx < n:
            tile[ty + dr, tx] = a[r0 + ty + dr, c0 + tx]
    cuda.syncthreads()
    for dr in range(0, TILE, ROWS):
        if c0 + ty + dr < n and r0 + tx < n:
            t[c0 + ty + dr, r0 + tx] = tile[tx, ty + dr]


def transpose_square_only(a, t):
    R, C = a.shape
    _transpose_square_only[(cdiv(C, TILE), cdiv(R, TILE)), (32, ROWS)](a, t)


@cuda.jit
def _transpose_whole_tiles_only(a, t):
    tile = cuda.shared.array((TILE, TILE + 1), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    for dr in range(0, TILE, ROWS):          # BUG: no guards: right only for multiples of the tile
        tile[ty + dr, tx] = a[r0 + ty + dr, c0 + tx]
    cuda.syncthreads()
    for dr in range(0, TILE, ROWS):
        t[c0 + ty + dr, r0 + tx] = tile[tx, ty + dr]


def transpose_whole_tiles_only(a, t):
    R, C = a.shape
    _transpose_whole_tiles_only[(cdiv(C, TILE), cdiv(R, TILE)), (32, ROWS)](a, t)


@cuda.jit
def _transpose_no_barrier(a, t):
    tile = cuda.shared.array((TILE, TILE + 1), float32)
    R, C = a.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    for dr in range(0, TILE, ROWS):
        if r0 + ty + dr < R and c0 + tx < C:
            tile[ty + dr, tx] = a[r0 + ty + dr, c0 + tx]
    # BUG: no cuda.syncthreads(): a thread reads tile elements other threads have not stored yet
    for dr in range(0, TILE, ROWS):
        if c0 + ty + dr < C and r0 + tx < R:
            t[c0 + ty + dr, r0 + tx] = tile[tx, ty + dr]


def transpose_no_barrier(a, t):
    R, C = a.shape
    _transpose_no_barrier[(cdiv(C, TILE), cdiv(R, TILE)), (32, ROWS)](a, t)


# ------------------------------------------------------------------ bias + GELU, bf16
@cuda.jit
def _bias_gelu_fp16_math(x, bias, y):
    m, n = x.shape
    c = cuda.grid(1)
    if c < n:
        b = bf16_to_f32(bias[c])
        for r in range(m):
            v = float16(bf16_to_f32(x[r, c]) + b)      # BUG: fp16 intermediate: inf above 65504
            y[r, c] = f32_to_bf16(gelu(float32(v)))


def bias_gelu_fp16_math(x, bias, y):
    _bias_gelu_fp16_math[cdiv(x.shape[1], 64), 64](x, bias, y)


@cuda.jit(device=True)
def _bf16(f):
    return bf16_to_f32(f32_to_bf16(f))                  # round a float32 to the nearest bf16


@cuda.jit
def _bias_gelu_bf16_math(x, bias, y):
    m, n = x.shape
    c = cuda.grid(1)
    if c < n:
        b = bf16_to_f32(bias[c])
        for r in range(m):
            # BUG: every intermediate rounded to bf16, as if the math ran in bf16
            v = _bf16(bf16_to_f32(x[r, c]) + b)
            p = _bf16(A + _bf16(B * _bf16(v * v)))
            e = _bf16(math.exp(min(_bf16(v * p), EXP_MAX)))
            y[r, c] = f32_to_bf16(v / _bf16(ONE + e))


def bias_gelu_bf16_math(x, bias, y):
    _bias_gelu_bf16_math[cdiv(x.shape[1], 64), 64](x, bias, y)


@cuda.jit
def _bias_gelu_words_half_rows(x, bias, y):
    # the lesson's word kernel, two rows per trip, but the second row is never stored
    m, wn = x.shape
    wc = cuda.grid(1)
    if wc < wn:
        bw = bias[wc]
        b0, b1 = bf16_to_f32(bw), bf16_to_f32(bw >> 16)
        b2, b3 = bf16_to_f32(bw >> 32), bf16_to_f32(bw >> 48)
        for r in range(0, m, 2):
            w = x[r, wc]
            lo = pack_bf16x2(gelu(bf16_to_f32(w) + b0), gelu(bf16_to_f32(w >> 16) + b1))
            hi = pack_bf16x2(gelu(bf16_to_f32(w >> 32) + b2), gelu(bf16_to_f32(w >> 48) + b3))
            y[r, wc] = uint64(lo) | (uint64(hi) << 32)
            # BUG: row r + 1 is loaded by nobody and written by nobody


def bias_gelu_half_rows(x, bias, y):
    m, n = x.shape
    assert n % 4 == 0, "this wrong kernel only knows whole words"
    xw, bw, yw = x.view(np.uint64), bias.view(np.uint64), y.view(np.uint64)
    _bias_gelu_words_half_rows[cdiv(n // 4, 64), 64](xw, bw, yw)
