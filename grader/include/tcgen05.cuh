// tcgen05.cuh -- Blackwell's fifth-generation tensor cores (tcgen05) and tensor memory, lesson 05.09.
//
// Like course.cuh and tma.cuh: each helper wraps one PTX instruction, so the SASS is the
// instruction you asked for (the opcodes each becomes are in grader/cuda/sass.py).  tcgen05
// exists only on sm_100a / sm_101a / sm_103a / sm_110a (datacenter Blackwell and relatives):
// sm_90a (Hopper) and sm_120a (RTX Blackwell) reject it in ptxas.
//
// Tensor memory (TMEM): 128 lanes x 512 columns of 32-bit cells per SM.  An address is
// (lane << 16) | column.  A warp of a warpgroup reaches only its quarter of the lanes:
// warp w (w % 4 = q) reads lanes 32q ... 32q + 31.
//
// CTA pairs (cta_group::2): two CTAs of a cluster (ranks 2i, 2i+1) run one MMA together.  The
// even one (the leader) issues it; each CTA holds its half of A (128 rows) and its half of B
// (N / 2 columns) at the same shared-memory offset, and its half of D in its own TMEM.
#pragma once
#include "tma.cuh"

// Defined for every sm_90+ target on purpose: compiled for sm_90a or sm_120a, a kernel that uses
// them fails in ptxas with "Instruction 'tcgen05.mma' not supported on .target 'sm_90a'" -- the
// honest message -- rather than with an undefined name.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
namespace course {

// ---- tensor memory allocation: one whole warp, the same warp for alloc and dealloc --------
// Writes the address of `ncols` columns (a power of 2, 32 ... 512) to *dst in shared memory.
template <int CTA_GROUP>
__device__ __forceinline__ void tmem_alloc(unsigned* dst, unsigned ncols) {
  if constexpr (CTA_GROUP == 1)
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;\n" :: "r"(smem_u32(dst)), "r"(ncols) : "memory");
  else
    asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], %1;\n" :: "r"(smem_u32(dst)), "r"(ncols) : "memory");
}
// This CTA will allocate no more: another CTA on the SM may now allocate (call it right after alloc).
template <int CTA_GROUP>
__device__ __forceinline__ void tmem_relinquish() {
  if constexpr (CTA_GROUP == 1)
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n" ::: "memory");
  else
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;\n" ::: "memory");
}
// Frees the columns: every allocation must be freed before the CTA exits.
template <int CTA_GROUP>
__device__ __forceinline__ void tmem_dealloc(unsigned taddr, unsigned ncols) {
  if constexpr (CTA_GROUP == 1)
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;\n" :: "r"(taddr), "r"(ncols) : "memory");
  else
    asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, %1;\n" :: "r"(taddr), "r"(ncols) : "memory");
}

// ---- ordering tcgen05 operations around thread synchronisation --------------------------
__device__ __forceinline__ void tcgen05_before_sync() { asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory"); }
__device__ __forceinline__ void tcgen05_after_sync() { asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory"); }

// ---- the MMA: one thread issues D[tmem] (+)= A[smem desc] · B[smem desc] ---------------------
// kind::f16 (bf16 or fp16 in, fp32 or fp16 accumulator): idesc says M, N, types and majors;
// `accumulate` false overwrites D (the first K step).
template <int CTA_GROUP>
__device__ __forceinline__ void umma_f16(unsigned d_tmem, unsigned long long a_desc, unsigned long long b_desc,
                                         unsigned idesc, bool accumulate) {
  if constexpr (CTA_GROUP == 1)
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %4, 0;\n"
                 " tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n}\n"
                 :: "r"(d_tmem), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"((unsigned)accumulate) : "memory");
  else
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %4, 0;\n"
                 " tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %2, %3, p;\n}\n"
                 :: "r"(d_tmem), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"((unsigned)accumulate) : "memory");
}
// Block-scaled MXFP8 (kind::mxf8f6f4, one ue8m0 scale per 32 values of K): the scale factors of
// A and B are read from tensor memory at sfa_tmem / sfb_tmem.
__device__ __forceinline__ void umma_mxf8(unsigned d_tmem, unsigned long long a_desc, unsigned long long b_desc,
                                          unsigned idesc, unsigned sfa_tmem, unsigned sfb_tmem, bool accumulate) {
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %4, 0;\n"
               " tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale [%0], %1, %2, %3, [%5], [%6], p;\n}\n"
               :: "r"(d_tmem), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"((unsigned)accumulate), "r"(sfa_tmem),
                  "r"(sfb_tmem) : "memory");
}
// Block-scaled NVFP4 (kind::mxf4nvf4, e2m1 values, one ue4m3 scale per 16 values of K: scale_vec::4X).
__device__ __forceinline__ void umma_nvf4(unsigned d_tmem, unsigned long long a_desc, unsigned long long b_desc,
                                          unsigned idesc, unsigned sfa_tmem, unsigned sfb_tmem, bool accumulate) {
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %4, 0;\n"
               " tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [%0], %1, %2, %3, [%5], [%6], p;\n}\n"
               :: "r"(d_tmem), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"((unsigned)accumulate), "r"(sfa_tmem),
                  "r"(sfb_tmem) : "memory");
}

