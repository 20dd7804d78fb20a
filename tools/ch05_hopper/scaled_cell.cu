%%cuda bs --arch sm_100a -k "scaled_gemm<S<false>>" -k "scaled_gemm<S<true>>"
#include "course.cuh"    // the launch contract, smem_u32
#include "tcgen05.cuh"   // tensor memory, block-scaled tcgen05.mma, TMA (tma.cuh)
using course::TensorMap;

// Block-scaled GEMM, "TN": C (M, N) fp32 = Σ_k (A[m, k]·sa[m, k / V]) (B[n, k]·sb[n, k / V]), A (M, K)
// and B (N, K) both K-major (row-major with K innermost), one scale factor per V values of K.
//   MXFP8: e4m3 values, ue8m0 scales (2^(s − 127)), V = 32: kind::mxf8f6f4.block_scale
//   NVFP4: e2m1 values packed two a byte (low nibble first), ue4m3 scales, V = 16:
//          kind::mxf4nvf4.block_scale.scale_vec::4X
// A 128 × 128 tile of C per CTA; a stage is 128 bytes of K (128 fp8 / 256 fp4 values), 4 MMAs of
// 32 bytes each. The scale factors live in tensor memory beside the accumulator, in "atoms" of 128
// rows × 4 blocks of K: 4 columns, where lane r (in every quarter of the lanes: the same 32 lanes
// repeated 4 times) holds in column i the 4 block scales of row r + 32·i, byte k for block k. This
// is the layout CUTLASS's scale-factor copy (tcgen05.cp 32x128b.warpx4 of the 128 × 4 tile) makes.
// MXFP8: one atom per stage (4 blocks of 32 = the stage's 4 MMAs); MMA j reads byte j (the
// descriptor's scale-factor id). NVFP4: 4 atoms per stage (16 blocks of 16); MMA j reads atom j.
// Warps 2–5 write them (tcgen05.st) from global memory.
template <bool NVF4_>
struct S {
  static constexpr bool NVF4 = NVF4_;
  static constexpr int BM = 128, BN = 128, BK_BYTES = 128, STAGES = 4, THREADS = 192;
  static constexpr int V = NVF4 ? 16 : 32;                   // values per scale factor
  static constexpr int BK = NVF4 ? 256 : 128;                // values of K per stage
  static constexpr int SF_PER_STAGE = BK / V;                // scales per row per stage: 16 or 4
  static constexpr int ATOMS = SF_PER_STAGE / 4;             // 128-row × 4-block atoms per stage: 4 or 1
  static constexpr int SF_COLS = 4 * ATOMS;                  // TMEM columns per stage, per operand: 16 or 4
  static constexpr int TILE_M = BM, TILE_N = BN, TILE_K = BK;
  static constexpr int TILE_BYTES = BM * BK_BYTES;           // 16 KiB: A's tile, and B's
  static constexpr int STAGE_BYTES = 2 * TILE_BYTES;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;
  static constexpr int SFA_COL = BN, SFB_COL = BN + STAGES * SF_COLS;   // after the accumulator
  static constexpr int TMEM_COLS = 256;                      // 128 + 2·4·SF_COLS (160 or 256), a power of 2
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1)     // ", 1": nvcc 13.0 otherwise held it to 40 registers and spilled
scaled_gemm(const __grid_constant__ TensorMap a_map,   // A (M, K bytes) uint8: boxes 128 rows × 128 B, 128B swizzle
            const __grid_constant__ TensorMap b_map,   // B (N, K bytes) uint8: the same
            const unsigned char* __restrict__ sfa,     // (M, K / V) scale bytes
            const unsigned char* __restrict__ sfb,     // (N, K / V) scale bytes
            float* __restrict__ c,                     // C (M, N) fp32
            int M, int N, int K,
            unsigned idesc,                            // block-scaled instruction descriptor, scale ids 0
            unsigned long long ab_desc)                // A's and B's smem descriptor, start 0 (K-major, 128B)
{
  constexpr int ST = Cfg::STAGES;
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long full[ST], sf_full[ST], empty[ST], acc_full;
  __shared__ unsigned tmem_base;
  unsigned char* base = smem_raw + ((1024 - (course::smem_u32(smem_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int m0 = blockIdx.x * Cfg::BM, n0 = blockIdx.y * Cfg::BN;
  const int k_tiles = (K + Cfg::BK - 1) / Cfg::BK, KS = K / Cfg::V;

  if (threadIdx.x == 0) {
    for (int s = 0; s < ST; ++s) {
      course::mbar_init(&full[s], 1);
      course::mbar_init(&sf_full[s], 128);     // the 128 threads that write a stage's scales
      course::mbar_init(&empty[s], 1);
    }
    course::mbar_init(&acc_full, 1);
    course::fence_mbarrier_init();
  }
  if (warp == 1) {
    course::tmem_alloc<1>(&tmem_base, Cfg::TMEM_COLS);
    course::tmem_relinquish<1>();
  }
  course::tcgen05_before_sync();
  __syncthreads();
  course::tcgen05_after_sync();
  const unsigned tmem = tmem_base;

  if (warp == 0 && lane == 0) {
    for (int kt = 0; kt < k_tiles; ++kt) {                   // TMA: A's and B's 128 × 128-byte tiles
      const int s = kt % ST;
      if (kt >= ST) course::mbar_wait(&empty[s], ((kt / ST) - 1) & 1);
      unsigned char* a_s = base + s * Cfg::STAGE_BYTES;
      course::mbar_arrive_expect_tx(&full[s], Cfg::STAGE_BYTES);
      course::tma_load_2d(a_s, &a_map, kt * Cfg::BK_BYTES, m0, &full[s]);
      course::tma_load_2d(a_s + Cfg::TILE_BYTES, &b_map, kt * Cfg::BK_BYTES, n0, &full[s]);
    }
  } else if (warp == 1 && lane == 0) {
    for (int kt = 0; kt < k_tiles; ++kt) {                   // the MMAs: 4 per stage, 32 bytes of K each
      const int s = kt % ST;
      course::mbar_wait(&full[s], (kt / ST) & 1);
      course::mbar_wait(&sf_full[s], (kt / ST) & 1);
      course::tcgen05_after_sync();
      const unsigned a_addr = course::smem_u32(base + s * Cfg::STAGE_BYTES), b_addr = a_addr + Cfg::TILE_BYTES;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const unsigned long long ad = ab_desc | ((a_addr + 32 * j) >> 4), bd = ab_desc | ((b_addr + 32 * j) >> 4);
        // BEGIN SOLUTION
        const unsigned sfa = tmem + Cfg::SFA_COL + s * Cfg::SF_COLS, sfb = tmem + Cfg::SFB_COL + s * Cfg::SF_COLS;
        if constexpr (Cfg::NVF4) {                            // atom j: the 4 blocks of 16 this MMA spans
          course::umma_nvf4(tmem, ad, bd, idesc, sfa + 4 * j, sfb + 4 * j, kt > 0 || j > 0);
        } else {                                              // byte j of the stage's atom: scale-factor id j,
          const unsigned ids = (j << 29) | (j << 4);          // in the descriptor (bits 29–30, 4–5) and in
          course::umma_mxf8(tmem, ad, bd, idesc | ids, sfa | (j << 30), sfb | (j << 30), kt > 0 || j > 0);   // the address
        }
        // END SOLUTION
      }
      course::umma_commit(&empty[s]);
    }
    course::umma_commit(&acc_full);
  } else if (warp >= 2) {
    const int quarter = warp % 4, r = quarter * 32 + lane;   // this thread's TMEM lane (and row of C)
    const unsigned lane_base = tmem + ((quarter * 32) << 16);
    // the 4 scale bytes of blocks ks0 … ks0 + 3 of row `row` of a (rows, KS) scale matrix, block k in byte k
    auto scales4 = [&](const unsigned char* sf, int row, int rows, int ks0) -> unsigned {
      if (row >= rows) return 0u;
      const unsigned char* p = sf + (size_t)row * KS + ks0;
      if (ks0 + 4 <= KS && (reinterpret_cast<size_t>(p) & 3) == 0) return __ldg(reinterpret_cast<const unsigned*>(p));
      unsigned w = 0;
      for (int k = 0; k < 4 && ks0 + k < KS; ++k) w |= (unsigned)p[k] << (8 * k);
      return w;
    };
    for (int kt = 0; kt < k_tiles; ++kt) {                   // the scale factors of stage kt
      const int s = kt % ST;
      if (kt >= ST) course::mbar_wait(&empty[s], ((kt / ST) - 1) & 1);
      course::tcgen05_after_sync();
      for (int atom = 0; atom < Cfg::ATOMS; ++atom) {         // every quarter writes the same 32 lanes' worth
        const int ks0 = kt * Cfg::SF_PER_STAGE + atom * 4;    // column i: rows lane + 32·i, byte k: block ks0 + k
        unsigned wa[4], wb[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          wa[i] = scales4(sfa, m0 + lane + 32 * i, M, ks0);
          wb[i] = scales4(sfb, n0 + lane + 32 * i, N, ks0);
        }
        const int col = s * Cfg::SF_COLS + 4 * atom;
        course::tmem_st4(lane_base + Cfg::SFA_COL + col, wa[0], wa[1], wa[2], wa[3]);
        course::tmem_st4(lane_base + Cfg::SFB_COL + col, wb[0], wb[1], wb[2], wb[3]);
      }
      course::tmem_wait_st();
      course::tcgen05_before_sync();
      course::mbar_arrive(&sf_full[s]);
    }
    course::mbar_wait(&acc_full, 0);                          // then the epilogue: TMEM -> C, fp32
    course::tcgen05_after_sync();
    const int row = m0 + r;
    for (int col = 0; col < Cfg::BN; col += 16) {
      unsigned v[16];
      course::tmem_ld16(lane_base + col, v);
      course::tmem_wait_ld();
      for (int j = 0; j < 16; ++j)
        if (row < M && n0 + col + j < N) c[(size_t)row * N + n0 + col + j] = __uint_as_float(v[j]);
    }
  }
  course::tcgen05_before_sync();
  __syncthreads();
  if (warp == 1) {
    __syncwarp();
    course::tcgen05_after_sync();
    course::tmem_dealloc<1>(tmem, Cfg::TMEM_COLS);
  }
}
