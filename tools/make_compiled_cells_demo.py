"""Writes solutions/03_gemm/00_compiled_cells.ipynb (run from the repo root).

The notebook is generated so its %%cuda cells stay in one reviewed place;
tests/test_cuda_cells.py compiles every %%cuda cell of the written notebook.
"""
from pathlib import Path

import nbformat as nbf

CELLS = []


def md(s):
    CELLS.append(nbf.v4.new_markdown_cell(s.strip("\n")))


def code(s, grade_id=None, points=None):
    """A code cell; with grade_id, an nbgrader cell: a solution cell, or a graded test with points."""
    cell = nbf.v4.new_code_cell(s.strip("\n"))
    if grade_id:
        cell.metadata["nbgrader"] = {
            "grade": points is not None, "solution": points is None, "locked": points is not None,
            "grade_id": grade_id, "schema_version": 3, "task": False,
            **({"points": points} if points is not None else {})}
    CELLS.append(cell)


md("""
# Compiled CUDA C++ cells

From chapter 03 on, kernels are written in CUDA C++ (with inline PTX where the
hardware has no C++ spelling) or with CuTe. A cell that starts with
`%%cuda NAME` is compiled for your GPU and its result is bound to `NAME`:

* `NAME.KERNEL[grid, block, shared_bytes](args...)` runs a kernel (GPU only);
* `sass.require(NAME, "KERNEL", present=[...], absent=[...])` checks the
  machine code the compiler produced, on any machine, GPU or not.

Without a GPU, cells are compiled for Hopper (`sm_90a`); pass `--arch sm_80`,
`--arch sm_89` or `--arch sm_100a` to aim elsewhere.
""")

code("""
import grader
from grader.cuda import sass

print("GPU present:", grader.cuda.gpu_available(), "| compiling for", grader.cuda.default_arch())
""")

md("""
## 1. A plain kernel

`extern "C"` keeps the kernel's name as written, so Python can find it as
`vadd.add`. Scalar arguments get the C types of the declaration (`int n` is
passed as a 32-bit integer).
""")

code(r"""
%%cuda vadd
extern "C" __global__ void add(const float* __restrict__ a, const float* __restrict__ b,
                               float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
""")

code("""
print(vadd)
print(vadd.add.resources)     # registers, spills, shared memory: from the compiler's report
sass.require(vadd, "add", present=["LDG", "FADD", "STG"], absent=["LDL", "STL"])
""")

md("""
## 2. One tensor-core instruction: `mma.sync`

One warp multiplies a 16x16 tile of A by a 16x8 tile of B (stored transposed,
8x16) into 16x8 floats. The operands travel global → shared with `cp.async`,
then shared → registers with `ldmatrix`; `course.cuh` wraps each PTX
instruction in a named helper.
""")

code(r"""
%%cuda mma
#include "course.cuh"

// C (16x8 fp32, row-major) = A (16x16 fp16, row-major) * B, B passed as Bt (8x16, row-major).
extern "C" __global__ void mma_tile(const unsigned short* A, const unsigned short* Bt, float* C) {
  __shared__ __align__(16) unsigned short sA[16 * 16];
  __shared__ __align__(16) unsigned short sB[8 * 16];
  int lane = threadIdx.x;

  // A is 512 bytes = 32 chunks of 16 B, one per lane; Bt is 16 chunks.
  course::cp_async_16(sA + lane * 8, A + lane * 8);
  if (lane < 16) course::cp_async_16(sB + lane * 8, Bt + lane * 8);
  course::cp_async_commit();
  course::cp_async_wait<0>();
  __syncthreads();

  unsigned a[4], b[2];
  float c[4] = {0.f, 0.f, 0.f, 0.f}, d[4];
  // Exercise (about 3 lines): ldmatrix A (x4) and Bt (x2) into a and b, then one mma into d.
  // BEGIN SOLUTION
  // Each lane points ldmatrix at one 16-byte row of one 8x8 tile.
  course::ldmatrix_x4(a[0], a[1], a[2], a[3], sA + (lane % 16) * 16 + (lane / 16) * 8);
  course::ldmatrix_x2(b[0], b[1], sB + (lane % 8) * 16 + ((lane / 8) % 2) * 8);
  course::mma_m16n8k16_f16(d, a, b, c);
  // END SOLUTION

  int g = lane / 4, t = lane % 4;   // accumulator layout of m16n8
  C[g * 8 + 2 * t] = d[0];
  C[g * 8 + 2 * t + 1] = d[1];
  C[(g + 8) * 8 + 2 * t] = d[2];
  C[(g + 8) * 8 + 2 * t + 1] = d[3];
}
""", grade_id="mma_tile_exercise")

