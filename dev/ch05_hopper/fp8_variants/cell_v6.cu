%%cuda fp8 --arch sm_90a -k "fp8_gemm<Fp8<128, 192, 4, 1, 8>>" -k "fp8_gemm<Fp8<128, 192, 4, 1, 8, true>>" -k "fp8_gemm<Fp8<128, 192, 4, 2, 8>>" -k "fp8_gemm<Fp8<128, 128, 6, 1, 8>>"
#include "course.cuh"     // the launch contract, smem_u32
#include "tma.cuh"        // TensorMap, mbarrier, TMA loads and stores
#include "wgmma.cuh"      // the smem descriptor, wgmma fence/commit/wait, wgmma m64nNk32 e4m3, the fragment
#include "pipeline.cuh"   // setmaxnreg, the bounded wait, clusters, the multicast load
using course::TensorMap;

// C (M, N) bf16 = (A · sa) (M, K) e4m3 · ((B · sb) (N, K) e4m3)^T with DeepSeek-style block scales:
//   sa (M, K/128) fp32: one scale per row of A per 128-wide block of K   (1 × 128 blocks);
//   sb (⌈N/128⌉, K/128) fp32: one per 128 × 128 block of B               (128 × 128 blocks).
// C[m, n] = Σ_kb sa[m, kb] · sb[n/128, kb] · Σ_{k in kb} A[m, k] · B[n, k]. Both operands are
// K-major (FP8 wgmma reads no other layout): B is the weight matrix as stored, (N, K).
// 05.03's warp-specialized persistent kernel with TILE_K = 128 (one scale block per k tile, 128
// bytes of fp8 per row: the 128-byte swizzle's span). Each consumer warpgroup runs the k tile's four
// wgmma m64nBNk32 into a fresh partial accumulator, waits for them, and PROMOTES: adds the partial,
// times its scales, to an fp32 accumulator in registers. FP8 wgmma's own accumulator keeps fewer
// mantissa bits than fp32; it never sums more than 128 products here. With TURNS (off in the
// reference: measured slower) the two consumer warpgroups take turns issuing their k tiles (two named
// barriers). BN = 192: a tile's columns meet two of B's 128-wide scale blocks, so the promotion
// takes each 64-column chunk's B scale from the right one.
template <int BM, int BN, int STAGES_, int CLUSTER_, int GROUP_M_, bool TURNS_ = false>
struct Fp8 {
  static constexpr int TILE_M = BM, TILE_N = BN, TILE_K = 128, STAGES = STAGES_, CLUSTER = CLUSTER_;
  static constexpr int GROUP_M = GROUP_M_;
  static constexpr bool TURNS = TURNS_;
  static constexpr int CONSUMERS = BM / 64;
  static constexpr int THREADS = 128 * (1 + CONSUMERS);
  static constexpr int A_BYTES = BM * TILE_K;                   // BM rows of 128 fp8
  static constexpr int B_BYTES = BN * TILE_K;                   // BN rows (of B's N) of 128 fp8
  static constexpr int B_SHARE = B_BYTES / CLUSTER;             // what one CTA of a cluster loads (and multicasts)
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int C_BOX_BYTES = 64 * 64 * 2;
  static constexpr int C_STAGE_BYTES = 2 * C_BOX_BYTES;         // per consumer: two 64 × 64 boxes, in turn
  static constexpr int RING_BYTES = STAGES * STAGE_BYTES;
  static constexpr int SMEM_BYTES = RING_BYTES + CONSUMERS * C_STAGE_BYTES + 1024;
  static constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
  static_assert(BN == 128 || BN == 192, "BN = 128 (one B scale block per tile) or 192 (two)");
  static_assert(!TURNS_ || BM == 128, "turns: two consumer warpgroups");
  static_assert((BN / CLUSTER) % 8 == 0, "each CTA's share of B: whole 8-row swizzle atoms");
};

