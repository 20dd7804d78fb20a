%%cuda fp8p --arch sm_90a -k "fp8_gemm_p<Fp8p<6, 1, 8, 2>>"
// Dev variant of lesson 05.04's FP8 block-scaled GEMM (tools/ch05_hopper/fp8_cell.cu, 2026-11-25):
// the promotion one k tile behind the wgmmas. Each consumer keeps TWO partial accumulators: it issues
// k tile t + 1's four wgmmas into one, then waits only for k tile t's (wait_group 1) and promotes the
// other while t + 1's run. So a consumer's own wgmmas are queued on the tensor core through its
// promotion, and the chain "wait -> promote -> issue" of the lesson's kernel is gone. Two 64 x BN
// partials and the fp32 sum: 3 * BN / 2 registers a thread, so BN = 128 (192 + ~25 of setmaxnreg's
// 232); a 128-wide tile at n0 = 128 t meets one B scale block. The consumer walks one stream of k
// tiles across its units (tiles): the next unit's first k tile is issued before the last promotion
// of this one, so the epilogue (bf16 pack, TMA stores) also runs under wgmmas. MODE 0: ptxas places
// the promotion's FMAs after the first of the four wgmmas; MODE 2: after all four (a loop that runs
// once); MODE 1 (timing only, WRONG values): no promotion FMAs, the ceiling of this tile and pipeline.
#include "course.cuh"
#include "tma.cuh"
#include "wgmma.cuh"
#include "pipeline.cuh"
using course::TensorMap;

template <int STAGES_, int CLUSTER_, int GROUP_M_, int MODE_ = 0>
struct Fp8p {
  static constexpr int TILE_M = 128, TILE_N = 128, TILE_K = 128, STAGES = STAGES_, CLUSTER = CLUSTER_;
  static constexpr int GROUP_M = GROUP_M_, MODE = MODE_;
  static constexpr int CONSUMERS = 2;
  static constexpr int THREADS = 128 * (1 + CONSUMERS);
  static constexpr int A_BYTES = TILE_M * TILE_K, B_BYTES = TILE_N * TILE_K;
  static constexpr int B_SHARE = B_BYTES / CLUSTER;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int C_BOX_BYTES = 64 * 64 * 2;
  static constexpr int C_STAGE_BYTES = 2 * C_BOX_BYTES;
  static constexpr int RING_BYTES = STAGES * STAGE_BYTES;
  static constexpr int SMEM_BYTES = RING_BYTES + CONSUMERS * C_STAGE_BYTES + 1024;
  static constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory");
};

