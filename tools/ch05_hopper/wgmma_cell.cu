%%cuda wg --arch sm_90a -k "wgmma_gemm<Wg<128, 256, 4>>"
#include "course.cuh"   // the launch contract, smem_u32
#include "tma.cuh"      // TensorMap, mbarrier, TMA loads
#include "wgmma.cuh"    // the smem descriptor, wgmma fence/commit/wait, wgmma m64nNk16, the fragment
using course::TensorMap;

// C (M, N) bf16 = A (M, K) bf16 · B (K, N) bf16, fp32 accumulation, all row-major.
// A block computes a TILE_M × TILE_N tile of C: one warpgroup (128 threads) per 64 rows, each
// issuing one wgmma m64n{TILE_N}k16 per 16 of K.  The K loop streams TILE_K = 64 columns of A
// and rows of B at a time through a ring of STAGES slots, every byte moved by TMA with the
// 128-byte swizzle: A's box is TILE_M rows × 64 bf16 (128 B: K-major), B's are 64 rows of K ×
// 64 bf16 of N (N-major), TILE_N / 64 of them side by side.
template <int BM, int BN, int STAGES_>
struct Wg {
  static constexpr int TILE_M = BM, TILE_N = BN, TILE_K = 64, STAGES = STAGES_;
  static constexpr int WARPGROUPS = BM / 64;
  static constexpr int THREADS = 128 * WARPGROUPS;
  static constexpr int A_BYTES = BM * TILE_K * 2;             // one slot of A: BM rows of 128 B
  static constexpr int B_BOX_BYTES = TILE_K * 64 * 2;         // one 64-wide chunk of B: 8 KiB
  static constexpr int B_BYTES = (BN / 64) * B_BOX_BYTES;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;       // what one slot's barrier expects
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;   // + 1 KiB to align to the swizzle
  static constexpr int GROUP_M = 8;                           // tiles of C run down 8 rows of tiles at a time
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
wgmma_gemm(const __grid_constant__ TensorMap a_map,   // A (M, K): box 64 columns × TILE_M rows
           const __grid_constant__ TensorMap b_map,   // B (K, N): box 64 columns × 64 rows
           unsigned short* __restrict__ c,            // C (M, N) bf16 bits
           int M, int N, int K)
{
  constexpr int S = Cfg::STAGES, BM = Cfg::TILE_M, BN = Cfg::TILE_N, BK = Cfg::TILE_K;
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long full[S];               // full[s]: "slot s's tiles have landed"
  unsigned char* base = smem_raw + ((1024 - (course::smem_u32(smem_raw) & 1023)) & 1023);
  // slot s: A (BM, 64) bf16 at base + s·STAGE_BYTES, then B's BN/64 boxes (64, 64) bf16
  auto a_slot = [&](int s) { return base + s * Cfg::STAGE_BYTES; };
  auto b_slot = [&](int s) { return base + s * Cfg::STAGE_BYTES + Cfg::A_BYTES; };

  // which tile of C: blocks walk down GROUP_M rows of tiles before moving right (L2 reuse)
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int per_group = Cfg::GROUP_M * tiles_n, group = blockIdx.x / per_group;
  const int first_m = group * Cfg::GROUP_M, rows = min(tiles_m - first_m, Cfg::GROUP_M);
  const int m0 = (first_m + (blockIdx.x % per_group) % rows) * BM;
  const int n0 = ((blockIdx.x % per_group) / rows) * BN;
  const int k_tiles = (K + BK - 1) / BK;                // the last one ragged: TMA fills zeros
  const bool leader = threadIdx.x == 0;
  const int wg = threadIdx.x / 128;                     // this warpgroup's 64 rows of the tile

  auto issue_load = [&](int kt) {                       // k tile kt into slot kt % S
    const int s = kt % S;
    course::mbar_arrive_expect_tx(&full[s], Cfg::STAGE_BYTES);
    course::tma_load_2d(a_slot(s), &a_map, kt * BK, m0, &full[s]);
    for (int j = 0; j < BN / 64; ++j)
      course::tma_load_2d(b_slot(s) + j * Cfg::B_BOX_BYTES, &b_map, n0 + 64 * j, kt * BK, &full[s]);
  };

  if (leader) {
    course::prefetch_tensormap(&a_map);
    course::prefetch_tensormap(&b_map);
    for (int s = 0; s < S; ++s) course::mbar_init(&full[s], 1);
    course::fence_mbarrier_init();
  }
  __syncthreads();
  if (leader)
    for (int kt = 0; kt < min(S, k_tiles); ++kt) issue_load(kt);     // fill the ring

  float acc[BN / 2];                                    // this thread's part of a 64 × BN fp32 tile
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = kt % S;
    course::mbar_wait(&full[s], (kt / S) & 1);          // slot s's A and B have landed
    const unsigned a_addr = course::smem_u32(a_slot(s)) + wg * 64 * 128;   // this warpgroup's 64 rows
    const unsigned b_addr = course::smem_u32(b_slot(s));
    // 1. the descriptors of this slot's tiles: A K-major, B N-major, both 128-byte swizzled
    // BEGIN SOLUTION
    const unsigned long long da = course::make_smem_desc(a_addr, 16, 1024, course::DESC_SWIZZLE_128B);
    const unsigned long long db = course::make_smem_desc(b_addr, Cfg::B_BOX_BYTES, 1024, course::DESC_SWIZZLE_128B);
    // END SOLUTION
    // 2. four wgmmas, one per 16 of K, as one group: fence the accumulators first, commit after
    course::wgmma_fence_operand(acc);
    // BEGIN SOLUTION
    course::wgmma_fence();
#pragma unroll
    for (int k = 0; k < BK / 16; ++k)                   // A: +32 B along its row; B: +16 rows of 128 B
      course::wgmma_bf16<0, 1>(acc, course::desc_advance(da, 32 * k), course::desc_advance(db, 2048 * k));
    course::wgmma_commit();
    // END SOLUTION
    course::wgmma_fence_operand(acc);
    // 3. keep this group running, but let the previous one finish: its slot may then be refilled
    // BEGIN SOLUTION
    course::wgmma_wait<1>();
    // END SOLUTION
    course::wgmma_fence_operand(acc);
    __syncthreads();                                    // every warpgroup is done with k tile kt - 1
    if (leader && kt >= 1 && kt - 1 + S < k_tiles) issue_load(kt - 1 + S);
  }
  course::wgmma_wait<0>();                              // the last group: the accumulators are final
  course::wgmma_fence_operand(acc);

  // 4. the epilogue: element i of acc is (row, column) wgmma_acc_row/col(i) of this warpgroup's
  //    64 × BN tile; store pairs (i, i + 1) as one bf16x2, rows past M and columns past N skipped
  //    (N is a multiple of 8, so a pair is all in or all out)
#pragma unroll
  for (int i = 0; i < BN / 2; i += 2) {
    // BEGIN SOLUTION
    const int row = m0 + wg * 64 + course::wgmma_acc_row(i), col = n0 + course::wgmma_acc_col(i);
    if (row < M && col < N)
      *reinterpret_cast<unsigned*>(c + (size_t)row * N + col) = course::pack_bf16x2(acc[i], acc[i + 1]);
    // END SOLUTION
  }
}