// ---- completion: the MMAs this thread issued so far arrive on an mbarrier when they finish ---
__device__ __forceinline__ void umma_commit(unsigned long long* bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];\n"
               :: "r"(smem_u32(bar)) : "memory");
}
// A CTA pair's MMAs: arrive on the barrier at the same offset in every CTA of `cta_mask`.
__device__ __forceinline__ void umma_commit_pair(unsigned long long* bar, unsigned short cta_mask) {
  asm volatile("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;\n"
               :: "r"(smem_u32(bar)), "h"(cta_mask) : "memory");
}

// ---- tensor memory -> registers: warp-wide, lane i of the warp gets lane (base lane + i) ------
// 32x32b.x16: 16 consecutive 32-bit columns of one lane per thread.  Wait before using them.
__device__ __forceinline__ void tmem_ld16(unsigned taddr, unsigned (&r)[16]) {
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x16.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, [%16];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7]),
                 "=r"(r[8]), "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]), "=r"(r[14]), "=r"(r[15])
               : "r"(taddr) : "memory");
}
__device__ __forceinline__ void tmem_wait_ld() { asm volatile("tcgen05.wait::ld.sync.aligned;\n" ::: "memory"); }
// Two fp32 bit patterns -> one bf16x2 word (round to nearest even); lo in the low 16 bits.
__device__ __forceinline__ unsigned pack_bf16x2(unsigned lo, unsigned hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(__uint_as_float(hi)), "f"(__uint_as_float(lo)));
  return r;
}

// ---- registers -> tensor memory: warp-wide, 32x32b (lane i of the warp writes lane base + i) ---
__device__ __forceinline__ void tmem_st1(unsigned taddr, unsigned v) {
  asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};\n" :: "r"(taddr), "r"(v) : "memory");
}
__device__ __forceinline__ void tmem_st4(unsigned taddr, unsigned v0, unsigned v1, unsigned v2, unsigned v3) {
  asm volatile("tcgen05.st.sync.aligned.32x32b.x4.b32 [%0], {%1, %2, %3, %4};\n"
               :: "r"(taddr), "r"(v0), "r"(v1), "r"(v2), "r"(v3) : "memory");
}
__device__ __forceinline__ void tmem_wait_st() { asm volatile("tcgen05.wait::st.sync.aligned;\n" ::: "memory"); }
// A plain arrival on an mbarrier (no transaction bytes).
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(smem_u32(bar)) : "memory");
}

// ---- shared memory -> tensor memory (the scale factors): one thread issues it ------------------
// 32x128b.warpx4: 32 rows of 16 bytes (described by an smem descriptor, no swizzle) copied to
// lanes 0-31 and repeated into each warp's quarter (lanes 32-63, 64-95, 96-127).
__device__ __forceinline__ void tmem_cp_32x128b_x4(unsigned taddr, unsigned long long sdesc) {
  asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;\n" :: "r"(taddr), "l"(sdesc) : "memory");
}

// ---- clusters -----------------------------------------------------------------------------------
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of every CTA in the cluster arrives, then waits for all of them.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The shared::cluster address of `p`'s offset in the shared memory of CTA `rank`.
__device__ __forceinline__ unsigned cluster_addr(const void* p, unsigned rank) {
  unsigned out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(smem_u32(p)), "r"(rank));
  return out;
}
// A TMA load of a CTA pair: the box lands in this CTA's shared memory, its bytes count on the
// barrier at shared::cluster address `bar_cluster` (the leader's).
__device__ __forceinline__ void tma_load_2d_pair(void* smem_dst, const TensorMap* map, int c0, int c1,
                                                unsigned bar_cluster) {
  asm volatile(
      "cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n"
      :: "r"(smem_u32(smem_dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar_cluster)
      : "memory");
}

}  // namespace course
#endif  // __CUDA_ARCH__ >= 900
