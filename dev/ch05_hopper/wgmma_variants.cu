// Candidates for lesson 05.02's reference (dev/ch05_hopper/wgmma_gpu.py): the lesson's kernel with
// two changes that can be switched on one at a time, each a template argument of the configuration:
//   SYNC 0: a block barrier before each refill (the lesson's);
//        1: one "empty" mbarrier per slot: each warpgroup arrives once it has waited for its wgmmas
//           on that slot, and only the leader waits for both before the refill;
//   EPI  0: C stored from registers as bf16 pairs, guarded (the lesson's);
//        1: C staged in 128-byte-swizzled shared memory (the freed ring) and stored by TMA
//           (boxes of TILE_M rows × 64 columns, clipped at the edges by TMA).
// Launched by wgmma_gpu.py's dev_launch: (a_map, b_map, c_map, c, M, N, K).
#include "course.cuh"
#include "tma.cuh"
#include "wgmma.cuh"
using course::TensorMap;

template <int BM, int BN, int STAGES_, int SYNC_, int EPI_, int GROUP_M_ = 8>
struct Dv {
  static constexpr int TILE_M = BM, TILE_N = BN, TILE_K = 64, STAGES = STAGES_;
  static constexpr int SYNC = SYNC_, EPI = EPI_, GROUP_M = GROUP_M_;
  static constexpr int WARPGROUPS = BM / 64, THREADS = 128 * WARPGROUPS;
  static constexpr int A_BYTES = BM * 64 * 2, B_BOX_BYTES = 64 * 64 * 2, B_BYTES = (BN / 64) * B_BOX_BYTES;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int C_BYTES = BM * BN * 2;
  static constexpr int RING = STAGES * STAGE_BYTES;
  static constexpr int SMEM_BYTES = (RING > C_BYTES ? RING : C_BYTES) + 1024;
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
wgmma_dev(const __grid_constant__ TensorMap a_map, const __grid_constant__ TensorMap b_map,
          const __grid_constant__ TensorMap c_map, unsigned short* __restrict__ c, int M, int N, int K)
{
  constexpr int S = Cfg::STAGES, BM = Cfg::TILE_M, BN = Cfg::TILE_N, BK = Cfg::TILE_K;
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long full[S], empty[S];
  unsigned char* base = smem_raw + ((1024 - (course::smem_u32(smem_raw) & 1023)) & 1023);
  auto a_slot = [&](int s) { return base + s * Cfg::STAGE_BYTES; };
  auto b_slot = [&](int s) { return base + s * Cfg::STAGE_BYTES + Cfg::A_BYTES; };

  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int per_group = Cfg::GROUP_M * tiles_n, group = blockIdx.x / per_group;
  const int first_m = group * Cfg::GROUP_M, rows = min(tiles_m - first_m, Cfg::GROUP_M);
  const int m0 = (first_m + (blockIdx.x % per_group) % rows) * BM;
  const int n0 = ((blockIdx.x % per_group) / rows) * BN;
  const int k_tiles = (K + BK - 1) / BK;
  const bool leader = threadIdx.x == 0;
  const int wg = threadIdx.x / 128;

  auto issue_load = [&](int kt) {
    const int s = kt % S;
    course::mbar_arrive_expect_tx(&full[s], Cfg::STAGE_BYTES);
    course::tma_load_2d(a_slot(s), &a_map, kt * BK, m0, &full[s]);
    for (int j = 0; j < BN / 64; ++j)
      course::tma_load_2d(b_slot(s) + j * Cfg::B_BOX_BYTES, &b_map, n0 + 64 * j, kt * BK, &full[s]);
  };

  if (leader) {
    course::prefetch_tensormap(&a_map);
    course::prefetch_tensormap(&b_map);
    for (int s = 0; s < S; ++s) {
      course::mbar_init(&full[s], 1);
      course::mbar_init(&empty[s], Cfg::WARPGROUPS);
    }
    course::fence_mbarrier_init();
  }
  __syncthreads();
  if (leader)
    for (int kt = 0; kt < min(S, k_tiles); ++kt) issue_load(kt);

  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = kt % S;
    course::mbar_wait(&full[s], (kt / S) & 1);
    const unsigned a_addr = course::smem_u32(a_slot(s)) + wg * 64 * 128;
    const unsigned b_addr = course::smem_u32(b_slot(s));
    const unsigned long long da = course::make_smem_desc(a_addr, 16, 1024, course::DESC_SWIZZLE_128B);
    const unsigned long long db = course::make_smem_desc(b_addr, Cfg::B_BOX_BYTES, 1024, course::DESC_SWIZZLE_128B);
    course::wgmma_fence_operand(acc);
    course::wgmma_fence();
#pragma unroll
    for (int k = 0; k < BK / 16; ++k)
      course::wgmma_bf16<0, 1>(acc, course::desc_advance(da, 32 * k), course::desc_advance(db, 2048 * k));
    course::wgmma_commit();
    course::wgmma_fence_operand(acc);
    course::wgmma_wait<1>();
    course::wgmma_fence_operand(acc);
    if constexpr (Cfg::SYNC == 0) {
      __syncthreads();
      if (leader && kt >= 1 && kt - 1 + S < k_tiles) issue_load(kt - 1 + S);
    } else {
      if (kt >= 1) {
        const int sp = (kt - 1) % S;
        if (threadIdx.x % 128 == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(course::smem_u32(&empty[sp])) : "memory");
        if (leader && kt - 1 + S < k_tiles) {
          course::mbar_wait(&empty[sp], ((kt - 1) / S) & 1);
          issue_load(kt - 1 + S);
        }
      }
    }
  }
  course::wgmma_wait<0>();
  course::wgmma_fence_operand(acc);

  if constexpr (Cfg::EPI == 0) {
#pragma unroll
    for (int i = 0; i < BN / 2; i += 2) {
      const int row = m0 + wg * 64 + course::wgmma_acc_row(i), col = n0 + course::wgmma_acc_col(i);
      if (row < M && col < N)
        *reinterpret_cast<unsigned*>(c + (size_t)row * N + col) = course::pack_bf16x2(acc[i], acc[i + 1]);
    }
  } else {
    __syncthreads();                                   // every warpgroup is done with the ring
    // C staged as BN/64 boxes of (BM rows × 128 B), 128-byte swizzled as TMA reads them
#pragma unroll
    for (int i = 0; i < BN / 2; i += 2) {
      const int row = wg * 64 + course::wgmma_acc_row(i), col = course::wgmma_acc_col(i);
      const int box = col / 64, chunk = (col % 64) / 8, within = (col % 8) * 2;
      unsigned char* p = base + box * (BM * 128) + row * 128 + ((chunk ^ (row & 7)) << 4) + within;
      *reinterpret_cast<unsigned*>(p) = course::pack_bf16x2(acc[i], acc[i + 1]);
    }
    course::fence_proxy_async();
    __syncthreads();
    if (leader) {
      for (int j = 0; j < BN / 64; ++j) course::tma_store_2d(&c_map, base + j * (BM * 128), n0 + 64 * j, m0);
      course::bulk_commit();
      course::bulk_wait_read<0>();
    }
  }
}
