%%cuda sk --arch sm_90a -k "sk_gemm<Sk<128, 256, 4, 8, Plain>>" -k "sk_gemm<Sk<128, 256, 4, 8, BiasGelu>>"
#include "course.cuh"     // the launch contract
#include "gemm_sm90.cuh"  // 05.03's pieces: the ring, load_k_range, mma_k_range, store_tile, atomics
using course::TensorMap;
namespace sm90 = course::sm90;

// Epilogues: what happens to each fp32 accumulator before it is rounded to bf16 and stored.
// apply(acc, bias of the element's column); BIAS says whether the kernel reads the bias at all.
struct Plain {
  static constexpr bool BIAS = false;
  __device__ static float apply(float acc, float) { return acc; }
};
struct BiasGelu {                 // C = GELU(A·B + bias), GELU's tanh form (GPT-2's)
  static constexpr bool BIAS = true;
  __device__ static float apply(float acc, float bias) {
    // 2. x = acc + bias; return 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) -- sm90::tanh_approx is one instruction
    // BEGIN SOLUTION
    const float x = acc + bias;
    const float inner = 0.7978845608f * fmaf(0.044715f * x, x * x, x);
    return 0.5f * x * (1.f + sm90::tanh_approx(inner));
    // END SOLUTION
  }
};