md("""
**Graded (works without a GPU):** the machine code must show the tensor-core MMA (`HMMA`), the
`ldmatrix` loads (`LDSM`) and the `cp.async` copies (`LDGSTS`), and no local-memory traffic.
""")

code("""
sass.require(mma, "mma_tile", present=["HMMA", "LDSM", "LDGSTS"], absent=["LDL", "STL"])
""", grade_id="test_mma_tile_sass", points=2)

md("""
## 3. The same instruction through CuTe

CuTe describes the tiles as tensors (shape + layout) and an MMA *atom* says
which thread holds which element; `gemm` issues the instruction. The first
compile of a CuTe cell takes a few seconds; re-running it is instant (cached).
""")

code(r"""
%%cuda cute_demo
#include <cute/tensor.hpp>
using namespace cute;

// Copy: each block moves one 256-element tile, one element per thread.
extern "C" __global__ void cute_copy(const float* src, float* dst, int n) {
  Tensor gS = make_tensor(make_gmem_ptr(src), make_shape(n));
  Tensor gD = make_tensor(make_gmem_ptr(dst), make_shape(n));
  Tensor tileS = local_tile(gS, make_shape(Int<256>{}), make_coord(blockIdx.x));
  Tensor tileD = local_tile(gD, make_shape(Int<256>{}), make_coord(blockIdx.x));
  int i = blockIdx.x * 256 + threadIdx.x;
  if (i < n) tileD(threadIdx.x) = tileS(threadIdx.x);
}

// One warp: C (16x8 fp32) = A (16x16 fp16) * B, with A as (M,K), Bt as (N,K), both K-contiguous.
extern "C" __global__ void cute_mma(const half_t* A, const half_t* Bt, float* C) {
  Tensor gA = make_tensor(make_gmem_ptr(A), make_layout(make_shape(Int<16>{}, Int<16>{}), LayoutRight{}));
  Tensor gB = make_tensor(make_gmem_ptr(Bt), make_layout(make_shape(Int<8>{}, Int<16>{}), LayoutRight{}));
  Tensor gC = make_tensor(make_gmem_ptr(C), make_layout(make_shape(Int<16>{}, Int<8>{}), LayoutRight{}));

  TiledMMA tiled = make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{});
  ThrMMA thr = tiled.get_slice(threadIdx.x);
  Tensor tCgA = thr.partition_A(gA);
  Tensor tCgB = thr.partition_B(gB);
  Tensor tCgC = thr.partition_C(gC);
  Tensor tCrA = thr.make_fragment_A(tCgA);
  Tensor tCrB = thr.make_fragment_B(tCgB);
  Tensor tCrC = thr.make_fragment_C(tCgC);
  copy(tCgA, tCrA);
  copy(tCgB, tCrB);
  clear(tCrC);
  gemm(tiled, tCrA, tCrB, tCrC);
  copy(tCrC, tCgC);
}
""")

code("""
print(f"compiled in {cute_demo.compile_seconds:.1f} s (from cache: {cute_demo.from_cache})")
sass.require(cute_demo, "cute_mma", present=["HMMA"], absent=["LDL", "STL"])
""")

md("""
## 4. Hopper's warpgroup MMA: `wgmma`

Four warps (a *warpgroup*) issue one asynchronous `wgmma` that reads both
operands straight from shared memory, described by 64-bit *matrix
descriptors*. Here the tiles use the unswizzled layout: 8x8 blocks ("core
matrices") of 128 contiguous bytes. The cell is compiled for `sm_90a` on any
machine; it runs only on a Hopper GPU.
""")

