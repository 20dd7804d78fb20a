"""Chapter 03, gemm: C = A·B in fp32, fp16 and bf16, targets from CURRICULUM.md.

Sizes are ``Shape(M, N, K)``: A is (M, K), B is (K, N), C is (M, N), all
row-major. Inputs are uniform in [-1, 1], so one element of C is a sum of K
products of mean 0 and variance 1/9: its typical size (rms) is sqrt(K/9).

Tolerances scale with K. Every test set holds shapes that are not multiples
of any tile (1000×1030×1010), a single row or column (1×N×K, M×1×K) and, in
the hidden sets, a long K that exposes fp16 accumulation.

Library calls earn nothing: these problems set ``library_free``, so
grader.check refuses a launch function that copies data to the host (numpy
on the CPU) or runs a torch operation (torch.matmul = cuBLAS) while it is
checked. See grader/library_guard.py.

Every peer is cuBLAS (torch.matmul) on the problem's own A and B at the
candidate's shape, timed as the candidate is. The tensor-core GEMMs of
lessons 03–05 are compiled CUDA C++ (``simulator=False``) that needs an
Ampere GPU or newer (``arch="sm_80"``: bf16 mma.sync, cp.async);
:func:`tiled_launch` is their shared launch function.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import peers
from ..formats import BF16, bf16_to_f64, f32_to_bf16
from .. import integrity as _integrity
from ..problem import Problem

EPS32 = 2.0 ** -24


class Shape(NamedTuple):
    M: int
    N: int
    K: int

    def __str__(self):
        return f"{self.M}×{self.N}×{self.K}"


def flops(s: Shape) -> int:
    return 2 * s.M * s.N * s.K          # one multiply and one add per (m, n, k)


def _bytes(itemsize_in, itemsize_out):
    # the fewest bytes: A and B read once, C written once
    return lambda s: itemsize_in * (s.M * s.K + s.K * s.N) + itemsize_out * s.M * s.N


def _rms(K):
    return math.sqrt(max(K, 1) / 9.0)


def fp32_accumulation_tolerance(s: Shape, dtype=None) -> tuple:
    """fp32 sums of K products, any order: error ≈ sqrt(K)·eps·|partial sums| ≲ eps·K/3 (×8 headroom)."""
    return (8 * EPS32, 8 * EPS32 * max(s.K, 1) / 3 + 1e-6)


def tensor_core_fp32_tolerance(s: Shape, dtype=None) -> tuple:
    """fp32 output of tensor-core mma: the accumulator is fp32 but the hardware truncates when it adds
    each k16 step's products (measured on an H200: 1.35e-3 off at K = 8192 where IEEE fp32 FMAs stay
    within 1e-3). Allow one truncation ulp of an element 4× the typical size per k16 step,
    K/16 · 2^-23 · 4·sqrt(K/9), on top of the fp32 bound (≈ 7e-3 at K = 8192; fp16 accumulation
    errs by ≈ 1 there)."""
    rtol, atol = fp32_accumulation_tolerance(s)
    return (rtol, atol + max(s.K, 1) / 16 * 2.0 ** -23 * 4 * _rms(s.K))


def bf16_output_tolerance(s: Shape, dtype=None) -> tuple:
    """bf16 output of an fp32 accumulation: one rounding (2^-8 relative, ×2), plus a quarter of a bf16
    ulp of the typical element, 2^-9·sqrt(K/9), for elements near 0. fp16 accumulation errs by
    about K·2^-12/3 and fails once K reaches a few hundred."""
    return (2.0 ** -7, 2.0 ** -9 * _rms(s.K))


# ------------------------------------------------------------------ inputs
def _fp32_inputs(rng, s: Shape):
    return {"a": rng.uniform(-1, 1, (s.M, s.K)).astype(np.float32),
            "b": rng.uniform(-1, 1, (s.K, s.N)).astype(np.float32)}


def _bf16_inputs(rng, s: Shape):
    f = _fp32_inputs(rng, s)
    return {"a": f32_to_bf16(f["a"]), "b": f32_to_bf16(f["b"])}


def _fp16_inputs(rng, s: Shape):
    f = _fp32_inputs(rng, s)
    return {"a": f["a"].astype(np.float16), "b": f["b"].astype(np.float16)}


def _ref_float(a, b):
    return {"c": a.astype(np.float64) @ b.astype(np.float64)}


def _ref_bf16(a, b):
    # float64 from the bf16-rounded inputs the kernel sees
    return {"c": bf16_to_f64(a) @ bf16_to_f64(b)}


def _shape_of(inputs):
    a, b = inputs["a"], inputs["b"]
    return a.shape[0], b.shape[1]


# ------------------------------------------------------------------ sizes
# GPU: a tile multiple, odd shapes, one row / one column, a large square.
GPU_SIZES = [Shape(128, 128, 128), Shape(1000, 1030, 1010), Shape(1, 768, 512), Shape(640, 1, 320),
             Shape(2048, 2048, 2048)]
GPU_HIDDEN = [Shape(1, 1, 1), Shape(999, 1001, 1003), Shape(1, 1030, 1010), Shape(1030, 1, 1010),
              Shape(255, 257, 8192), Shape(4096, 1024, 1536)]
# Simulator: tiny (each multiply-add is a few Python calls).
SIM_SIZES = [Shape(40, 36, 20), Shape(1, 20, 37)]
SIM_HIDDEN = [Shape(19, 1, 29), Shape(17, 33, 18)]
# the long-K hidden case that fp16 accumulation fails (1 row keeps it cheap in the simulator)
SIM_HIDDEN_LONG_K = [Shape(1, 48, 1536)]

BENCH = Shape(4096, 4096, 4096)

_HINT = ("C[m, n] = sum over k of A[m, k]·B[k, n]: A is (M, K), B is (K, N), C is (M, N), all row-major. "
         "Shapes are not multiples of your tile: guard every load (load 0 outside A or B) and every store, "
         "and do not skip the last partial K tile.")

sgemm = Problem(
    name="sgemm",
    make_inputs=_fp32_inputs,
    outputs=lambda s, inputs: {"c": ((s.M, s.N), np.float32)},
    reference=_ref_float,
    sizes=GPU_SIZES, sim_sizes=SIM_SIZES,
    hidden_sizes=GPU_HIDDEN, hidden_sim_sizes=SIM_HIDDEN,
    tolerance=fp32_accumulation_tolerance,
    hint=_HINT,
    bytes_moved=_bytes(4, 4), flops=flops,
    bench_size=BENCH, peer=peers.matmul("fp32"), target=0.35, floor=0.03, library_free=True,
)

hgemm_bf16 = Problem(
    name="hgemm bf16",
    make_inputs=_bf16_inputs,
    outputs=lambda s, inputs: {"c": ((s.M, s.N), BF16)},
    reference=_ref_bf16,
    sizes=GPU_SIZES, sim_sizes=SIM_SIZES,
    hidden_sizes=GPU_HIDDEN, hidden_sim_sizes=SIM_HIDDEN + SIM_HIDDEN_LONG_K,
    tolerance=bf16_output_tolerance,
    hint=("Wrong values in 16 × 8 blocks: compare them with the fragment map (a register or an ldmatrix lane "
          "address is off); right only sometimes: a missing wait or barrier. C[m, n] = sum over k of A[m, k]·B[k, n], "
          "all row-major; the launcher pads A and B with zeros to whole tiles, so only the stores of C need guards. "
          "Accumulate in fp32 (an fp16 or bf16 accumulator loses the long-K cases), round to bf16 once."),
    bytes_moved=_bytes(2, 2), flops=flops,
    bench_size=BENCH, peer=peers.matmul("bf16"), target=0.40, floor=0.04, library_free=True,
    simulator=False, arch="sm_80",
)

# WMMA (lesson 03): half-precision inputs, fp32 output; products of fp16/bf16 values are exact in fp32.
wmma_fp16 = Problem(
    name="wmma gemm fp16",
    make_inputs=_fp16_inputs,
    outputs=lambda s, inputs: {"c": ((s.M, s.N), np.float32)},
    reference=_ref_float,
    sizes=GPU_SIZES, sim_sizes=SIM_SIZES,
    hidden_sizes=GPU_HIDDEN, hidden_sim_sizes=SIM_HIDDEN,
    tolerance=tensor_core_fp32_tolerance,
    hint=_HINT, bytes_moved=_bytes(2, 4), flops=flops,
    bench_size=BENCH, peer=peers.matmul("fp16"), target=0.3, floor=0.03, library_free=True,
    simulator=False, arch="sm_80",
)

wmma_bf16 = Problem(
    name="wmma gemm bf16",
    make_inputs=_bf16_inputs,
    outputs=lambda s, inputs: {"c": ((s.M, s.N), np.float32)},
    reference=_ref_bf16,
    sizes=GPU_SIZES, sim_sizes=SIM_SIZES,
    hidden_sizes=GPU_HIDDEN, hidden_sim_sizes=SIM_HIDDEN,
    tolerance=tensor_core_fp32_tolerance,
    hint=_HINT, bytes_moved=_bytes(2, 4), flops=flops,
    bench_size=BENCH, peer=peers.matmul("bf16"), target=0.3, floor=0.03, library_free=True,
    simulator=False, arch="sm_80",
)

# CuTe (lesson 05): the same bf16 GEMM as lesson 04
cute_bf16 = hgemm_bf16.variant(name="cute gemm bf16")


# ------------------------------------------------------------------ launching a tiled GEMM kernel
_PAD_SOURCE = r"""
// Copy a rows × cols bf16 matrix into a zero-padded rows_p × cols_p one.
extern "C" __global__ void pad_bf16(const unsigned short* src, unsigned short* dst,
                                    int rows, int cols, int rows_p, int cols_p) {
  size_t total = (size_t)rows_p * cols_p;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
    int r = i / cols_p, c = i % cols_p;
    dst[i] = (r < rows && c < cols) ? src[(size_t)r * cols + c] : (unsigned short)0;
  }
}
"""


def _padded(x, rows_p: int, cols_p: int):
    """A zero-padded device copy of the (rows, cols) bf16 matrix ``x``, or ``x`` itself if it fits."""
    rows, cols = x.shape
    if (rows, cols) == (rows_p, cols_p):
        return x
    from numba import cuda

    from ..cuda import compile_cuda

    pad = compile_cuda(_PAD_SOURCE, name="grader_pad_bf16")["pad_bf16"]
    out = cuda.device_array((rows_p, cols_p), np.uint16)
    pad[min(4096, (rows_p * cols_p + 255) // 256), 256](x, out, rows, cols, rows_p, cols_p)
    return out


def tiled_launch(kernel):
    """The launch function of a tiled bf16 GEMM kernel ``kernel(A, B, C, M, N, K, lda, ldb,
    tiles_m, tiles_n)`` configured by a type (grader.cuda.launch): one block per (TILE_M, TILE_N)
    tile of C, with the threads and shared memory the type states. A and B are padded with zeros
    to whole tiles when the shape is not a multiple of them (the kernel's main loop then needs no
    bounds tests); C is written in place, its stores guarded by M and N."""
    shape = kernel.launch_shape
    if shape is None or not (shape.tile_m and shape.tile_n and shape.tile_k):
        raise ValueError(f"{kernel.name}: its configuration type must state THREADS, SMEM_BYTES, "
                         "TILE_M, TILE_N and TILE_K (see grader/include/course.cuh)")

    def launch(a, b, c):
        # a: (M, K) bf16 bits, b: (K, N) bf16 bits, c: (M, N) bf16 bits (written)
        M, K = a.shape
        N = b.shape[1]
        tiles_m, tiles_n = shape.tiles(M, N)
        Kp = -(-K // shape.tile_k) * shape.tile_k
        ap = _padded(a, tiles_m * shape.tile_m, Kp)
        bp = _padded(b, Kp, tiles_n * shape.tile_n)
        kernel.launch(tiles_m * tiles_n, ap, bp, c, M, N, Kp, Kp, tiles_n * shape.tile_n, tiles_m, tiles_n)
    launch.__name__ = f"launch {kernel.name}"
    return launch


__all__ = ["Shape", "flops", "sgemm", "hgemm_bf16", "wmma_fp16", "wmma_bf16", "cute_bf16", "tiled_launch",
           "fp32_accumulation_tolerance", "tensor_core_fp32_tolerance", "bf16_output_tolerance"]


_integrity.record_problems(globals())   # the fields checks rely on, before any learner code
