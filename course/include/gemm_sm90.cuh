// generated from grader/include/gemm_sm90.cuh by `python -m grader release`: read it here, edit it there
// gemm_sm90.cuh -- 05.03's warp-specialized bf16 GEMM in named pieces, for the kernels of 05.05 on.
//
// Lesson 05.03 writes these steps inline in its kernel (they are its exercise); from 05.05 on a
// kernel calls them and spends its lines on what is new -- the schedule of the work, the epilogue.
// Clusters are not used here (CLUSTER = 1): a Stream-K CTA's k range is its own.
//
// What lives here:
//   * grouped_tile: 05.03's tile order (GROUP_M tile rows, then one column right);
//   * Ring<Cfg>: the slots of the TMA -> wgmma ring in shared memory and their full/empty barriers;
//   * load_k_range (producer) and mma_k_range (consumers): k tiles [kb, ke) of one output tile,
//     counting ring uses across calls (`it`), so the parities run on from tile to tile;
//   * store_tile<Cfg, Epi>: the epilogue -- Epi::apply(acc, bias[n]) per element, bf16 pairs into
//     the 128-byte-swizzled staging boxes, TMA stores (clipped at C's edges);
//   * sums and counts in global memory for the CTAs of one grid: vector fp32 atomic adds, a release
//     add, a bounded acquire wait;
//   * tanh_approx (the MUFU.TANH instruction), for GELU.
// The Cfg type states TILE_M, TILE_N, TILE_K (64), STAGES, CONSUMERS, A_BYTES, B_BOX_BYTES, B_BOXES,
// STAGE_BYTES, C_BOX_BYTES (see 05.03's Ws).
#pragma once
#include "course.cuh"
#include "tma.cuh"
#include "wgmma.cuh"
#include "pipeline.cuh"

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)

namespace course {
namespace sm90 {

// Tile u of a tiles_m × tiles_n grid, in groups of group_m tile rows (0: row by row) -> (tm, tn).
__device__ __forceinline__ void grouped_tile(int u, int tiles_m, int tiles_n, int group_m, int& tm, int& tn) {
  tm = u / tiles_n;
  tn = u % tiles_n;
  if (group_m > 0) {
    const int per_group = group_m * tiles_n, first = (u / per_group) * group_m;
    const int rows = min(tiles_m - first, group_m);
    tm = first + (u % per_group) % rows;
    tn = (u % per_group) / rows;
  }
}

template <class Cfg>
struct Ring {
  unsigned char* base;              // 1024-aligned: STAGES slots of (A: TILE_M × 64, B: B_BOXES × (64 × 64)) bf16
  unsigned long long* full;         // [STAGES]: 1 arrival (expect-tx) + the slot's bytes
  unsigned long long* empty;        // [STAGES]: CONSUMERS arrivals
  __device__ unsigned char* a_slot(int s) const { return base + s * Cfg::STAGE_BYTES; }
  __device__ unsigned char* b_slot(int s) const { return base + s * Cfg::STAGE_BYTES + Cfg::A_BYTES; }
  __device__ void init() const {    // one thread, before the CTA-wide barrier
    for (int s = 0; s < Cfg::STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], Cfg::CONSUMERS);
    }
    fence_mbarrier_init();
  }
};

// The producer's thread: loads k tiles kb .. ke - 1 of the tile at (m0, n0); `it` counts the
// ring's uses over every call (slot it % STAGES, its (it / STAGES)-th fill).
template <class Cfg>
__device__ __forceinline__ void load_k_range(const Ring<Cfg>& r, const TensorMap* a_map, const TensorMap* b_map,
                                             int m0, int n0, int kb, int ke, int& it) {
  constexpr int S = Cfg::STAGES, BK = Cfg::TILE_K;
  for (int kt = kb; kt < ke; ++kt, ++it) {
    const int s = it % S;
    mbar_wait_or_trap(&r.empty[s], ((it / S) & 1) ^ 1);
    mbar_arrive_expect_tx(&r.full[s], Cfg::STAGE_BYTES);
    tma_load_2d(r.a_slot(s), a_map, kt * BK, m0, &r.full[s]);
#pragma unroll
    for (int j = 0; j < Cfg::B_BOXES; ++j)
      tma_load_2d(r.b_slot(s) + j * Cfg::B_BOX_BYTES, b_map, n0 + 64 * j, kt * BK, &r.full[s]);
  }
}

// A consumer warpgroup (rows `rows` .. rows + 63 of the tile): acc = the sum over k tiles kb .. ke - 1
// (the first k step overwrites acc), each slot released once its wgmmas are done. Returns with acc final.
template <class Cfg, int R>
__device__ __forceinline__ void mma_k_range(const Ring<Cfg>& r, float (&acc)[R], int rows, int kb, int ke, int& it) {
  constexpr int S = Cfg::STAGES, BK = Cfg::TILE_K;
  const bool signaller = threadIdx.x % 128 == 0;
  for (int kt = kb; kt < ke; ++kt, ++it) {
    const int s = it % S;
    mbar_wait_or_trap(&r.full[s], (it / S) & 1);
    const unsigned long long da = make_smem_desc(smem_u32(r.a_slot(s)) + rows * 128, 16, 1024, DESC_SWIZZLE_128B);
    const unsigned long long db = make_smem_desc(smem_u32(r.b_slot(s)), Cfg::B_BOX_BYTES, 1024, DESC_SWIZZLE_128B);
    wgmma_fence_operand(acc);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < BK / 16; ++k)
      wgmma_bf16<0, 1>(acc, desc_advance(da, 32 * k), desc_advance(db, 2048 * k), (kt > kb || k > 0) ? 1 : 0);
    wgmma_commit();
    wgmma_fence_operand(acc);
    wgmma_wait<1>();                               // the previous k tile's wgmmas are done: release its slot
    wgmma_fence_operand(acc);
    if (kt > kb && signaller) mbar_arrive(&r.empty[(it - 1) % S]);
  }
  wgmma_wait<0>();
  wgmma_fence_operand(acc);
  if (signaller) mbar_arrive(&r.empty[(it - 1) % S]);
}

