// generated from grader/include/attention.cuh by `python -m grader release`: read it here, edit it there
// attention.cuh -- device helpers of chapter 04 (attention), on top of course.cuh.
//
// Like course.cuh, each helper is a thin, named wrapper around one or two PTX
// instructions; read each once. Shared memory is addressed with 32-bit byte
// offsets (what ldmatrix and cp.async take), as in lesson 03.04.
#pragma once
#include "course.cuh"

#ifndef INFINITY                 // NVRTC compiles without <math.h>
#define INFINITY __int_as_float(0x7f800000)
#endif

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800

namespace attn {

typedef unsigned short bf16_t;   // bf16 storage: the raw 16 bits (grader.formats.BF16)

constexpr float LOG2E = 1.4426950408889634f;   // exp(x) = 2^(x · log2 e)
constexpr float LN2 = 0.6931471805599453f;

// ---- mma.sync m16n8k16 (bf16 in, fp32 accumulate) with the two B registers passed apart -------
// ldmatrix.x4 of K or V rows gives the b registers of two n8 tiles at once: kb[0], kb[1] for
// the first, kb[2], kb[3] for the second.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  const unsigned b[2] = {b0, b1};
  course::mma_bf16(d, a, b);
}

// ---- cp.async with zero fill: 16 bytes if src_bytes == 16, else 16 zero bytes (nothing read) ------
// The rows of a tile past the end of a sequence become zeros without a branch around the copy;
// pass a valid address (e.g. the start of the tensor) with src_bytes = 0.
__device__ __forceinline__ void cp_async_16z(unsigned saddr, const void* gmem, unsigned src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(saddr), "l"(gmem), "r"(src_bytes)
               : "memory");
}

// ---- numbers -----------------------------------------------------------------------------------
// {lo, hi} fp32 -> one bf16x2 register, round to nearest even; lo lands in the low 16 bits (the
// lower column of an mma fragment).
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// 2^x on the special-function unit (MUFU.EX2); ex2(-inf) = 0.
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// The online-softmax reference point of a row: its running max (log2 units), or 0 while the row
// has seen only masked scores (max = -inf), so that ex2(s - ref) = 0 instead of NaN.
__device__ __forceinline__ float ref_point(float m) { return m == -INFINITY ? 0.f : m; }

// Max / sum over the 4 lanes of a quad: the lanes that hold one row of an mma accumulator.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// ---- the shared-memory layout of a (rows, D) bf16 tile ----------------------------------------
// Row r at r · 2D bytes; 16-byte chunk c stored at chunk c ^ (r % 8). The 8 rows one ldmatrix
// phase reads (same logical chunk) land in 8 different bank groups, and so do the 8 chunks a
// warp's cp.async phase writes. As 2D bytes is a multiple of 128, the offset of (r, chunk 2k ^ y)
// is swz(r, y) ^ 32k for y < 8: stepping along d is an XOR with a constant.
template <int D>
__device__ __forceinline__ unsigned swz(int r, int c) {
  return r * (D * 2) + ((c ^ (r & 7)) << 4);
}

template <bool B>
struct Flag {                 // a compile-time bool passed to a generic lambda (masked or not)
  static constexpr bool value = B;
};

// ---- the last block to arrive --------------------------------------------------------------------
// Called by all threads of every block of a group once its results are written: true in the block
// that arrives last (expected = the group's block count). That block resets the counter for the
// next launch. ticket: one int of this block's shared memory.
__device__ __forceinline__ bool last_arrival(int* counter, int expected, int* ticket) {
  __threadfence();                  // this thread's writes are visible GPU-wide
  __syncthreads();                  // ... for every thread of the block
  if (threadIdx.x == 0) *ticket = atomicAdd(counter, 1);
  __syncthreads();
  const bool last = *ticket == expected - 1;
  if (last) {
    __threadfence();                // order the reads after the other blocks' writes
    if (threadIdx.x == 0) *counter = 0;
  }
  return last;
}

}  // namespace attn

#endif  // __CUDA_ARCH__ >= 800