// 05.03's warp-specialized GEMM without clusters (C = Epi(A·B), bf16 in, fp32 accumulation, all
// row-major), on a data-parallel + Stream-K schedule: tiles 0 .. dp_tiles - 1 are computed whole,
// one per CTA per wave (grouped order); the k steps of the remaining tiles -- the last, mostly
// empty wave -- are laid end to end, (tiles - dp_tiles) · k_tiles "iterations", and each CTA takes
// an equal contiguous range of them. A tile split between CTAs is finished by the CTA holding its
// first k step: the others add their fp32 pieces into the tile's slot of `partials` (atomically, at
// L2) and count themselves in `counts`; it waits for the count, adds the sum, and runs the epilogue,
// leaving the slot and the count at zero for the next launch.
template <int BM, int BN, int STAGES_, int GROUP_M_, class Epi_>
struct Sk {
  using Epi = Epi_;
  static constexpr int TILE_M = BM, TILE_N = BN, TILE_K = 64, STAGES = STAGES_, GROUP_M = GROUP_M_;
  static constexpr int CONSUMERS = BM / 64;                    // consumer warpgroups, 64 rows each
  static constexpr int THREADS = 128 * (1 + CONSUMERS);
  static constexpr int A_BYTES = BM * TILE_K * 2;              // one slot of A: BM rows of 128 B
  static constexpr int B_BOX_BYTES = TILE_K * 64 * 2;          // one 64-wide chunk of B: 8 KiB
  static constexpr int B_BOXES = BN / 64;
  static constexpr int STAGE_BYTES = A_BYTES + B_BOXES * B_BOX_BYTES;
  static constexpr int C_BOX_BYTES = 64 * 64 * 2;
  static constexpr int C_STAGE_BYTES = 2 * C_BOX_BYTES;        // per consumer: 128 columns of its 64 rows
  static constexpr int RING_BYTES = STAGES * STAGE_BYTES;
  static constexpr int SMEM_BYTES = RING_BYTES + CONSUMERS * C_STAGE_BYTES + 1024;
  static constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
  static constexpr int PARTIAL_FLOATS = BM * BN;               // one fp32 tile: a split tile's slot in `partials`
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
sk_gemm(const __grid_constant__ TensorMap a_map,   // A (M, K): box 64 columns × TILE_M rows
        const __grid_constant__ TensorMap b_map,   // B (K, N): box 64 columns × 64 rows
        const __grid_constant__ TensorMap c_map,   // C (M, N): box 64 × 64 (stores)
        const unsigned short* bias,                // (N,) bf16 bits; read only when Epi::BIAS
        float* partials,                           // (split tiles, PARTIAL_FLOATS) fp32, zeros; null when nothing is split
        int* counts,                               // (split tiles,) zeros: later pieces added into each slot so far
        int M, int N, int K,
        int dp_tiles)                              // tiles computed whole; the rest (at most gridDim.x) split along K
{
  using Epi = typename Cfg::Epi;
  constexpr int BM = Cfg::TILE_M, BN = Cfg::TILE_N, BK = Cfg::TILE_K;
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long full[Cfg::STAGES], empty[Cfg::STAGES];
  const sm90::Ring<Cfg> ring{smem_raw + ((1024 - (course::smem_u32(smem_raw) & 1023)) & 1023), full, empty};

  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;
  const int k_tiles = (K + BK - 1) / BK;
  const long long iters = (long long)(tiles - dp_tiles) * k_tiles;   // the split tiles' k steps, end to end
  // CTA c's Stream-K range is iterations range_begin(c) .. range_begin(c + 1) - 1
  auto range_begin = [&](int c) -> int {
    // 1a. an equal share of `iters` per CTA of the grid, every iteration in exactly one range (1 line)
    // BEGIN SOLUTION
    return (int)(c * iters / gridDim.x);
    // END SOLUTION
  };
  // Every unit of this CTA's work, in order: fn(tile, first k tile, one past the last k tile).
  // Producer and consumers walk the same list, so the ring's slots and parities agree.
  auto for_each_work = [&](auto&& fn) {
    for (int t = blockIdx.x; t < dp_tiles; t += gridDim.x) fn(t, 0, k_tiles);   // whole tiles
    // 1b. the Stream-K range, cut where it crosses from one split tile into the next: iteration g
    //     is k tile g % k_tiles of tile dp_tiles + g / k_tiles (about 5 lines)
    // BEGIN SOLUTION
    const int end = range_begin(blockIdx.x + 1);
    for (int g = range_begin(blockIdx.x); g < end;) {
      const int kb = g % k_tiles, ke = min(k_tiles, kb + (end - g));
      fn(dp_tiles + g / k_tiles, kb, ke);
      g += ke - kb;
    }
    // END SOLUTION
  };
  auto origin = [&](int t, int& m0, int& n0) {
    int tm, tn;
    sm90::grouped_tile(t, tiles_m, tiles_n, Cfg::GROUP_M, tm, tn);
    m0 = tm * BM;
    n0 = tn * BN;
  };

  if (threadIdx.x == 0) {
    course::prefetch_tensormap(&a_map);
    course::prefetch_tensormap(&b_map);
    ring.init();
  }
  __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {                                   // ------------------------------ the producer
    course::setmaxnreg_dec<Cfg::PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      int it = 0;
      for_each_work([&](int t, int kb, int ke) {
        int m0, n0;
        origin(t, m0, n0);
        sm90::load_k_range(ring, &a_map, &b_map, m0, n0, kb, ke, it);
      });
    }
  } else {                                         // ------------------------------ the consumers
    course::setmaxnreg_inc<Cfg::CONSUMER_REGS>();
    const int rows = (wg - 1) * 64;                // this warpgroup's 64 rows of the tile
    const int ct = threadIdx.x - 128;              // 0 .. 255: this thread among the consumers
    const bool signaller = threadIdx.x % 128 == 0;
    unsigned char* c_stage = ring.base + Cfg::RING_BYTES + (wg - 1) * Cfg::C_STAGE_BYTES;
    float acc[BN / 2];                             // this thread's part of a 64 × BN fp32 tile
    int it = 0;
    // split tile s's slot of `partials`, as float4s: thread ct's j-th four accumulators at [j · 256 + ct]
    auto slot = [&](int s) { return reinterpret_cast<float4*>(partials + (size_t)s * Cfg::PARTIAL_FLOATS); };
    for_each_work([&](int t, int kb, int ke) {
      int m0, n0;
      origin(t, m0, n0);
      sm90::mma_k_range(ring, acc, rows, kb, ke, it);
      // 1c. kb > 0: a later piece of a split tile (only a range's first piece can be one). Add acc into
      //     the tile's fp32 sum in the workspace (sm90::red_add_v4: an atomic add at L2, fire and forget),
      //     fence, sync the 256 consumer threads (named barrier 3), and one thread adds 1 to the tile's
      //     count (sm90::red_add_release_gpu); then this piece is done.
      //     kb == 0 and ke < k_tiles: the first piece. Count the later CTAs whose (non-empty) range
      //     starts inside this tile, wait until the tile's count reaches it (sm90::wait_flag_or_trap, one
      //     thread per warpgroup, then the warpgroup's named barrier), add the sum (__ldcg) to acc and
      //     leave zeros behind; once both warpgroups have read it, reset the count. (about 25 lines)
      // BEGIN SOLUTION
      float4* sum = slot(t - dp_tiles);            // (PARTIAL_FLOATS) fp32: this split tile's later pieces, summed
      if (kb > 0) {
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
          sm90::red_add_v4(sum + j * 256 + ct, make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]));
        __threadfence();
        course::named_barrier_sync(3, 256);
        if (threadIdx.x == 128) sm90::red_add_release_gpu(&counts[t - dp_tiles], 1);
        return;
      }
      if (ke < k_tiles) {
        const int tile_end = (t - dp_tiles + 1) * k_tiles;     // one past the tile's last iteration
        int pieces = 0;
        for (int c = blockIdx.x + 1; c < gridDim.x && range_begin(c) < tile_end; ++c)
          pieces += range_begin(c + 1) > range_begin(c);       // empty ranges (fewer iterations than CTAs) add nothing
        if (signaller) sm90::wait_flag_or_trap(&counts[t - dp_tiles], pieces);
        course::named_barrier_sync(wg, 128);
#pragma unroll
        for (int h = 0; h < BN / 128; ++h) {
          float4 p[16];
#pragma unroll
          for (int j = 0; j < 16; ++j) p[j] = __ldcg(sum + (16 * h + j) * 256 + ct);
#pragma unroll
          for (int j = 0; j < 16; ++j) {
            float* a = acc + 4 * (16 * h + j);
            a[0] += p[j].x; a[1] += p[j].y; a[2] += p[j].z; a[3] += p[j].w;
            __stcg(sum + (16 * h + j) * 256 + ct, make_float4(0.f, 0.f, 0.f, 0.f));   // zeros for the next launch
          }
        }
        course::named_barrier_sync(3, 256);
        if (threadIdx.x == 128) counts[t - dp_tiles] = 0;
      }
      // END SOLUTION
      sm90::store_tile<Cfg, Epi>(acc, &c_map, c_stage, m0, n0, rows, wg, bias, N);
    });
    if (signaller) course::bulk_wait_read<0>();    // shared memory must outlive the last stores' reads
  }
}