// The epilogue of one consumer warpgroup: its 64 × TILE_N accumulators, each through
// Epi::apply(value, bias of its column) (bias read only when Epi::BIAS), rounded to bf16 in
// pairs into its two 64 × 64 staging boxes (128-byte swizzle), TMA-stored 128 columns at a time.
template <class Cfg, class Epi, int R>
__device__ __forceinline__ void store_tile(float (&acc)[R], const TensorMap* c_map, unsigned char* c_stage,
                                           int m0, int n0, int rows, int wg, const unsigned short* bias, int N) {
  const bool signaller = threadIdx.x % 128 == 0;
#pragma unroll
  for (int h = 0; h < Cfg::TILE_N / 128; ++h) {
    if (signaller) bulk_wait_read<0>();            // our previous stores have read the staging boxes
    named_barrier_sync(wg, 128);
    // Staging addresses: one base per thread, immediates, and the 128-byte swizzle's XOR of the 16-byte
    // chunk with row % 8 -- the lane's g = lane / 4 for all its elements -- kept opaque per box. Written
    // out from row/column, ptxas 13.0.48 (NVRTC 13.0, torch cu130's) hoisted all 32 addresses out of
    // the tile loop and spilled them (a rubric failure on the H100, 2026-11-24); 13.5 did not.
#pragma unroll
    for (int box = 0; box < 2; ++box) {          // 64 columns at a time: 8 bias pairs live, not 16
      unsigned swz = ((threadIdx.x % 32) / 4) << 4;
      asm volatile("" : "+r"(swz));
      // this thread's first element: row wgmma_acc_row(0), byte 4 · (lane % 4) of its 16-byte chunk
      unsigned char* const base = c_stage + wgmma_acc_row(0) * 128 + 4 * (threadIdx.x % 4);
      unsigned bias2[Epi::BIAS ? 8 : 1];         // this thread's column pairs of the box: one 4-byte load each
      if constexpr (Epi::BIAS) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int n = n0 + 128 * h + 64 * box + 8 * j + 2 * (threadIdx.x % 4);
          bias2[j] = n < N ? __ldg(reinterpret_cast<const unsigned*>(bias + n)) : 0u;   // N % 8 == 0: n + 1 < N too
        }
      }
#pragma unroll
      for (int i = 64 * h + 32 * box; i < 64 * h + 32 * box + 32; i += 2) {
        const unsigned pair = Epi::BIAS ? bias2[(i % 32) / 4] : 0u;
        const float b0 = __uint_as_float(pair << 16), b1 = __uint_as_float(pair & 0xFFFF0000u);
        // element i: row wgmma_acc_row(i) = the lane's row + 8 · ((i / 2) % 2), 16-byte chunk (i / 4) % 8
        unsigned char* p = base + box * Cfg::C_BOX_BYTES + ((i >> 1) & 1) * 1024 + ((((i >> 2) & 7) << 4) ^ swz);
        *reinterpret_cast<unsigned*>(p) = pack_bf16x2(Epi::apply(acc[i], b0), Epi::apply(acc[i + 1], b1));
      }
    }
    fence_proxy_async();
    named_barrier_sync(wg, 128);
    if (signaller) {
      tma_store_2d(c_map, c_stage, n0 + 128 * h, m0 + rows);
      tma_store_2d(c_map, c_stage + Cfg::C_BOX_BYTES, n0 + 128 * h + 64, m0 + rows);
      bulk_commit();
    }
  }
}

// ---- counts and sums between the CTAs of one grid ----------------------------------------------
// Four fp32 atomic adds at L2 in one instruction (sm_90), relaxed, no value returned.
__device__ __forceinline__ void red_add_v4(float4* p, float4 v) {
  asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n"
               :: "l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
}
// An atomic add with release semantics at GPU scope: every write this thread made -- and, after a
// barrier, every write of the threads that synchronised with it -- is visible to whoever acquires
// the new value.
__device__ __forceinline__ void red_add_release_gpu(int* p, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// Spin until *p == value; trap after about 2^32 cycles (two seconds), as mbar_wait_or_trap.
__device__ __forceinline__ void wait_flag_or_trap(const int* p, int value) {
  if (ld_acquire_gpu(p) == value) return;
  const long long start = clock64();
  while (ld_acquire_gpu(p) != value) {
    if (clock64() - start > (1ll << 32)) __trap();
  }
}

// tanh(x) by the special-function unit (MUFU.TANH): relative error about 2^-11, below bf16's 2^-8.
__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace sm90
}  // namespace course

#endif  // sm_90a
