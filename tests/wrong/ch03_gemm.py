"""Chapter 03 (gemm): wrong launch functions that grader.check must catch.

Each is a plausible mistake, kept beside the references (tests/test_ch03_gemm.py).
"""
import functools

import numpy as np
from numba import cuda, float32
from numba.core.types import float16

from tests.wrong import lesson_variant


# ---------------------------------------------------------------- lesson 03.01's v2, changed
def _tiled(replacements):
    """launch_tiled of solutions/03_gemm/01_naive_and_tiling.ipynb (cell v2_tiled) with lines changed."""
    return lesson_variant("03_gemm", "01_naive_and_tiling.ipynb", "v2_tiled", replacements)["launch_tiled"]


@functools.cache
def _skips_k_remainder():
    # BUG: whole K tiles only: drops the last K % TILE columns of A (and rows of B)
    return _tiled([("for k0 in range(0, K, TILE):", "for k0 in range(0, K - K % TILE, TILE):")])


@functools.cache
def _missing_barrier():
    # BUG: no cuda.syncthreads() between the tiles' loads and their use: other threads' elements may not be written yet
    return _tiled([("        cuda.syncthreads()                          # tiles written before anyone reads them\n", "")])


def tiled_skips_k_remainder(a, b, c):
    _skips_k_remainder()(a, b, c)


def tiled_missing_barrier(a, b, c):
    _missing_barrier()(a, b, c)


# ---------------------------------------------------------------- B read as if column-major
@cuda.jit
def _naive_b_transposed(a, b, c):
    n, m = cuda.grid(2)
    M, K = a.shape
    N = b.shape[1]
    flat_b = b.reshape(b.size)
    if m < M and n < N:
        acc = float32(0.0)
        for k in range(K):
            acc += a[m, k] * flat_b[n * K + k]     # BUG: B[k, n] is at k * N + n (row-major)
        c[m, n] = acc


def naive_b_transposed(a, b, c):
    M, N = c.shape
    _naive_b_transposed[((N + 15) // 16, (M + 15) // 16), (16, 16)](a, b, c)


@cuda.jit(device=True)
def _bf16(bits):
    # uint16 bf16 bits -> float32 value, by arithmetic (the simulator has no bit casts)
    s = -1.0 if bits & 0x8000 else 1.0
    e = int((bits >> 7) & 0xFF)            # int: uint16 arithmetic would wrap below 0
    f = int(bits & 0x7F)
    if e == 0:
        return float32(s * f * 2.0 ** -133)
    return float32(s * (1.0 + f / 128.0) * 2.0 ** (e - 127))


@cuda.jit(device=True)
def _to_bf16(x):
    # float32 value -> bf16 bits, round to nearest even (finite values only)
    if x == 0:
        return np.uint16(0)
    s = 0x8000 if x < 0 else 0
    v = abs(x)
    e = 0
    while v >= 2.0:
        v /= 2.0
        e += 1
    while v < 1.0:
        v *= 2.0
        e -= 1
    q = (v - 1.0) * 128.0
    f = int(q)
    r = q - f
    if r > 0.5 or (r == 0.5 and f % 2 == 1):
        f += 1
    if f == 128:
        f = 0
        e += 1
    return np.uint16(s | ((e + 127) << 7) | f)


# ---------------------------------------------------------------- bf16 GEMM accumulating in fp16
@cuda.jit
def _bf16_fp16_accumulation(a, b, c):
    # a, b: bf16 bits in uint16; c: bf16 bits (uint16). Decoding by shifting into float32 is exact.
    n, m = cuda.grid(2)
    M, K = a.shape
    N = b.shape[1]
    if m < M and n < N:
        acc = float16(0.0)                         # BUG: 11-bit accumulator
        for k in range(K):
            x = _bf16(a[m, k])
            y = _bf16(b[k, n])
            acc = float16(acc + float16(x * y))
        c[m, n] = _to_bf16(float32(acc))


def bf16_fp16_accumulation(a, b, c):
    M, N = c.shape
    _bf16_fp16_accumulation[((N + 15) // 16, (M + 15) // 16), (16, 16)](a, b, c)


# ---------------------------------------------------------------- library calls instead of a kernel
def numpy_on_host(a, b, c):
    """Computes with numpy on the CPU and copies the answer into the output."""
    c.copy_to_device((a.copy_to_host() @ b.copy_to_host()).astype(np.float32))


@cuda.jit
def _copy(src, dst):
    m, n = cuda.grid(2)
    if m < dst.shape[0] and n < dst.shape[1]:
        dst[m, n] = src[m, n]


def numpy_on_host_then_copy_kernel(a, b, c):
    """numpy on the CPU, then a real kernel that only copies the answer: a kernel did run."""
    tmp = cuda.to_device((a.copy_to_host() @ b.copy_to_host()).astype(np.float32))
    _copy[((c.shape[0] + 15) // 16, (c.shape[1] + 15) // 16), (16, 16)](tmp, c)


def torch_matmul(a, b, c):
    """cuBLAS through torch.matmul on the very arrays check passes (needs torch; GPU: zero copies)."""
    import torch

    dev = "cuda" if torch.cuda.is_available() and hasattr(a, "__cuda_array_interface__") else "cpu"
    if dev == "cuda":
        ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
    else:  # simulator: the arrays are host memory
        ta, tb, tc = (torch.from_numpy(np.asarray(x)) for x in (a, b, c))
    torch.matmul(ta, tb, out=tc)


# ---------------------------------------------------------------- lesson 02's graded v3, with one mistake
# Built from the notebook's own v3 cell (grader.notebooks), so they follow the reference's form.
V3_MISTAKES = {
    # the tile loop stops before the last partial K tile
    "skips_k_remainder": ("    for k0 in range(0, K, BK):", "    for k0 in range(0, K - K % BK, BK):"),
    # no barrier between filling the tiles and reading them
    "missing_first_barrier": ("        cuda.syncthreads()\n        step(As, Bs, 0,", "        step(As, Bs, 0,"),
    # no barrier before the next tile overwrites As and Bs (needs K > BK to show)
    "missing_second_barrier": ("        step(As, Bs, 7, ty, tx, acc)\n        cuda.syncthreads()",
                               "        step(As, Bs, 7, ty, tx, acc)"),
    # B read as if it were column-major: B[k, n] taken from k + n·K
    "b_column_major": ("b[k0 + kr, n0 + cc]", "b.reshape(b.size)[(n0 + cc) * K + k0 + kr]"),
    # the C tile stored with v2's strided mapping instead of the quads the accumulators hold
    "strided_store": ("m = m0 + (i // 4) * 64 + ty * 4 + i % 4", "m = m0 + ty + i * 16"),
}


def register_tiled_v3(mistake: str):
    """launch_v3 of solutions/03_gemm/02_register_tiling.ipynb with one mistake from V3_MISTAKES."""
    from grader.notebooks import cell_source
    from tests.conftest import lesson, solution

    old, new = V3_MISTAKES[mistake]
    ns = lesson("03_gemm", "02_register_tiling.ipynb", ["v2_2d"])
    src = cell_source(solution("03_gemm", "02_register_tiling.ipynb"), "v3_quads")
    assert src.count(old) == 1, f"the v3 cell changed: {old!r} not found once"
    src = src.replace(old, new).replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", "")
    exec(compile(src, f"v3_{mistake}", "exec"), ns)
    return ns["launch_v3"]
