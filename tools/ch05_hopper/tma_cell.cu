%%cuda tp -k "tma_transpose<Tp<8, 2>>"
#include "course.cuh"   // the launch contract, smem_u32
#include "tma.cuh"      // TensorMap, mbarrier, TMA load/store, the async-proxy fence
using course::TensorMap;

// t (N, M) fp32 = aᵀ, a (M, N) fp32, moved entirely by TMA: every byte of a enters shared memory
// through a bulk tensor load and every byte of t leaves through a bulk tensor store.
// Both tensor maps use 32 × 32 boxes (4 KiB: rows of 128 B) with the 128-byte swizzle.
// A block owns a strip of a: TILES boxes down (TILE_M rows) by one box across (TILE_N = 32
// columns). Its boxes stream through a ring of STAGES slots; slot s has one mbarrier, full[s].
template <int TILES_, int STAGES_>
struct Tp {
  static constexpr int BOX = 32;                        // box side, in floats (128 B: the swizzle span)
  static constexpr int BOX_FLOATS = BOX * BOX;
  static constexpr int BOX_BYTES = BOX_FLOATS * 4;      // 4 KiB: what one load delivers
  static constexpr int TILES = TILES_, STAGES = STAGES_;
  static constexpr int THREADS = 128;
  static constexpr int TILE_M = BOX * TILES, TILE_N = BOX;
  // a slots and t slots (STAGES each), plus 1 KiB to align them: the swizzle repeats every 1024 B
  static constexpr int SMEM_BYTES = 2 * STAGES * BOX_BYTES + 1024;
};

// Where element (row, col) of a 32 × 32 fp32 box sits in shared memory under the 128-byte swizzle:
// the 16-byte chunk col / 4 of row `row` is stored at chunk (col / 4) XOR (row % 8).
__device__ __forceinline__ int swz(int row, int col) {
  return row * 32 + ((((col >> 2) ^ row) & 7) << 2) + (col & 3);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
tma_transpose(const __grid_constant__ TensorMap a_map,   // over a (M, N): box 32 rows × 32 columns
              const __grid_constant__ TensorMap t_map,   // over t (N, M): the same box
              int m_boxes)                               // ceil(M / 32): boxes down the whole of a
{
  constexpr int BOX = Cfg::BOX, S = Cfg::STAGES;
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long full[S];                 // full[s]: "slot s's box has landed"
  unsigned char* base = smem_raw + ((1024 - (course::smem_u32(smem_raw) & 1023)) & 1023);
  float* a_s = reinterpret_cast<float*>(base);           // (S, 32, 32) fp32, swizzled, as TMA writes a's boxes
  float* t_s = a_s + S * Cfg::BOX_FLOATS;                // (S, 32, 32) fp32, swizzled, as TMA reads t's boxes

  const int n0 = blockIdx.x * BOX;                       // a's first column = t's first row
  const int first = blockIdx.y * Cfg::TILES;             // the strip's first box row
  const int count = min(Cfg::TILES, m_boxes - first);    // boxes in this strip (fewer at the bottom)
  const bool leader = threadIdx.x == 0;                  // the one thread that talks to TMA

  // Box i of the strip into slot i % S: one arrival that also expects BOX_BYTES, then the load,
  // whose bytes complete the phase. Its coordinates: {column, row} of a.
  auto issue_load = [&](int i) {
    const int s = i % S;
    // BEGIN SOLUTION
    course::mbar_arrive_expect_tx(&full[s], Cfg::BOX_BYTES);
    course::tma_load_2d(a_s + s * Cfg::BOX_FLOATS, &a_map, n0, (first + i) * BOX, &full[s]);
    // END SOLUTION
  };

  if (leader) {
    course::prefetch_tensormap(&a_map);
    course::prefetch_tensormap(&t_map);
    for (int s = 0; s < S; ++s) course::mbar_init(&full[s], 1);   // one arrival per phase: the leader's
    course::fence_mbarrier_init();
  }
  __syncthreads();
  if (leader)
    for (int i = 0; i < min(S, count); ++i) issue_load(i);        // fill the ring

  // The warp's share of a box: lane bits (l0, l1, l4) pick the column, (l2, l3, l4) the row, so that
  // the 32 reads of a warp hit 32 banks of the swizzled a box, and its 32 writes 32 banks of t's.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col_lo = (lane & 3), row_lo = ((lane >> 2) & 3) + ((lane >> 4) << 2), hi = lane >> 4;

  for (int i = 0; i < count; ++i) {
    const int s = i % S;
    const float* a_box = a_s + s * Cfg::BOX_FLOATS;
    float* t_box = t_s + s * Cfg::BOX_FLOATS;
    // 1. wait until box i has landed: slot s is used for the (i / S)-th time, so it waits for the
    //    phase of that number's parity.
    // BEGIN SOLUTION
    course::mbar_wait(&full[s], (i / S) & 1);
    // END SOLUTION
    // 2. t's slot s is free once the store issued from it S boxes ago has read it.
    if (leader) course::bulk_wait_read<S - 1>();
    __syncthreads();
    // 3. transpose in shared memory: t_box(c, r) = a_box(r, c), both swizzled. 32 steps of 32 lanes.
    for (int step = warp; step < 32; step += Cfg::THREADS / 32) {
      const int c = col_lo + (((hi ^ step) & 1) << 2) + (((step >> 1) & 3) << 3);
      const int r = row_lo + ((step >> 3) << 3);
      // BEGIN SOLUTION
      t_box[swz(c, r)] = a_box[swz(r, c)];
      // END SOLUTION
    }
    // 4. hand t's box to TMA: every writer fences its stores for the async proxy, the block syncs,
    //    the leader stores the box at {column, row} of t and commits it; then slot s (a's box, read
    //    by everyone) takes box i + S.
    // BEGIN SOLUTION
    course::fence_proxy_async();
    __syncthreads();
    if (leader) {
      course::tma_store_2d(&t_map, t_box, (first + i) * BOX, n0);
      course::bulk_commit();
    }
    // END SOLUTION
    if (leader && i + S < count) issue_load(i + S);
  }
  if (leader) course::bulk_wait_read<0>();               // shared memory must outlive the last store's reads
}