// The consumers' bounded wait: the usual try_wait inline, the slow path (the clock and the trap) in a
// function of its own. A __trap() inlined into the consumers' loop costs spills: ptxas then keeps
// their code within the 168 registers a thread has at launch instead of setmaxnreg's 232 (nvcc and
// NVRTC 13.0); behind a call it does not.
__device__ __noinline__ void mbar_wait_slow(unsigned long long* bar, unsigned parity) {
  const long long start = clock64();
  while (!course::mbar_try_wait(bar, parity))
    if (clock64() - start > (1ll << 32)) __trap();
}
__device__ __forceinline__ void mbar_wait_lean(unsigned long long* bar, unsigned parity) {
  if (!course::mbar_try_wait(bar, parity)) mbar_wait_slow(bar, parity);
}

// A value the compiler must take as it is (an opaque register move): the next slot's wgmma descriptors
// go through it, or ptxas rebuilds them from the shared window's base (S2UR SR_CgaCtaId and a dozen
// uniform ops) right before each k tile's first wgmma, on the path from a promotion to the next wgmmas.
__device__ __forceinline__ unsigned long long opaque(unsigned long long x) {
  asm volatile("mov.b64 %0, %1;" : "=l"(x) : "l"(x));
  return x;
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
fp8_gemm(const __grid_constant__ TensorMap a_map,   // A (M, K) e4m3: box 128 columns × TILE_M rows
         const __grid_constant__ TensorMap b_map,   // B (N, K) e4m3: box 128 columns × TILE_N / CLUSTER rows
         const __grid_constant__ TensorMap c_map,   // C (M, N) bf16: box 64 columns × 64 rows (stores)
         const float* __restrict__ sa,              // (M, K / 128)
         const float* __restrict__ sb,              // (⌈N / 128⌉, K / 128)
         int M, int N, int K)
{
  constexpr int S = Cfg::STAGES, BM = Cfg::TILE_M, BN = Cfg::TILE_N, BK = Cfg::TILE_K, CL = Cfg::CLUSTER;
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long full[S], empty[S];
  unsigned char* base = smem_raw + ((1024 - (course::smem_u32(smem_raw) & 1023)) & 1023);
  auto a_slot = [&](int s) { return base + s * Cfg::STAGE_BYTES; };
  auto b_slot = [&](int s) { return base + s * Cfg::STAGE_BYTES + Cfg::A_BYTES; };

  const int rank = CL > 1 ? course::cluster_ctarank() : 0;
  const int cluster = CL > 1 ? course::cluster_id_x() : blockIdx.x;
  const int clusters = CL > 1 ? course::cluster_count_x() : gridDim.x;
  const int tiles_n = (N + BN - 1) / BN, units_m = ((M + BM - 1) / BM + CL - 1) / CL;
  const int units = units_m * tiles_n, k_tiles = K / BK;       // K: a multiple of 128 (the scale blocks)
  auto tile_of = [&](int u, int& m0, int& n0) {
    int um = u / tiles_n, un = u % tiles_n;
    if (Cfg::GROUP_M > 0) {
      const int per_group = Cfg::GROUP_M * tiles_n, first = (u / per_group) * Cfg::GROUP_M;
      const int rows = min(units_m - first, Cfg::GROUP_M);
      um = first + (u % per_group) % rows;
      un = (u % per_group) / rows;
    }
    m0 = (um * CL + rank) * BM;
    n0 = un * BN;
  };

  if (threadIdx.x == 0) {
    course::prefetch_tensormap(&a_map);
    course::prefetch_tensormap(&b_map);
    for (int s = 0; s < S; ++s) {
      course::mbar_init(&full[s], 1);
      course::mbar_init(&empty[s], Cfg::CONSUMERS * CL);
    }
    course::fence_mbarrier_init();
  }
  if constexpr (CL > 1) course::cluster_sync();
  else __syncthreads();

  const int wg = __shfl_sync(0xffffffff, threadIdx.x / 128, 0);   // the same in every lane: uniform registers
  if (wg == 0) {
    // ---------------------------------------------------------------- the producer (05.03's)
    course::setmaxnreg_dec<Cfg::PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      int it = 0;
      for (int u = cluster; u < units; u += clusters) {
        int m0, n0;
        tile_of(u, m0, n0);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % S;
          course::mbar_wait_or_trap(&empty[s], ((it / S) & 1) ^ 1);
          course::mbar_arrive_expect_tx(&full[s], Cfg::STAGE_BYTES);
          course::tma_load_2d(a_slot(s), &a_map, kt * BK, m0, &full[s]);
          const int r0 = rank * (BN / CL);                   // this CTA's rows of the B tile
          if constexpr (CL > 1)
            course::tma_load_2d_multicast(b_slot(s) + r0 * BK, &b_map, kt * BK, n0 + r0, &full[s], (1 << CL) - 1);
          else
            course::tma_load_2d(b_slot(s), &b_map, kt * BK, n0, &full[s]);
        }
      }
    }
  } else {
    // ---------------------------------------------------------------- the consumers
    course::setmaxnreg_inc<Cfg::CONSUMER_REGS>();
    const int c = wg - 1, rows = c * 64;             // consumer c: rows 64c .. 64c + 63 of the tile
    const bool signaller = threadIdx.x % 128 == 0;
    auto release = [&](int s) {
      if (signaller) {
        if constexpr (CL > 1) {
          for (int r = 0; r < CL; ++r) course::mbar_arrive_cluster(&empty[s], r);
        } else {
          course::mbar_arrive(&empty[s]);
        }
      }
    };
    unsigned char* c_stage = base + Cfg::RING_BYTES + c * Cfg::C_STAGE_BYTES;
    const int kb_count = K / 128;
    float acc[BN / 2];                               // fp32: the promoted sum over the k tiles done
    float part[BN / 2];                              // the wgmmas' accumulator: one k tile (128 products) only
    // turns: consumer c waits on barrier 3 + c before issuing a k tile and arrives on the other's after;
    // consumer 0 goes first, and consumer 1 skips the arrival after its very last k tile (none waits)
    if constexpr (Cfg::TURNS)
      if (c == 1 && cluster < units) course::named_barrier_arrive(3, 256);
    // slot 0's descriptors, made once: slot s's are s · STAGE_BYTES further on (a descriptor holds the
    // address / 16); the slot and its phase are counted along, across tiles, and the next slot's
    // descriptors are made while a k tile's wgmmas run (da_s, db_s: slot s's)
    const unsigned long long da0 = opaque(course::make_smem_desc(course::smem_u32(a_slot(0)) + rows * 128, 16,
                                                                 1024, course::DESC_SWIZZLE_128B));
    const unsigned long long db0 = opaque(course::make_smem_desc(course::smem_u32(b_slot(0)), 16, 1024,
                                                                 course::DESC_SWIZZLE_128B));
    unsigned long long da_s = da0, db_s = db0;
    int s = 0;
    unsigned phase = 0;
    for (int u = cluster; u < units; u += clusters) {
      int m0, n0;
      tile_of(u, m0, n0);
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
      // this thread's two rows of C (the fragment's g and g + 8) and their rows of sa
      const int r_lo = m0 + rows + course::wgmma_acc_row(0), r_hi = r_lo + 8;
      const float* sa_lo = sa + (size_t)min(r_lo, M - 1) * kb_count;   // rows past M: clamped (their C is dropped)
      const float* sa_hi = sa + (size_t)min(r_hi, M - 1) * kb_count;
      // B's scale blocks: the tile's columns before `split` are in block n0 / 128, the rest (BN = 192
      // only) in the next one; 64-column chunks never straddle the boundary (n0 is a multiple of 64)
      const int split = 128 - n0 % 128, nb = (N + 127) / 128;
      const float* sb_n = sb + (size_t)(n0 / 128) * kb_count;
      const float* sb_n2 = sb + (size_t)min(n0 / 128 + 1, nb - 1) * kb_count;
      // the scales of k block k: A's for this thread's two rows, B's for the tile's block(s) of columns
      auto scales = [&](int k, float& lo, float& hi, float& b, float& b2) {
        lo = __ldg(sa_lo + k); hi = __ldg(sa_hi + k); b = __ldg(sb_n + k);
        b2 = BN > 128 ? __ldg(sb_n2 + k) : b;
      };
      float scale_lo, scale_hi, scale_b, scale_b2;   // k block kt's
      scales(0, scale_lo, scale_hi, scale_b, scale_b2);
      mbar_wait_lean(&full[s], phase);
      for (int kt = 0; kt < k_tiles; ++kt) {
        const unsigned long long da = da_s, db = db_s;
        if constexpr (Cfg::TURNS) course::named_barrier_sync(3 + c, 256);   // the other has issued its k tile
        course::wgmma_fence_operand(part);
        course::wgmma_fence();
        // 1. the k tile's four wgmma m64nBNk32 into `part`: the first overwrites it (scale-d 0),
        //    each next one advances both descriptors 32 bytes (32 fp8) along the 128-byte rows
        // BEGIN SOLUTION
#pragma unroll
        for (int k = 0; k < BK / 32; ++k)
          course::wgmma_e4m3(part, course::desc_advance(da, 32 * k), course::desc_advance(db, 32 * k), k > 0 ? 1 : 0);
        // END SOLUTION
        course::wgmma_commit();
        if constexpr (Cfg::TURNS)
          if (c == 0 || u + clusters < units || kt + 1 < k_tiles) course::named_barrier_arrive(4 - c, 256);
        // while they run: the next k tile's slot, scales and data (there long since, as a rule), so that
        // after the wait only the promotion stands between this k tile and the next one's wgmmas
        const int s_next = s + 1 == S ? 0 : s + 1;
        const unsigned phase_next = s_next == 0 ? phase ^ 1 : phase;
        float next_lo, next_hi, next_b, next_b2;
        scales(min(kt + 1, k_tiles - 1), next_lo, next_hi, next_b, next_b2);
        da_s = opaque(course::desc_advance(da0, s_next * Cfg::STAGE_BYTES));
        db_s = opaque(course::desc_advance(db0, s_next * Cfg::STAGE_BYTES));
        if (kt + 1 < k_tiles) mbar_wait_lean(&full[s_next], phase_next);
        course::wgmma_wait<0>();
        course::wgmma_fence_operand(part);
        release(s);                                  // the slot's tiles are read: the producer may refill it
        // 2. promotion: acc += part · (the row's A scale) · (the column's B scale); elements 32q .. 32q + 31
        //    of the fragment are columns 64q .. 64q + 63 of the tile (wgmma_acc_col), one B block
        // BEGIN SOLUTION
        float s_lo[BN / 64], s_hi[BN / 64];
#pragma unroll
        for (int q = 0; q < BN / 64; ++q) {
          const float b = 64 * q < split ? scale_b : scale_b2;
          s_lo[q] = scale_lo * b;
          s_hi[q] = scale_hi * b;
        }
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = fmaf(part[i], (i & 2) ? s_hi[i / 32] : s_lo[i / 32], acc[i]);
        // END SOLUTION
        s = s_next, phase = phase_next;
        scale_lo = next_lo, scale_hi = next_hi, scale_b = next_b, scale_b2 = next_b2;
      }
      // the epilogue: bf16 pairs into a 64 × 64 staging box, 128-byte swizzled, then a TMA store; two
      // boxes in turn, so one is written while the other's store is still reading it
#pragma unroll
      for (int h = 0; h < BN / 64; ++h) {
        unsigned char* box = c_stage + (h % 2) * Cfg::C_BOX_BYTES;
        if (signaller) course::bulk_wait_read<1>();
        course::named_barrier_sync(wg, 128);
#pragma unroll
        for (int i = 32 * h; i < 32 * h + 32; i += 2) {
          const int row = course::wgmma_acc_row(i), col = course::wgmma_acc_col(i) - 64 * h;
          unsigned char* p = box + row * 128 + (((col / 8) ^ (row & 7)) << 4) + (col % 8) * 2;
          *reinterpret_cast<unsigned*>(p) = course::pack_bf16x2(acc[i], acc[i + 1]);
        }
        course::fence_proxy_async();
        course::named_barrier_sync(wg, 128);
        if (signaller) {
          if (n0 + 64 * h < N) course::tma_store_2d(&c_map, box, n0 + 64 * h, m0 + rows);
          course::bulk_commit();
        }
      }
    }
    if (signaller) course::bulk_wait_read<0>();
  }
  if constexpr (CL > 1) course::cluster_sync();
}
