%%cuda um --arch sm_100a -k "umma_gemm<G<1, 256, 4>>" -k "umma_gemm<G<2, 256, 6>>"
#include "course.cuh"    // the launch contract, smem_u32
#include "tcgen05.cuh"   // tensor memory, tcgen05.mma / commit / ld, clusters, TMA (tma.cuh)
using course::TensorMap;

// C (M, N) bf16 = A (M, K) · B (K, N), bf16 in, fp32 accumulated in tensor memory, all row-major.
// One CTA computes a 128 × BN tile of C (CTA_GROUP = 1); or a CTA pair computes 256 × BN with one
// MMA of M = 256 (CTA_GROUP = 2: each CTA holds its 128 rows of A and BN / 2 columns of B).
// Warp roles, 192 threads: warp 0 loads (TMA), warp 1 owns tensor memory and (leader CTA only,
// one thread) issues the MMAs, warps 2–5 read the accumulator out (warp w: TMEM lanes 32·(w % 4)…).
template <int CTA_GROUP_, int BN_, int STAGES_>
struct G {
  static constexpr int CTA_GROUP = CTA_GROUP_, CLUSTER = CTA_GROUP_;
  static constexpr int BM = 128, BN = BN_, BK = 64;         // a CTA's rows, the MMA's N, K per stage (128 B of bf16)
  static constexpr int BN_CTA = BN / CTA_GROUP;             // columns of B this CTA loads
  static constexpr int STAGES = STAGES_, THREADS = 192;
  static constexpr int TILE_M = BM, TILE_N = BN, TILE_K = BK;  // per CTA: the grid is over 128 × BN tiles
  static constexpr int A_BYTES = BM * BK * 2;               // 16 KiB: one TMA box, 128 rows × 128 B
  static constexpr int B_BYTES = BK * BN_CTA * 2;           // BN_CTA / 64 boxes of 64 K-rows × 128 B
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;   // + 1 KiB: align to the swizzle's repeat
  static constexpr int TMEM_COLS = BN;                      // the fp32 accumulator: 128 lanes × BN columns
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
umma_gemm(const __grid_constant__ TensorMap a_map,   // A (M, K): boxes 128 rows × 64 columns, 128B swizzle
          const __grid_constant__ TensorMap b_map,   // B (K, N): boxes 64 rows × 64 columns, 128B swizzle
          unsigned short* __restrict__ c,            // C (M, N) bf16 bits
          int M, int N, int K,
          unsigned idesc,                            // instruction descriptor (M = 128·CTA_GROUP, N = BN)
          unsigned long long a_desc,                 // A's smem descriptor with start address 0 (K-major)
          unsigned long long b_desc)                 // B's smem descriptor with start address 0 (MN-major)
{
  constexpr int S = Cfg::STAGES, PAIR = Cfg::CTA_GROUP;
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long full[S], empty[S], acc_full;
  __shared__ unsigned tmem_base;
  unsigned char* base = smem_raw + ((1024 - (course::smem_u32(smem_raw) & 1023)) & 1023);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned rank = PAIR == 2 ? course::cluster_rank() : 0;      // 0: the leader of a pair
  const int m0 = blockIdx.x * Cfg::BM;                                // this CTA's rows of C
  const int n0 = blockIdx.y * Cfg::BN;                                // the pair's (or CTA's) columns of C
  const int k_tiles = (K + Cfg::BK - 1) / Cfg::BK;

  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      course::mbar_init(&full[s], 1);          // the leader's producer arrives (expect-tx); TMA brings the bytes
      course::mbar_init(&empty[s], 1);         // one tcgen05.commit per use of the slot
    }
    course::mbar_init(&acc_full, 1);           // the last commit: the accumulator is complete
    course::fence_mbarrier_init();
  }
  if (warp == 1) {                             // one warp allocates, and will free
    course::tmem_alloc<PAIR>(&tmem_base, Cfg::TMEM_COLS);
    course::tmem_relinquish<PAIR>();
  }
  course::tcgen05_before_sync();
  __syncthreads();
  if (PAIR == 2) course::cluster_sync();       // the peer's barriers exist before anyone signals them
  course::tcgen05_after_sync();
  const unsigned tmem = tmem_base;             // lane 0, first column

  if (warp == 0 && lane == 0) {
    // ---- producer: k tile kt into slot kt % S once the MMAs that read its last use are done ----
    const unsigned full_leader0 = PAIR == 2 ? course::cluster_addr(&full[0], 0) : course::smem_u32(&full[0]);
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % S;
      if (kt >= S) course::mbar_wait(&empty[s], ((kt / S) - 1) & 1);
      unsigned char* a_s = base + s * Cfg::STAGE_BYTES;          // (128, 64) bf16, K-major, swizzled
      unsigned char* b_s = a_s + Cfg::A_BYTES;                    // BN_CTA / 64 boxes of (64 K, 64 N)
      if (rank == 0) course::mbar_arrive_expect_tx(&full[s], PAIR * Cfg::STAGE_BYTES);
      if (PAIR == 1) {
        course::tma_load_2d(a_s, &a_map, kt * Cfg::BK, m0, &full[s]);
        for (int j = 0; j < Cfg::BN_CTA / 64; ++j)
          course::tma_load_2d(b_s + j * 64 * 128, &b_map, n0 + j * 64, kt * Cfg::BK, &full[s]);
      } else {                                                    // bytes counted on the leader's barrier
        const unsigned bar = full_leader0 + s * 8;
        course::tma_load_2d_pair(a_s, &a_map, kt * Cfg::BK, m0, bar);
        for (int j = 0; j < Cfg::BN_CTA / 64; ++j)
          course::tma_load_2d_pair(b_s + j * 64 * 128, &b_map, n0 + rank * Cfg::BN_CTA + j * 64, kt * Cfg::BK, bar);
      }
    }
  } else if (warp == 1 && lane == 0 && rank == 0) {
    // ---- the MMA issuer (the leader CTA's only): 4 MMAs of K = 16 per stage ----
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % S;
      course::mbar_wait(&full[s], (kt / S) & 1);
      course::tcgen05_after_sync();
      const unsigned a_addr = course::smem_u32(base + s * Cfg::STAGE_BYTES);
      const unsigned b_addr = a_addr + Cfg::A_BYTES;
      for (int k = 0; k < Cfg::BK / 16; ++k) {
        // BEGIN SOLUTION
        // A is K-major: the next 16 values of K are 32 bytes further along each 128-byte row.
        // B is MN-major: the next 16 values of K are 16 rows of 128 bytes further on.
        const unsigned long long ad = a_desc | ((a_addr + k * 32) >> 4);
        const unsigned long long bd = b_desc | ((b_addr + k * 16 * 128) >> 4);
        course::umma_f16<PAIR>(tmem, ad, bd, idesc, kt > 0 || k > 0);
        // END SOLUTION
      }
      // BEGIN SOLUTION
      if (PAIR == 1) course::umma_commit(&empty[s]);           // slot s is free once these MMAs finish
      else course::umma_commit_pair(&empty[s], 0b11);         // ... in both CTAs of the pair
      // END SOLUTION
    }
    if (PAIR == 1) course::umma_commit(&acc_full);
    else course::umma_commit_pair(&acc_full, 0b11);
  } else if (warp >= 2) {
    // ---- epilogue: TMEM -> registers -> C, 16 columns at a time ----
    course::mbar_wait(&acc_full, 0);
    course::tcgen05_after_sync();
    const int quarter = warp % 4;                              // this warp's 32 TMEM lanes = rows of the tile
    const int row = m0 + quarter * 32 + lane;
    for (int col = 0; col < Cfg::BN; col += 16) {
      unsigned v[16];
      // BEGIN SOLUTION
      course::tmem_ld16(tmem + ((quarter * 32) << 16) + col, v);
      course::tmem_wait_ld();
      // END SOLUTION
      unsigned w[8];                                           // 16 bf16 of row `row`
      for (int j = 0; j < 8; ++j) w[j] = course::pack_bf16x2(v[2 * j], v[2 * j + 1]);
      const int col0 = n0 + col;
      if (row < M && col0 + 16 <= N) {                         // N % 8 == 0: rows of C are 16-byte aligned
        uint4* out = reinterpret_cast<uint4*>(c + (size_t)row * N + col0);
        out[0] = make_uint4(w[0], w[1], w[2], w[3]);
        out[1] = make_uint4(w[4], w[5], w[6], w[7]);
      } else if (row < M) {
        // unrolled with a fixed count: w[] indexed by constants stays in registers (a loop that stops
        // at N indexes it at run time, and NVRTC 13.0 then puts w in local memory: LDL/STL)
#pragma unroll
        for (int j = 0; j < 16; ++j)
          if (col0 + j < N) c[(size_t)row * N + col0 + j] = (w[j / 2] >> (16 * (j % 2))) & 0xffff;
      }
    }
  }
  course::tcgen05_before_sync();
  __syncthreads();
  if (PAIR == 2) course::cluster_sync();       // no CTA leaves while its peer may still signal it
  if (warp == 1) {
    __syncwarp();                              // dealloc is .sync.aligned: the whole warp, converged
    course::tcgen05_after_sync();
    // BEGIN SOLUTION
    course::tmem_dealloc<PAIR>(tmem, Cfg::TMEM_COLS);
    // END SOLUTION
  }
}
