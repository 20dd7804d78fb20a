%%cuda ws --arch sm_90a -k "ws_gemm<Ws<128, 256, 4, 1, 0>>" -k "ws_gemm<Ws<128, 256, 4, 1, 8>>" -k "ws_gemm<Ws<128, 256, 4, 2, 8>>"
#include "course.cuh"     // the launch contract, smem_u32
#include "tma.cuh"        // TensorMap, mbarrier, TMA loads
#include "wgmma.cuh"      // the smem descriptor, wgmma fence/commit/wait, wgmma m64nNk16, the fragment
#include "pipeline.cuh"   // setmaxnreg, the bounded wait, clusters, the multicast load
using course::TensorMap;

// C (M, N) bf16 = A (M, K) bf16 · B (K, N) bf16, fp32 accumulation, all row-major: 05.02's GEMM,
// its warpgroups specialised. Warpgroup 0 is the PRODUCER: one of its threads issues every TMA
// load. Warpgroups 1 and 2 are CONSUMERS: each computes 64 rows of the BM × BN tile with wgmma.
// They talk through a ring of STAGES slots, each with two mbarriers:
//   full[s]  -- "slot s holds k tile it": one arrival (the producer's expect-tx) + the bytes;
//   empty[s] -- "every consumer of the cluster is done reading slot s": CONSUMERS × CLUSTER arrivals.
// The kernel is persistent: gridDim.x CTAs (clusters of CLUSTER along M) loop over the tiles of C.
// A cluster takes CLUSTER tiles stacked along M, which share their B: each CTA loads 1/CLUSTER of
// B's boxes and multicasts them to every CTA of the cluster. The epilogue stages each consumer's
// 64 × BN piece of C in shared memory, 128 columns at a time, and TMA stores it (clipped at the edges).
template <int BM, int BN, int STAGES_, int CLUSTER_, int GROUP_M_>
struct Ws {
  static constexpr int TILE_M = BM, TILE_N = BN, TILE_K = 64, STAGES = STAGES_, CLUSTER = CLUSTER_;
  static constexpr int GROUP_M = GROUP_M_;          // rasterisation: 0 = row by row, else groups of this many cluster rows
  static constexpr int CONSUMERS = BM / 64;          // consumer warpgroups, 64 rows each
  static constexpr int THREADS = 128 * (1 + CONSUMERS);
  static constexpr int A_BYTES = BM * TILE_K * 2;              // one slot of A: BM rows of 128 B
  static constexpr int B_BOX_BYTES = TILE_K * 64 * 2;          // one 64-wide chunk of B: 8 KiB
  static constexpr int B_BOXES = BN / 64;
  static constexpr int STAGE_BYTES = A_BYTES + B_BOXES * B_BOX_BYTES;   // what full[s] expects, per CTA
  static constexpr int C_BOX_BYTES = 64 * 64 * 2;                        // C staged as boxes of 64 rows × 64 columns
  static constexpr int C_STAGE_BYTES = 2 * C_BOX_BYTES;                  // per consumer: 128 columns of its 64 rows
  static constexpr int RING_BYTES = STAGES * STAGE_BYTES;
  static constexpr int SMEM_BYTES = RING_BYTES + CONSUMERS * C_STAGE_BYTES + 1024;   // + 1 KiB to align to the swizzle
  static constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;         // 128·40 + 256·232 ≤ 65536
  static_assert(B_BOXES % CLUSTER == 0, "each CTA of a cluster loads the same number of B's boxes");
  static_assert(BN % 128 == 0, "the epilogue stages C 128 columns at a time");
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1)   // the ", 1" fixes the registers at entry: setmaxnreg needs it
ws_gemm(const __grid_constant__ TensorMap a_map,   // A (M, K): box 64 columns × TILE_M rows
        const __grid_constant__ TensorMap b_map,   // B (K, N): box 64 columns × 64 rows
        const __grid_constant__ TensorMap c_map,   // C (M, N): box 64 columns × 64 rows (stores)
        int M, int N, int K)
{
  constexpr int S = Cfg::STAGES, BM = Cfg::TILE_M, BN = Cfg::TILE_N, BK = Cfg::TILE_K, CL = Cfg::CLUSTER;
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long full[S], empty[S];
  unsigned char* base = smem_raw + ((1024 - (course::smem_u32(smem_raw) & 1023)) & 1023);
  auto a_slot = [&](int s) { return base + s * Cfg::STAGE_BYTES; };                  // (BM, 64) bf16
  auto b_slot = [&](int s) { return base + s * Cfg::STAGE_BYTES + Cfg::A_BYTES; };   // B_BOXES × (64, 64) bf16

  // The work: units of CL tiles stacked along M (one per CTA of a cluster), in grouped order.
  const int rank = CL > 1 ? course::cluster_ctarank() : 0;
  const int cluster = CL > 1 ? course::cluster_id_x() : blockIdx.x;
  const int clusters = CL > 1 ? course::cluster_count_x() : gridDim.x;
  const int tiles_n = (N + BN - 1) / BN, units_m = ((M + BM - 1) / BM + CL - 1) / CL;
  const int units = units_m * tiles_n, k_tiles = (K + BK - 1) / BK;
  auto tile_of = [&](int u, int& m0, int& n0) {      // unit u -> this CTA's tile (m0, n0)
    int um = u / tiles_n, un = u % tiles_n;          // row by row
    if (Cfg::GROUP_M > 0) {                          // down GROUP_M unit rows, then one column right
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
      course::mbar_init(&full[s], 1);                         // the producer's arrive.expect_tx
      course::mbar_init(&empty[s], Cfg::CONSUMERS * CL);      // one arrival per consumer warpgroup of the cluster
    }
    course::fence_mbarrier_init();
  }
  if constexpr (CL > 1) course::cluster_sync();     // every barrier of the cluster is ready before anyone signals it
  else __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    // ---------------------------------------------------------------- the producer warpgroup
    // 1. give registers back: the producer needs few, the consumers' accumulators many
    // BEGIN SOLUTION
    course::setmaxnreg_dec<Cfg::PRODUCER_REGS>();
    // END SOLUTION
    if (threadIdx.x == 0) {
      int it = 0;                                    // k tiles loaded so far, over every tile: slot it % S
      for (int u = cluster; u < units; u += clusters) {
        int m0, n0;
        tile_of(u, m0, n0);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % S;
          // 2. wait until every consumer of the cluster has released slot s (its (it / S)-th reuse),
          //    expect the slot's bytes on full[s], load A's box, and this CTA's share of B's boxes
          //    (multicast to the whole cluster when CL > 1)
          // BEGIN SOLUTION
          course::mbar_wait_or_trap(&empty[s], ((it / S) & 1) ^ 1);
          course::mbar_arrive_expect_tx(&full[s], Cfg::STAGE_BYTES);
          course::tma_load_2d(a_slot(s), &a_map, kt * BK, m0, &full[s]);
          for (int j = rank * (Cfg::B_BOXES / CL); j < (rank + 1) * (Cfg::B_BOXES / CL); ++j) {
            if constexpr (CL > 1)
              course::tma_load_2d_multicast(b_slot(s) + j * Cfg::B_BOX_BYTES, &b_map, n0 + 64 * j, kt * BK,
                                            &full[s], (1 << CL) - 1);
            else
              course::tma_load_2d(b_slot(s) + j * Cfg::B_BOX_BYTES, &b_map, n0 + 64 * j, kt * BK, &full[s]);
          }
          // END SOLUTION
        }
      }
    }
  } else {
    // ---------------------------------------------------------------- the consumer warpgroups
    // 3. take the registers the producer gave back
    // BEGIN SOLUTION
    course::setmaxnreg_inc<Cfg::CONSUMER_REGS>();
    // END SOLUTION
    const int rows = (wg - 1) * 64;                  // this warpgroup's 64 rows of the tile
    const bool signaller = threadIdx.x % 128 == 0;   // one thread releases slots for the warpgroup
    auto release = [&](int s) {                      // slot s may be refilled, as far as we are concerned
      // 4. one arrival on empty[s] of every CTA of the cluster (their producers multicast into us)
      // BEGIN SOLUTION
      if (signaller) {
        if constexpr (CL > 1) {
          for (int r = 0; r < CL; ++r) course::mbar_arrive_cluster(&empty[s], r);
        } else {
          course::mbar_arrive(&empty[s]);
        }
      }
      // END SOLUTION
    };
    unsigned char* c_stage = base + Cfg::RING_BYTES + (wg - 1) * Cfg::C_STAGE_BYTES;   // 2 × (64, 64) bf16
    float acc[BN / 2];                               // this thread's part of a 64 × BN fp32 tile
    int it = 0;
    for (int u = cluster; u < units; u += clusters) {
      int m0, n0;
      tile_of(u, m0, n0);
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % S;
        // 5. wait until slot s holds k tile `it` (its (it / S)-th fill)
        // BEGIN SOLUTION
        course::mbar_wait_or_trap(&full[s], (it / S) & 1);
        // END SOLUTION
        const unsigned long long da = course::make_smem_desc(course::smem_u32(a_slot(s)) + rows * 128, 16, 1024,
                                                             course::DESC_SWIZZLE_128B);
        const unsigned long long db = course::make_smem_desc(course::smem_u32(b_slot(s)), Cfg::B_BOX_BYTES, 1024,
                                                             course::DESC_SWIZZLE_128B);
        course::wgmma_fence_operand(acc);
        course::wgmma_fence();
#pragma unroll
        for (int k = 0; k < BK / 16; ++k)            // the first k step of a tile overwrites acc (scale-d 0)
          course::wgmma_bf16<0, 1>(acc, course::desc_advance(da, 32 * k), course::desc_advance(db, 2048 * k),
                                   (kt > 0 || k > 0) ? 1 : 0);
        course::wgmma_commit();
        course::wgmma_fence_operand(acc);
        course::wgmma_wait<1>();                     // the previous k tile's wgmmas are done: release its slot
        course::wgmma_fence_operand(acc);
        if (kt > 0) release((it - 1) % S);
      }
      course::wgmma_wait<0>();                       // the tile's last wgmmas: the accumulators are final
      course::wgmma_fence_operand(acc);
      release((it - 1) % S);
      // the epilogue, 128 columns at a time: bf16 pairs into this warpgroup's two staging boxes
      // (128-byte swizzled, as TMA reads them: no bank conflicts), then two TMA stores. The producer
      // meanwhile fills the ring with the next tile's first k tiles.
#pragma unroll
      for (int h = 0; h < BN / 128; ++h) {
        if (signaller) course::bulk_wait_read<0>();  // our previous stores have read the staging boxes
        course::named_barrier_sync(wg, 128);
#pragma unroll
        for (int i = 64 * h; i < 64 * h + 64; i += 2) {   // acc elements of columns 128h .. 128h + 127
          const int row = course::wgmma_acc_row(i), col = course::wgmma_acc_col(i) - 128 * h;
          const int chunk = (col % 64) / 8;
          unsigned char* p = c_stage + (col / 64) * Cfg::C_BOX_BYTES + row * 128 + ((chunk ^ (row & 7)) << 4) + (col % 8) * 2;
          *reinterpret_cast<unsigned*>(p) = course::pack_bf16x2(acc[i], acc[i + 1]);
        }
        course::fence_proxy_async();                 // the stores above, visible to TMA
        course::named_barrier_sync(wg, 128);
        if (signaller) {
          course::tma_store_2d(&c_map, c_stage, n0 + 128 * h, m0 + rows);
          course::tma_store_2d(&c_map, c_stage + Cfg::C_BOX_BYTES, n0 + 128 * h + 64, m0 + rows);
          course::bulk_commit();
        }
      }
    }
    if (signaller) course::bulk_wait_read<0>();      // shared memory must outlive the last stores' reads
  }
  // No CTA may leave while a peer can still signal its barriers or multicast into its shared memory.
  if constexpr (CL > 1) course::cluster_sync();
}
