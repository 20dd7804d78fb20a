%%cuda fp8 --arch sm_90a -k "fp8_gemm<Fp8<128, 192, 4, 1, 8>>" -k "fp8_gemm<Fp8<128, 192, 4, 1, 8, true>>" -k "fp8_gemm<Fp8<128, 192, 4, 2, 8>>" -k "fp8_gemm<Fp8<128, 128, 5, 1, 8>>"
#include "course.cuh"     // the launch contract, smem_u32
#include "tma.cuh"        // TensorMap, mbarrier, TMA loads and stores
#include "wgmma.cuh"      // the smem descriptor, wgmma fence/commit/wait, wgmma m64nNk32 e4m3, the fragment
#include "pipeline.cuh"   // setmaxnreg, the bounded wait, clusters, the multicast load
using course::TensorMap;

// C (M, N) bf16 = (A · sa) (M, K) e4m3 · ((B · sb) (N, K) e4m3)^T with DeepSeek-style block scales,
// stored k-block-major (one row per 128-wide block of K, padded to 16 bytes):
//   sa (K/128, M) fp32: one scale per row of A per 128-wide block of K   (1 × 128 blocks);
//   sb (K/128, ⌈N/128⌉) fp32: one per 128 × 128 block of B               (128 × 128 blocks).
// C[m, n] = Σ_kb sa[kb, m] · sb[kb, n/128] · Σ_{k in kb} A[m, k] · B[n, k]. Both operands are
// K-major (FP8 wgmma reads no other layout): B is the weight matrix as stored, (N, K). A k tile's
// scales are part of its ring slot: the producer loads the tile's 128 row scales of sa and 8 of sb's
// with A's and B's tiles, on the same full barrier.
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
  static constexpr int SB_BOX = 8;                              // sb's box: blocks (n0 / 128) & ~3 … + 7
  static constexpr int SCALE_BYTES = BM * 4 + SB_BOX * 4;       // a k tile's scales: sa's rows, sb's box
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
         const __grid_constant__ TensorMap sa_map,  // sa (K / 128, M) fp32: box TILE_M scales × 1 k block
         const __grid_constant__ TensorMap sb_map,  // sb (K / 128, ⌈N / 128⌉) fp32: box 8 scales × 1 k block
         int M, int N, int K)
{
  constexpr int S = Cfg::STAGES, BM = Cfg::TILE_M, BN = Cfg::TILE_N, BK = Cfg::TILE_K, CL = Cfg::CLUSTER;
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long full[S], empty[S];
  // slot s's scales (TMA destinations: 128-byte aligned): sa of the tile's rows, sb of 8 blocks of columns
  __shared__ alignas(128) float sa_s[S][BM];
  __shared__ alignas(128) float sb_s[S][32];
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
    course::prefetch_tensormap(&sa_map);
    course::prefetch_tensormap(&sb_map);
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
          course::mbar_arrive_expect_tx(&full[s], Cfg::STAGE_BYTES + Cfg::SCALE_BYTES);
          course::tma_load_2d(a_slot(s), &a_map, kt * BK, m0, &full[s]);
          // k block kt's scales: the tile's rows of sa; sb from block (n0 / 128) & ~3 (a box starting off
          // a 16-byte boundary failed: a multiple of 4 floats), 8 blocks, past the last read as 0
          course::tma_load_2d(sa_s[s], &sa_map, m0, kt, &full[s]);
          course::tma_load_2d(sb_s[s], &sb_map, (n0 / 128) & ~3, kt, &full[s]);
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
    int s = 0, stored = 0;                           // stored: the staging boxes this consumer has stored
    unsigned phase = 0;
    for (int u = cluster; u < units; u += clusters) {
      int m0, n0;
      tile_of(u, m0, n0);
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
      // this thread's two rows of the tile (the fragment's g and g + 8): their places in a slot's sa
      // (rows past M were read as 0; their C is dropped)
      const int r_lo = rows + course::wgmma_acc_row(0), r_hi = r_lo + 8;
      // B's scales: 64-column chunk q of the tile is in block (n0 + 64q) / 128 (n0 is a multiple of 64: a
      // chunk never straddles two blocks), at jb[q] in a slot's box, which starts at block (n0 / 128) & ~3
      int jb[BN / 64];
#pragma unroll
      for (int q = 0; q < BN / 64; ++q) jb[q] = (n0 + 64 * q) / 128 - ((n0 / 128) & ~3);
      // a k tile's scales, from its slot once the slot's full barrier has been waited on
      auto scales = [&](int slot, float& lo, float& hi, float (&b)[BN / 64]) {
        lo = sa_s[slot][r_lo];
        hi = sa_s[slot][r_hi];
#pragma unroll
        for (int q = 0; q < BN / 64; ++q) b[q] = sb_s[slot][jb[q]];
      };
      float scale_lo, scale_hi, scale_b[BN / 64];    // k tile kt's: this thread's two rows, each chunk's block
      mbar_wait_lean(&full[s], phase);
      scales(s, scale_lo, scale_hi, scale_b);
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
        float next_lo = 0.f, next_hi = 0.f, next_b[BN / 64] = {};
        da_s = opaque(course::desc_advance(da0, s_next * Cfg::STAGE_BYTES));
        db_s = opaque(course::desc_advance(db0, s_next * Cfg::STAGE_BYTES));
        if (kt + 1 < k_tiles) {
          mbar_wait_lean(&full[s_next], phase_next);
          scales(s_next, next_lo, next_hi, next_b);
        }
        course::wgmma_wait<0>();
        course::wgmma_fence_operand(part);
        release(s);                                  // the slot's tiles are read: the producer may refill it
        // 2. promotion: acc += part · (the row's A scale) · (the column's B scale); elements 32q .. 32q + 31
        //    of the fragment are columns 64q .. 64q + 63 of the tile (wgmma_acc_col): chunk q, B scale scale_b[q]
        // BEGIN SOLUTION
        float s_lo[BN / 64], s_hi[BN / 64];
#pragma unroll
        for (int q = 0; q < BN / 64; ++q) {
          s_lo[q] = scale_lo * scale_b[q];
          s_hi[q] = scale_hi * scale_b[q];
        }
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = fmaf(part[i], (i & 2) ? s_hi[i / 32] : s_lo[i / 32], acc[i]);
        // END SOLUTION
        s = s_next, phase = phase_next;
        scale_lo = next_lo, scale_hi = next_hi;
#pragma unroll
        for (int q = 0; q < BN / 64; ++q) scale_b[q] = next_b[q];
      }
      // the epilogue: bf16 pairs into a 64 × 64 staging box, 128-byte swizzled, then a TMA store; two
      // boxes in turn, so one is written while the other's store may still be reading it. In turn
      // across tiles too: a tile of 192 stores three boxes, and box h % 2 would start the next tile on
      // the box its last store may still be reading (wrong chunks, now and then)
#pragma unroll
      for (int h = 0; h < BN / 64; ++h) {
        unsigned char* box = c_stage + ((stored + h) % 2) * Cfg::C_BOX_BYTES;
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
      stored += BN / 64;
    }
    if (signaller) course::bulk_wait_read<0>();
  }
  if constexpr (CL > 1) course::cluster_sync();
}