// the lesson cell's bounded wait and opaque move (copied: they live in the learner's cell)
__device__ __noinline__ void mbar_wait_slow(unsigned long long* bar, unsigned parity) {
  const long long start = clock64();
  while (!course::mbar_try_wait(bar, parity))
    if (clock64() - start > (1ll << 32)) __trap();
}
__device__ __forceinline__ void mbar_wait_lean(unsigned long long* bar, unsigned parity) {
  if (!course::mbar_try_wait(bar, parity)) mbar_wait_slow(bar, parity);
}
__device__ __forceinline__ unsigned long long opaque(unsigned long long x) {
  asm volatile("mov.b64 %0, %1;" : "=l"(x) : "l"(x));
  return x;
}
__device__ __forceinline__ int opaque_int(int x) {
  asm volatile("mov.b32 %0, %1;" : "=r"(x) : "r"(x));
  return x;
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
fp8_gemm_p(const __grid_constant__ TensorMap a_map, const __grid_constant__ TensorMap b_map,
           const __grid_constant__ TensorMap c_map, const float* __restrict__ sa, const float* __restrict__ sb,
           int M, int N, int K)
{
  constexpr int S = Cfg::STAGES, BM = Cfg::TILE_M, BN = Cfg::TILE_N, BK = Cfg::TILE_K, CL = Cfg::CLUSTER;
  constexpr int R = BN / 2;                          // registers of one 64 x BN fragment
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long full[S], empty[S];
  unsigned char* base = smem_raw + ((1024 - (course::smem_u32(smem_raw) & 1023)) & 1023);
  auto a_slot = [&](int s) { return base + s * Cfg::STAGE_BYTES; };
  auto b_slot = [&](int s) { return base + s * Cfg::STAGE_BYTES + Cfg::A_BYTES; };

  const int rank = CL > 1 ? course::cluster_ctarank() : 0;
  const int cluster = CL > 1 ? course::cluster_id_x() : blockIdx.x;
  const int clusters = CL > 1 ? course::cluster_count_x() : gridDim.x;
  const int tiles_n = (N + BN - 1) / BN, units_m = ((M + BM - 1) / BM + CL - 1) / CL;
  const int units = units_m * tiles_n, k_tiles = K / BK;
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

  const int wg = __shfl_sync(0xffffffff, threadIdx.x / 128, 0);
  if (wg == 0) {
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
          const int r0 = rank * (BN / CL);
          if constexpr (CL > 1)
            course::tma_load_2d_multicast(b_slot(s) + r0 * BK, &b_map, kt * BK, n0 + r0, &full[s], (1 << CL) - 1);
          else
            course::tma_load_2d(b_slot(s), &b_map, kt * BK, n0, &full[s]);
        }
      }
    }
  } else {
    course::setmaxnreg_inc<Cfg::CONSUMER_REGS>();
    const int c = wg - 1, rows = c * 64;
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
    const unsigned long long da0 = opaque(course::make_smem_desc(course::smem_u32(a_slot(0)) + rows * 128, 16,
                                                                 1024, course::DESC_SWIZZLE_128B));
    const unsigned long long db0 = opaque(course::make_smem_desc(course::smem_u32(b_slot(0)), 16, 1024,
                                                                 course::DESC_SWIZZLE_128B));
    float acc[R], p0[R], p1[R];
#pragma unroll
    for (int i = 0; i < R; ++i) acc[i] = 0.f;

    // the stream of k tiles: item (u, kt). `cur` is in flight (issued), its scales loaded; the
    // scale pointers belong to the unit of the NEXT item to load scales for
    int u = cluster, kt = 0, m0 = 0, n0 = 0;
    if (u < units) {
    tile_of(u, m0, n0);
    const float *sa_lo, *sa_hi, *sb_n;
    auto point = [&](int mm, int nn) {               // the scale rows of the unit at (mm, nn)
      const int r_lo = mm + rows + course::wgmma_acc_row(0), r_hi = r_lo + 8;
      sa_lo = sa + (size_t)min(r_lo, M - 1) * kb_count;
      sa_hi = sa + (size_t)min(r_hi, M - 1) * kb_count;
      sb_n = sb + (size_t)(nn / 128) * kb_count;
    };
    point(m0, n0);
    float sc_lo, sc_hi;                              // the current item's A scale x B scale, per row
    {
      const float b = __ldg(sb_n);
      sc_lo = __ldg(sa_lo) * b;
      sc_hi = __ldg(sa_hi) * b;
    }
    int s = 0;
    unsigned phase = 0;
    auto issue = [&](float (&p)[R], int slot) {
      const unsigned long long da = opaque(course::desc_advance(da0, slot * Cfg::STAGE_BYTES));
      const unsigned long long db = opaque(course::desc_advance(db0, slot * Cfg::STAGE_BYTES));
      course::wgmma_fence_operand(p);
      course::wgmma_fence();
#pragma unroll
      for (int k = 0; k < BK / 32; ++k)
        course::wgmma_e4m3(p, course::desc_advance(da, 32 * k), course::desc_advance(db, 32 * k), k > 0 ? 1 : 0);
      course::wgmma_commit();
    };
    mbar_wait_lean(&full[s], phase);
    issue(p0, s);
    course::wgmma_wait<0>();
    course::wgmma_fence_operand(p0);

    // one step: `cur` holds item (u, kt), its wgmmas done (nothing in flight). Issue the next item into
    // `nxt`, promote `cur` while they run (and, if `cur` closes its unit, store the unit's C), then wait
    // for `nxt`. Nothing is in flight across the loop's back edge: ptxas serializes every wgmma if a
    // partial is read while a wgmma it cannot prove retired is in flight. Returns false after the last.
    auto step = [&](float (&cur)[R], float (&nxt)[R]) -> bool {
      int u2 = u, kt2 = kt + 1;
      if (kt2 == k_tiles) u2 += clusters, kt2 = 0;
      const bool more = u2 < units;
      const int s_next = s + 1 == S ? 0 : s + 1;
      const unsigned phase_next = s_next == 0 ? phase ^ 1 : phase;
      const int um0 = m0, un0 = n0;                  // the current unit's corner (for the epilogue)
      float nx_lo = 0.f, nx_hi = 0.f;
      if (more) {
        if (kt2 == 0) {                              // the next item opens a new unit
          tile_of(u2, m0, n0);
          point(m0, n0);
        }
        const float b = __ldg(sb_n + kt2);
        nx_lo = __ldg(sa_lo + kt2) * b;
        nx_hi = __ldg(sa_hi + kt2) * b;
        mbar_wait_lean(&full[s_next], phase_next);
      }
      // after the last item, a spare k tile of the current slot (still full, released only after it),
      // so that every path issues and waits alike: a path that leaves `nxt` undefined makes ptxas
      // inject waits
      issue(nxt, more ? s_next : s);
      if (more) release(s);                          // cur's slot is read (its wgmmas are done)
      if constexpr (Cfg::MODE == 2) {
        // a loop that runs once, its count opaque: ptxas does not move its body's FMAs up in between
        // the four wgmmas (it otherwise fills the first one's modelled latency with them, holding
        // back the other three)
#pragma unroll 1
        for (int once = opaque_int(1); once > 0; --once) {
#pragma unroll
          for (int i = 0; i < R; ++i) acc[i] = fmaf(cur[i], (i & 2) ? sc_hi : sc_lo, acc[i]);
        }
      } else if constexpr (Cfg::MODE != 1) {
#pragma unroll
        for (int i = 0; i < R; ++i) acc[i] = fmaf(cur[i], (i & 2) ? sc_hi : sc_lo, acc[i]);
      } else {
        acc[0] += cur[0];                            // timing only: keeps the wgmmas, skips the FMAs
      }
      if (kt == k_tiles - 1) {                       // the unit is done: its epilogue, under nxt's wgmmas
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
            if (un0 + 64 * h < N) course::tma_store_2d(&c_map, box, un0 + 64 * h, um0 + rows);
            course::bulk_commit();
          }
        }
#pragma unroll
        for (int i = 0; i < R; ++i) acc[i] = 0.f;
      }
      course::wgmma_wait<0>();
      course::wgmma_fence_operand(nxt);
      u = u2, kt = kt2, s = s_next, phase = phase_next;
      sc_lo = nx_lo, sc_hi = nx_hi;
      return more;
    };
    while (step(p0, p1) && step(p1, p0)) {
    }
    if (signaller) course::bulk_wait_read<0>();
    }
  }
  if constexpr (CL > 1) course::cluster_sync();
}
