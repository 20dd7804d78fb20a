%%cuda fp8w --arch sm_90a -k "fp8_gemm_w<Fp8w<208, 4, 8>>"
// Dev variant of lesson 05.04's FP8 block-scaled GEMM (tools/ch05_hopper/fp8_cell.cu, 2026-11-25):
// 128 x 208 tiles. Per k tile a consumer's own tensor time is 2N clocks and its chain after its
// wgmmas (promotion, issue, waits) ~1.5N + F, so a wider tile amortizes F; N = 208 is the widest whose
// partial + fp32 sum (104 + 104 registers a thread) fit setmaxnreg's 240. Producer 24: 24·128 + 240·256
// = 64512 = 168·384, the CTA's registers at launch; setmaxnreg.inc draws on that pool only (a first
// build with 32 / 240, past it, hung on the H100 at the first shape). n0 = t · 208, so B's 128-wide
// scale blocks start at a multiple of 16 columns inside the tile (8 cases of n0 % 128) and a tile
// meets up to three of them: the tile's k loop is compiled once per case (SPLIT, the first block
// boundary, a compile-time constant), so each 8-column group of the fragment takes its block's scale
// with no select. The epilogue stores four 64 × 64 boxes at columns 0, 64, 128 and 144 of the tile:
// the last overlaps the third by 48 columns (the same values), so the lesson's 64 × 64 C map serves
// and no store reaches the next tile. Descriptors made ahead (opaque), no turns.
// BN = 200 too (fp8n200_gpu.py, the same code): n0 % 128 in 8-column steps, 16 copies of the k loop,
// boxes at 0, 64, 128, 136. Measured 2026-11-25 (results/ch05/fp8n200_h100_2026-11-25.log): no faster
// than 208 at 8192^3 (85% both) despite fuller waves, and 6 waves instead of 5 at 4096^3 (78% vs 91%).
#include "course.cuh"
#include "tma.cuh"
#include "wgmma.cuh"
#include "pipeline.cuh"
using course::TensorMap;

// fp32 += e4m3 * e4m3, 64 x 208 x 32, both operands K-major (the PTX ISA allows any N = 8 .. 256 in
// steps of 8 for e4m3): 104 registers of accumulator a thread. Dev only, not in grader/include.
__device__ __forceinline__ void wgmma_m64n208k32_e4m3(float (&d)[104], unsigned long long desc_a,
                                                     unsigned long long desc_b, int scale_d) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %106, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n208k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103"
      "}, %104, %105, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}
// the same, 64 x 200 x 32: 100 registers (lesson 05.04's 128 x 200 variant, fewer partial tile columns)
__device__ __forceinline__ void wgmma_m64n200k32_e4m3(float (&d)[100], unsigned long long desc_a,
                                                     unsigned long long desc_b, int scale_d) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %102, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n200k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99"
      "}, %100, %101, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}
template <int BN> __device__ __forceinline__ void wgmma_e4m3(float (&d)[BN / 2], unsigned long long da,
                                                          unsigned long long db, int scale_d) {
  if constexpr (BN == 208) wgmma_m64n208k32_e4m3(d, da, db, scale_d);
  else wgmma_m64n200k32_e4m3(d, da, db, scale_d);
}

template <int BN, int STAGES_, int GROUP_M_>
struct Fp8w {
  static constexpr int TILE_M = 128, TILE_N = BN, TILE_K = 128, STAGES = STAGES_, CLUSTER = 1;
  static constexpr int GROUP_M = GROUP_M_;
  static constexpr int CONSUMERS = 2;
  static constexpr int THREADS = 128 * (1 + CONSUMERS);
  static constexpr int A_BYTES = TILE_M * TILE_K;
  static constexpr int B_BYTES = BN * TILE_K;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int C_BOX_BYTES = 64 * 64 * 2;
  static constexpr int C_STAGE_BYTES = 2 * C_BOX_BYTES;
  static constexpr int C_BOXES = (BN + 63) / 64;                // the last one ends at BN (overlapping)
  static constexpr int RING_BYTES = STAGES * STAGE_BYTES;
  static constexpr int SMEM_BYTES = RING_BYTES + CONSUMERS * C_STAGE_BYTES + 1024;
  static constexpr int PRODUCER_REGS = 24, CONSUMER_REGS = 240;
  static_assert(PRODUCER_REGS * 128 + CONSUMER_REGS * 128 * CONSUMERS <= 168 * THREADS, "setmaxnreg: within the launch's registers");
  static_assert(BN == 208 || BN == 200, "the n208 and n200 wgmma wrappers only");
  static_assert(STAGE_BYTES % 1024 == 0, "slots on the 128-byte swizzle's 1024-byte atoms");
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory");
};

