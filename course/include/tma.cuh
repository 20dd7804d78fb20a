// generated from grader/include/tma.cuh by `python -m grader release`: read it here, edit it there
// tma.cuh -- the Tensor Memory Accelerator (TMA) and the mbarrier, from chapter 05 on.
//
// Like course.cuh: each helper is a thin, named wrapper around one PTX instruction, so
// the SASS you get is the instruction you asked for.  The bulk tensor copies and the
// mbarrier's transaction count need sm_90 (Hopper) or newer; they are only defined when
// compiling for such a target (or in a host pass).
//
// A tensor map (CUtensorMap in the driver API) is 128 opaque bytes the host encodes with
// cuTensorMapEncodeTiled (grader/cuda/tma.py does it from Python).  The kernel receives it
// by value, as a `const __grid_constant__ course::TensorMap` parameter, and hands TMA its
// address: the map then stays in the kernel's parameter space, where TMA may read it.
#pragma once
#include "course.cuh"

namespace course {

// The layout of CUtensorMap (cuda.h), without including the driver's header.
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

}  // namespace course

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

namespace course {

// ---- mbarrier: a 64-bit barrier object in shared memory ----------------------------
// It counts two things in its current phase: pending arrivals (set by init) and pending
// transaction bytes (raised by expect-tx, lowered by the bytes a TMA copy delivers).  When
// both reach zero the phase completes and the next one begins.  Phases alternate parity
// 0, 1, 0, 1...; a waiter names the parity of the phase it waits for.
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(smem_u32(bar)), "r"(arrivals) : "memory");
}
// Makes the initialised barriers visible to the async proxy (TMA) and other threads:
// follow with __syncthreads() before anyone uses them.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival, and `bytes` more transaction bytes expected in this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
               :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
}
// True once the phase of parity `parity` has completed.  A barrier in phase k (not yet
// complete) answers true for parity (k - 1) & 1 -- the phase before -- at once.  The _at form
// takes the barrier's shared-memory address (smem_u32), for a kernel that computes it once.
__device__ __forceinline__ bool mbar_try_wait_at(unsigned bar, unsigned parity) {
  unsigned done;
  asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
               " selp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done != 0;
}
__device__ __forceinline__ bool mbar_try_wait(unsigned long long* bar, unsigned parity) {
  return mbar_try_wait_at(smem_u32(bar), parity);
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

// ---- bulk tensor copies (TMA) ----------------------------------------------------------
// Coordinates are in elements, innermost dimension first: {column, row} of a row-major
// matrix.  Parts of the box outside the tensor are filled with zeros on a load and
// skipped on a store.
__device__ __forceinline__ void prefetch_tensormap(const TensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" :: "l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}
// global -> shared: the box at (c0, c1) lands in `smem_dst` (laid out as the map's
// swizzle says); its bytes count down `bar`'s transaction count.
__device__ __forceinline__ void tma_load_2d(void* smem_dst, const TensorMap* map, int c0, int c1,
                                           unsigned long long* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n"
      :: "r"(smem_u32(smem_dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1),
         "r"(smem_u32(bar))
      : "memory");
}
// shared -> global: `smem_src` (in the map's swizzled layout) is written to the box at
// (c0, c1).  Stores issued since the last commit form one bulk group.
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, const void* smem_src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];\n"
               :: "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_u32(smem_src)), "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Wait until at most N bulk groups still READ their shared memory (the source may then
// be overwritten).  The writes to global memory finish on their own before the kernel ends.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" :: "n"(N) : "memory");
}

// ---- the async proxy ----------------------------------------------------------------------
// TMA reads shared memory through the "async proxy", which does not see ordinary stores
// in order.  Each thread that wrote shared memory TMA will read fences its writes, then a
// barrier, then one thread issues the store.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

}  // namespace course

#endif  // __CUDA_ARCH__ >= 900
