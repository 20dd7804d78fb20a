// attn.cuh -- device helpers shared by the chapter 04 attention kernels.
//
// Shared memory is addressed with 32-bit byte offsets (what ldmatrix and cp.async take), as in
// chapter 03's lesson kernel: each thread computes its offsets once; loops only add or XOR
// constants. cp_async_commit / cp_async_wait come from course.cuh.
#pragma once
#include "course.cuh"

namespace attn {

typedef unsigned short bf16_t;   // bf16 storage (the raw 16 bits), as the chapter 03 kernels

// ---- ldmatrix (16-bit 8 × 8 tiles; lane i gives the address of one 16-byte row) ----------------
__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3,
                                              unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

// ---- mma.sync m16n8k16, bf16 in, fp32 accumulate: d += a · b -------------------------------------
// With g = lane / 4 and t = lane % 4: a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..], a[2] = A[g][2t+8..],
// a[3] = A[g+8][2t+8..]; b[0] = B[2t..2t+1][g], b[1] = B[2t+8..][g]; d[0..1] = D[g][2t..2t+1],
// d[2..3] = D[g+8][2t..2t+1]. Not volatile: the compiler may interleave mmas with the loads.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// fp16 in, fp16 accumulate (2 registers of f16x2): only the wrong kernel "fp16 accumulation" uses it.
__device__ __forceinline__ void mma_f16_f16acc(unsigned (&d)[2], const unsigned (&a)[4], unsigned b0,
                                               unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, "
      "{%0, %1};\n"
      : "+r"(d[0]), "+r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- cp.async: 16 bytes global → shared, bypassing registers (and L1) -----------------------------
__device__ __forceinline__ void cp_async_16(unsigned saddr, const void* g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(saddr), "l"(g) : "memory");
}
// ---- cp.async with zero fill: src_bytes = 16 copies, 0 writes 16 zero bytes (reads nothing) -----
__device__ __forceinline__ void cp_async_16z(unsigned saddr, const void* g, unsigned src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(saddr), "l"(g), "r"(src_bytes)
               : "memory");
}

// ---- conversions and math ---------------------------------------------------------------------
// {hi, lo} fp32 → one bf16x2 register, round to nearest even; lo lands in the low 16 bits (the
// lower column index of an mma fragment).
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ unsigned pack_f16(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ float bf16_lo(unsigned v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16_hi(unsigned v) { return __uint_as_float(v & 0xffff0000u); }
__device__ __forceinline__ float f16_lo(unsigned v) {
  float f;
  asm("{ .reg .f16 h; mov.b32 {h, _}, %1; cvt.f32.f16 %0, h; }\n" : "=f"(f) : "r"(v));
  return f;
}
__device__ __forceinline__ float f16_hi(unsigned v) {
  float f;
  asm("{ .reg .f16 h; mov.b32 {_, h}, %1; cvt.f32.f16 %0, h; }\n" : "=f"(f) : "r"(v));
  return f;
}
// bf16x2 → f16x2 (for the fp16 wrong kernel only)
__device__ __forceinline__ unsigned bf16x2_to_f16x2(unsigned v) { return pack_f16(bf16_lo(v), bf16_hi(v)); }

// 2^x on the special-function unit (MUFU.EX2); ex2(-inf) = 0.
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

template <bool B>
struct Flag {                                   // a compile-time bool passed to a generic lambda
  static constexpr bool value = B;
};

constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

// The online-softmax reference point of a row: its running max (log2 units), or 0 while the row
// has seen only masked scores (max = -inf), so that ex2(s - ref) = 0 instead of NaN.
__device__ __forceinline__ float ref_point(float m) { return m == -INFINITY ? 0.f : m; }

// Max / sum over the 4 lanes of a quad (the lanes that share a row of an mma accumulator).
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

}  // namespace attn