template <int V> struct IC { static constexpr int value = V; };
// f(IC<split>{}) for split = G, 2G, ..., 128 (the tile's first B block boundary): one copy of f per case
template <int G, int V, class F>
__device__ __forceinline__ void with_split(int split, F&& f) {
  if constexpr (V >= 128) f(IC<128>{});
  else if (split == V) f(IC<V>{});
  else with_split<G, V + G>(split, f);
}

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

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
fp8_gemm_w(const __grid_constant__ TensorMap a_map, const __grid_constant__ TensorMap b_map,
           const __grid_constant__ TensorMap c_map, const float* __restrict__ sa, const float* __restrict__ sb,
           int M, int N, int K)
{
  constexpr int S = Cfg::STAGES, BM = Cfg::TILE_M, BN = Cfg::TILE_N, BK = Cfg::TILE_K;
  constexpr int G = (BN % 128 == 0) ? 128 : ((BN % 64 == 0) ? 64 : ((BN % 32 == 0) ? 32 : ((BN % 16 == 0) ? 16 : 8)));   // gcd(BN, 128)
  static_assert(BN % 8 == 0, "block boundaries on 8-column groups");
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long full[S], empty[S];
  unsigned char* base = smem_raw + ((1024 - (course::smem_u32(smem_raw) & 1023)) & 1023);
  auto a_slot = [&](int s) { return base + s * Cfg::STAGE_BYTES; };
  auto b_slot = [&](int s) { return base + s * Cfg::STAGE_BYTES + Cfg::A_BYTES; };

  const int cluster = blockIdx.x, clusters = gridDim.x;
  const int tiles_n = (N + BN - 1) / BN, units_m = (M + BM - 1) / BM;
  const int units = units_m * tiles_n, k_tiles = K / BK;
  auto tile_of = [&](int u, int& m0, int& n0) {
    int um = u / tiles_n, un = u % tiles_n;
    if (Cfg::GROUP_M > 0) {
      const int per_group = Cfg::GROUP_M * tiles_n, first = (u / per_group) * Cfg::GROUP_M;
      const int rows = min(units_m - first, Cfg::GROUP_M);
      um = first + (u % per_group) % rows;
      un = (u % per_group) / rows;
    }
    m0 = um * BM;
    n0 = un * BN;
  };

  if (threadIdx.x == 0) {
    course::prefetch_tensormap(&a_map);
    course::prefetch_tensormap(&b_map);
    for (int s = 0; s < S; ++s) {
      course::mbar_init(&full[s], 1);
      course::mbar_init(&empty[s], Cfg::CONSUMERS);
    }
    course::fence_mbarrier_init();
  }
  __syncthreads();

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
          course::tma_load_2d(b_slot(s), &b_map, kt * BK, n0, &full[s]);
        }
      }
    }
  } else {
    course::setmaxnreg_inc<Cfg::CONSUMER_REGS>();
    const int c = wg - 1, rows = c * 64;
    const bool signaller = threadIdx.x % 128 == 0;
    unsigned char* c_stage = base + Cfg::RING_BYTES + c * Cfg::C_STAGE_BYTES;
    const int kb_count = K / 128, nb = (N + 127) / 128;
    float acc[BN / 2];
    float part[BN / 2];
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
      const int r_lo = m0 + rows + course::wgmma_acc_row(0), r_hi = r_lo + 8;
      const float* sa_lo = sa + (size_t)min(r_lo, M - 1) * kb_count;
      const float* sa_hi = sa + (size_t)min(r_hi, M - 1) * kb_count;
      with_split<G, G>(128 - n0 % 128, [&](auto split_c) {
        // columns [0, SPLIT) of the tile: B block n0 / 128; [SPLIT, SPLIT + 128): the next; the rest: the one after
        constexpr int SPLIT = decltype(split_c)::value;
        constexpr int NBLK = SPLIT >= BN ? 1 : (SPLIT + 128 >= BN ? 2 : 3);
        const float* sb_q[NBLK];
#pragma unroll
        for (int q = 0; q < NBLK; ++q) sb_q[q] = sb + (size_t)min(n0 / 128 + q, nb - 1) * kb_count;
        auto scales = [&](int k, float& lo, float& hi, float (&b)[NBLK]) {
          lo = __ldg(sa_lo + k); hi = __ldg(sa_hi + k);
#pragma unroll
          for (int q = 0; q < NBLK; ++q) b[q] = __ldg(sb_q[q] + k);
        };
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
        float scale_lo, scale_hi, scale_b[NBLK];
        scales(0, scale_lo, scale_hi, scale_b);
        mbar_wait_lean(&full[s], phase);
        for (int kt = 0; kt < k_tiles; ++kt) {
          const unsigned long long da = da_s, db = db_s;
          course::wgmma_fence_operand(part);
          course::wgmma_fence();
#pragma unroll
          for (int k = 0; k < BK / 32; ++k)
            wgmma_e4m3<BN>(part, course::desc_advance(da, 32 * k), course::desc_advance(db, 32 * k), k > 0 ? 1 : 0);
          course::wgmma_commit();
          const int s_next = s + 1 == S ? 0 : s + 1;
          const unsigned phase_next = s_next == 0 ? phase ^ 1 : phase;
          float next_lo, next_hi, next_b[NBLK];
          scales(min(kt + 1, k_tiles - 1), next_lo, next_hi, next_b);
          da_s = opaque(course::desc_advance(da0, s_next * Cfg::STAGE_BYTES));
          db_s = opaque(course::desc_advance(db0, s_next * Cfg::STAGE_BYTES));
          if (kt + 1 < k_tiles) mbar_wait_lean(&full[s_next], phase_next);
          course::wgmma_wait<0>();
          course::wgmma_fence_operand(part);
          if (signaller) course::mbar_arrive(&empty[s]);
          float s_lo[NBLK], s_hi[NBLK];
#pragma unroll
          for (int q = 0; q < NBLK; ++q) {
            s_lo[q] = scale_lo * scale_b[q];
            s_hi[q] = scale_hi * scale_b[q];
          }
          // element i is in the fragment's 8-column group i / 4 (wgmma_acc_col): its block, known here
#pragma unroll
          for (int i = 0; i < BN / 2; ++i) {
            const int col8 = 8 * (i / 4);
            const int q = col8 < SPLIT ? 0 : (col8 < SPLIT + 128 ? 1 : 2);
            acc[i] = fmaf(part[i], (i & 2) ? s_hi[q] : s_lo[q], acc[i]);
          }
          s = s_next, phase = phase_next;
          scale_lo = next_lo, scale_hi = next_hi;
#pragma unroll
          for (int q = 0; q < NBLK; ++q) scale_b[q] = next_b[q];
        }
      });
      // the epilogue: boxes at tile columns min(64h, BN - 64); two staging boxes in turn
#pragma unroll
      for (int h = 0; h < Cfg::C_BOXES; ++h) {
        const int cb = min(64 * h, BN - 64);
        unsigned char* box = c_stage + (h % 2) * Cfg::C_BOX_BYTES;
        if (signaller) course::bulk_wait_read<1>();
        course::named_barrier_sync(wg, 128);
#pragma unroll
        for (int i = cb / 2; i < cb / 2 + 32; i += 2) {
          const int row = course::wgmma_acc_row(i), col = course::wgmma_acc_col(i) - cb;
          unsigned char* p = box + row * 128 + (((col / 8) ^ (row & 7)) << 4) + (col % 8) * 2;
          *reinterpret_cast<unsigned*>(p) = course::pack_bf16x2(acc[i], acc[i + 1]);
        }
        course::fence_proxy_async();
        course::named_barrier_sync(wg, 128);
        if (signaller) {
          if (n0 + cb < N) course::tma_store_2d(&c_map, box, n0 + cb, m0 + rows);
          course::bulk_commit();
        }
      }
    }
    if (signaller) course::bulk_wait_read<0>();
  }
}