code(r"""
%%cuda wg --arch sm_90a
#include "course.cuh"

// wgmma shared-memory descriptor, no swizzle; offsets in bytes.
__device__ __forceinline__ unsigned long long smem_desc(const void* p, unsigned lbo, unsigned sbo) {
  unsigned long long d = (course::smem_u32(p) & 0x3FFFF) >> 4;   // start address / 16
  d |= (unsigned long long)((lbo >> 4) & 0x3FFF) << 16;          // leading (K) byte offset / 16
  d |= (unsigned long long)((sbo >> 4) & 0x3FFF) << 32;          // stride (M/N) byte offset / 16
  return d;                                                      // base offset 0, swizzle none
}

// 128 threads: C (64x8 fp32, row-major) = A (64x16 fp16, row-major) * B, B passed as Bt (8x16).
extern "C" __global__ void wgmma_tile(const unsigned short* A, const unsigned short* Bt, float* C) {
  // Core matrix (row/8, k/8) of A starts at ((row/8)*2 + k/8) * 128 bytes:
  // K-neighbours are 128 B apart (LBO), 8-row groups 256 B apart (SBO).
  __shared__ __align__(128) unsigned short sA[64 * 16];
  __shared__ __align__(128) unsigned short sB[8 * 16];
  int tid = threadIdx.x;
  for (int i = tid; i < 64 * 16; i += 128) {
    int m = i / 16, k = i % 16;
    sA[((m / 8) * 2 + k / 8) * 64 + (m % 8) * 8 + k % 8] = A[i];
  }
  for (int i = tid; i < 8 * 16; i += 128) {
    int n = i / 16, k = i % 16;
    sB[(k / 8) * 64 + n * 8 + k % 8] = Bt[i];
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // make the stores visible to wgmma
  __syncthreads();

  unsigned long long da = smem_desc(sA, 128, 256), db = smem_desc(sB, 128, 256);
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %6, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(da), "l"(db), "r"(0));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");

  // Accumulator layout: warp w holds rows 16w..16w+15, laid out like an m16n8 tile.
  int w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  int r = 16 * w + g;
  C[r * 8 + 2 * t] = d[0];
  C[r * 8 + 2 * t + 1] = d[1];
  C[(r + 8) * 8 + 2 * t] = d[2];
  C[(r + 8) * 8 + 2 * t + 1] = d[3];
}
""")

code("""
sass.require(wg, "wgmma_tile", present=["HGMMA", "WARPGROUP.ARRIVE"], absent=["LDL", "STL"])
""")

md("""
## 5. On a GPU: run them and compare with numpy

Device arrays come from Numba here (`numba.cuda.to_device`); torch CUDA tensors
work the same way.
""")

code("""
import numpy as np

if not grader.cuda.gpu_available():
    print("No GPU: compiled and inspected only.")
else:
    from numba import cuda   # device arrays

    rng = np.random.default_rng(0)
    n = 1000
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    da, db, dc = cuda.to_device(a), cuda.to_device(b), cuda.device_array(n, np.float32)
    vadd.add[(n + 255) // 256, 256](da, db, dc, n)
    np.testing.assert_allclose(dc.copy_to_host(), a + b)

    dout = cuda.device_array(n, np.float32)
    cute_demo.cute_copy[(n + 255) // 256, 256](da, dout, n)
    np.testing.assert_array_equal(dout.copy_to_host(), a)

    A = rng.standard_normal((16, 16)).astype(np.float16)
    Bt = rng.standard_normal((8, 16)).astype(np.float16)
    want = A.astype(np.float32) @ Bt.astype(np.float32).T
    dA, dBt = cuda.to_device(A.view(np.uint16)), cuda.to_device(Bt.view(np.uint16))
    for kernel in (mma.mma_tile, cute_demo.cute_mma):
        dC = cuda.device_array((16, 8), np.float32)
        kernel[1, 32](dA, dBt, dC)
        np.testing.assert_allclose(dC.copy_to_host(), want, rtol=1e-3, atol=1e-3)

    if grader.cuda.toolchain.compute_capability() == (9, 0):   # wgmma: Hopper only
        A64 = rng.standard_normal((64, 16)).astype(np.float16)
        dC = cuda.device_array((64, 8), np.float32)
        wg.wgmma_tile[1, 128](cuda.to_device(A64.view(np.uint16)), dBt, dC)
        np.testing.assert_allclose(dC.copy_to_host(), A64.astype(np.float32) @ Bt.astype(np.float32).T,
                                   rtol=1e-3, atol=1e-3)
    print("all kernels match numpy")
""")

nb = nbf.v4.new_notebook()
nb.cells = CELLS
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
out = Path("solutions/03_gemm/00_compiled_cells.ipynb")
out.parent.mkdir(parents=True, exist_ok=True)
nbf.write(nb, out)
print("wrote", out)
