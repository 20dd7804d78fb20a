%%cuda fp8x --arch sm_90a -k "fp8_gemm<Fp8<128, 128, 6, 2, 8>>"
#include "course.cuh"     // the launch contract, smem_u32
#include "tma.cuh"        // TensorMap, mbarrier, TMA loads and stores
#include "wgmma.cuh"      // the smem descriptor, wgmma fence/commit/wait, wgmma m64nNk32 e4m3, the fragment
#include "pipeline.cuh"   // setmaxnreg, the bounded wait, clusters, the multicast load
using course::TensorMap;

__device__ __forceinline__ void wgmma_m64n64k32_e4m3(float (&d)[32], unsigned long long desc_a,
                                                    unsigned long long desc_b, int scale_d) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}


__device__ __forceinline__ void wgmma_m64n96k32_e4m3(float (&d)[48], unsigned long long desc_a,
                                                    unsigned long long desc_b, int scale_d) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %50, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n96k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
      "}, %48, %49, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

template <int R>
__device__ __forceinline__ void wg_e4m3(float (&d)[R], unsigned long long da, unsigned long long db, int sd) {
  if constexpr (R == 48) wgmma_m64n96k32_e4m3(d, da, db, sd);
  else if constexpr (R == 32) wgmma_m64n64k32_e4m3(d, da, db, sd);
  else course::wgmma_e4m3(d, da, db, sd);             // N = 128, 192, 256: wgmma.cuh's
}

template <int BM, int BN, int STAGES_, int CLUSTER_, int GROUP_M_, int SUB_ = 1, int MODE_ = 0, int PWARP_ = 0, int PING_ = 0, int PREF_ = 0>
struct Fp8 {
  static constexpr int SUB = SUB_, MODE = MODE_, PWARP = PWARP_, PING = PING_, PREF = PREF_;   // PREF: scales loaded one k tile ahead;   // PING: consumers take turns   // PWARP: a producer warp, no setmaxnreg
  static constexpr int TILE_M = BM, TILE_N = BN, TILE_K = 128, STAGES = STAGES_, CLUSTER = CLUSTER_;
  static constexpr int GROUP_M = GROUP_M_;
  static constexpr int CONSUMERS = BM / 64;
  static constexpr int THREADS = PWARP_ ? 128 * CONSUMERS + 32 : 128 * (1 + CONSUMERS);
  static constexpr int A_BYTES = BM * TILE_K;                   // BM rows of 128 fp8
  static constexpr int B_BYTES = BN * TILE_K;                   // BN rows (of B's N) of 128 fp8
  static constexpr int B_SHARE = B_BYTES / CLUSTER;             // what one CTA of a cluster loads (and multicasts)
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int C_BOX_BYTES = 64 * 64 * 2;
  static constexpr int C_STAGE_BYTES = 2 * C_BOX_BYTES;         // per consumer: 128 columns of its 64 rows
  static constexpr int RING_BYTES = STAGES * STAGE_BYTES;
  static constexpr int SMEM_BYTES = RING_BYTES + CONSUMERS * C_STAGE_BYTES + 1024;
  static constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
  static_assert(BN == 128 || BN == 192 || MODE_ == 1, "BN = 128 or 192");
  static_assert((BN / CLUSTER) % 8 == 0, "each CTA's share of B: whole 8-row swizzle atoms");
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
fp8_gemm(const __grid_constant__ TensorMap a_map,   // A (M, K) e4m3: box 128 columns × TILE_M rows
         const __grid_constant__ TensorMap b_map,   // B (N, K) e4m3: box 128 columns × TILE_N / CLUSTER rows
         const __grid_constant__ TensorMap c_map,   // C (M, N) bf16: box 64 columns × 64 rows (stores)
         const float* __restrict__ sa,              // (M, K / 128)
         const float* __restrict__ sb,              // (⌈N / 128⌉, K / 128)
         int M, int N, int K)
{
  constexpr int S = Cfg::STAGES, BM = Cfg::TILE_M, BN = Cfg::TILE_N, BK = Cfg::TILE_K, CL = Cfg::CLUSTER;
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long full[S], empty[S];
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
    for (int s = 0; s < S; ++s) {
      course::mbar_init(&full[s], 1);
      course::mbar_init(&empty[s], Cfg::CONSUMERS * CL);
    }
    course::fence_mbarrier_init();
  }
  if constexpr (CL > 1) course::cluster_sync();
  else __syncthreads();

  const int wg = Cfg::PWARP ? (threadIdx.x / 128 + 1) % (Cfg::CONSUMERS + 1) : threadIdx.x / 128;
  if (wg == 0) {
    // ---------------------------------------------------------------- the producer (05.03's)
    if constexpr (!Cfg::PWARP) course::setmaxnreg_dec<Cfg::PRODUCER_REGS>();
    if (threadIdx.x % 128 == 0) {
      int it = 0;
      for (int u = cluster; u < units; u += clusters) {
        int m0, n0;
        tile_of(u, m0, n0);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % S;
          course::mbar_wait_or_trap(&empty[s], ((it / S) & 1) ^ 1);
          course::mbar_arrive_expect_tx(&full[s], Cfg::STAGE_BYTES);
          course::tma_load_2d(a_slot(s), &a_map, kt * BK, m0, &full[s]);
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
    if constexpr (!Cfg::PWARP) course::setmaxnreg_inc<Cfg::CONSUMER_REGS>();
    const int rows = (wg - 1) * 64;
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
    unsigned char* c_stage = base + Cfg::RING_BYTES + (wg - 1) * Cfg::C_STAGE_BYTES;
    const int kb_count = K / 128;
    float acc[BN / 2];                               // fp32: the promoted sum over the k tiles done
    float part[BN / 2];                              // the wgmmas' accumulator: one k tile (128 products) only
    int it = 0;
    if constexpr (Cfg::PING)
      if (wg == 2 && cluster < units) course::named_barrier_arrive(3, 256);   // consumer 0 goes first
    for (int u = cluster; u < units; u += clusters) {
      int m0, n0;
      tile_of(u, m0, n0);
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
      // this thread's two rows of C (the fragment's g and g + 8) and their rows of sa
      const int r_lo = m0 + rows + course::wgmma_acc_row(0), r_hi = r_lo + 8;
      const float* sa_lo = sa + (size_t)min(r_lo, M - 1) * kb_count;   // rows past M: clamped (their C is dropped)
      const float* sa_hi = sa + (size_t)min(r_hi, M - 1) * kb_count;
      const int nb = (N + 127) / 128, split = 128 - n0 % 128;
      const float* sb_n = sb + (size_t)(n0 / 128) * kb_count;
      const float* sb_next = sb + (size_t)min(n0 / 128 + 1, nb - 1) * kb_count;
      if constexpr (Cfg::MODE == 1) {
        // CEILING (timing only, wrong values): no promotion, 05.03's wait<1> pipelining in acc
        int prev = -1;
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % S;
          course::mbar_wait_or_trap(&full[s], (it / S) & 1);
          const unsigned long long da = course::make_smem_desc(course::smem_u32(a_slot(s)) + rows * 128, 16, 1024,
                                                               course::DESC_SWIZZLE_128B);
          const unsigned long long db = course::make_smem_desc(course::smem_u32(b_slot(s)), 16, 1024,
                                                               course::DESC_SWIZZLE_128B);
          course::wgmma_fence_operand(acc);
          course::wgmma_fence();
#pragma unroll
          for (int k = 0; k < BK / 32; ++k)
            wg_e4m3(acc, course::desc_advance(da, 32 * k), course::desc_advance(db, 32 * k), (kt > 0 || k > 0) ? 1 : 0);
          course::wgmma_commit();
          course::wgmma_wait<1>();
          course::wgmma_fence_operand(acc);
          if (prev >= 0) release(prev);
          prev = s;
        }
        course::wgmma_wait<0>();
        course::wgmma_fence_operand(acc);
        if (prev >= 0) release(prev);
      } else if constexpr (Cfg::SUB == 3) {
        // the k tile in two column halves, one after the other, through ONE partial of BN / 4 registers
        constexpr int HN = BN / 2, HR = BN / 4;
        float part[HR];
        float pf_lo = __ldg(sa_lo), pf_hi = __ldg(sa_hi), pf_b = __ldg(sb_n), pf_b2 = __ldg(sb_next);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % S;
          const float a_lo = pf_lo, a_hi = pf_hi, b0 = pf_b, b1 = pf_b2;
          const int kn = min(kt + 1, k_tiles - 1);
          pf_lo = __ldg(sa_lo + kn); pf_hi = __ldg(sa_hi + kn); pf_b = __ldg(sb_n + kn);
          if constexpr (BN > 128) pf_b2 = __ldg(sb_next + kn);
          course::mbar_wait_or_trap(&full[s], (it / S) & 1);
          const unsigned long long da = course::make_smem_desc(course::smem_u32(a_slot(s)) + rows * 128, 16, 1024,
                                                               course::DESC_SWIZZLE_128B);
          const bool last = u + clusters >= units && kt + 1 == k_tiles;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const unsigned long long db = course::make_smem_desc(course::smem_u32(b_slot(s)) + h * HN * 128, 16, 1024,
                                                                 course::DESC_SWIZZLE_128B);
            if constexpr (Cfg::PING) course::named_barrier_sync(3 + (wg - 1), 256);
            course::wgmma_fence_operand(part);
            course::wgmma_fence();
#pragma unroll
            for (int k = 0; k < BK / 32; ++k)
              wg_e4m3(part, course::desc_advance(da, 32 * k), course::desc_advance(db, 32 * k), k > 0 ? 1 : 0);
            course::wgmma_commit();
            if constexpr (Cfg::PING)
              if (wg == 1 || !(last && h == 1)) course::named_barrier_arrive(4 - (wg - 1), 256);
            course::wgmma_wait<0>();
            course::wgmma_fence_operand(part);
            if (h == 1) release(s);
            float s_lo[HN / 32], s_hi[HN / 32];
#pragma unroll
            for (int q = 0; q < HN / 32; ++q) {
              const float b = (BN == 128 || h * HN + 32 * q < split) ? b0 : b1;
              s_lo[q] = a_lo * b;
              s_hi[q] = a_hi * b;
            }
#pragma unroll
            for (int j = 0; j < HR; ++j) {
              const int i = h * HR + j;
              acc[i] = fmaf(part[j], (j & 2) ? s_hi[j / 16] : s_lo[j / 16], acc[i]);
            }
          }
        }
      } else if constexpr (Cfg::SUB == 2) {
        // two 64 × 64 halves, each with its own partial: one half's promotion overlaps the other's wgmmas
        float p0[32], p1[32];
        auto issue = [&](float (&p)[32], int s, int h) {
          const unsigned long long da = course::make_smem_desc(course::smem_u32(a_slot(s)) + rows * 128, 16, 1024,
                                                               course::DESC_SWIZZLE_128B);
          const unsigned long long db = course::make_smem_desc(course::smem_u32(b_slot(s)) + h * 64 * 128, 16, 1024,
                                                               course::DESC_SWIZZLE_128B);
          course::wgmma_fence_operand(p);
          course::wgmma_fence();
#pragma unroll
          for (int k = 0; k < BK / 32; ++k)
            wgmma_m64n64k32_e4m3(p, course::desc_advance(da, 32 * k), course::desc_advance(db, 32 * k), k > 0 ? 1 : 0);
          course::wgmma_commit();
        };
        int s = it % S;
        float a_lo = __ldg(sa_lo), a_hi = __ldg(sa_hi), b_s = __ldg(sb_n);
        course::mbar_wait_or_trap(&full[s], (it / S) & 1);
        issue(p0, s, 0);
        issue(p1, s, 1);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const bool more = kt + 1 < k_tiles;
          const int kn = more ? kt + 1 : kt;
          const float n_lo = __ldg(sa_lo + kn), n_hi = __ldg(sa_hi + kn), n_b = __ldg(sb_n + kn);
          const float slo = a_lo * b_s, shi = a_hi * b_s;
          course::wgmma_wait<1>();                    // half 0 of k tile kt is done
          course::wgmma_fence_operand(p0);
#pragma unroll
          for (int j = 0; j < 32; ++j) acc[j] = fmaf(p0[j], (j & 2) ? shi : slo, acc[j]);
          const int s1 = (it + 1) % S;
          if (more) {
            course::mbar_wait_or_trap(&full[s1], ((it + 1) / S) & 1);
            issue(p0, s1, 0);
            course::wgmma_wait<1>();                  // half 1 of k tile kt is done
          } else {
            course::wgmma_wait<0>();
          }
          course::wgmma_fence_operand(p1);
          release(s);
#pragma unroll
          for (int j = 0; j < 32; ++j) acc[32 + j] = fmaf(p1[j], (j & 2) ? shi : slo, acc[32 + j]);
          if (more) issue(p1, s1, 1);
          s = s1;
          a_lo = n_lo; a_hi = n_hi; b_s = n_b;
        }
      } else {
      float pf_lo = 0.f, pf_hi = 0.f, pf_b = 0.f;
      if constexpr (Cfg::PREF) { pf_lo = __ldg(sa_lo); pf_hi = __ldg(sa_hi); pf_b = __ldg(sb_n); }
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % S;
        // the scales of k block kt, loaded before the wait so their latency hides behind it
        float scale_lo, scale_hi, scale_b;
        if constexpr (Cfg::PREF) {
          scale_lo = pf_lo; scale_hi = pf_hi; scale_b = pf_b;
          const int kn = min(kt + 1, k_tiles - 1);
          pf_lo = __ldg(sa_lo + kn); pf_hi = __ldg(sa_hi + kn); pf_b = __ldg(sb_n + kn);
        } else {
          scale_lo = __ldg(sa_lo + kt); scale_hi = __ldg(sa_hi + kt); scale_b = __ldg(sb_n + kt);
        }
        const float scale_b_next = BN > 128 ? __ldg(sb_next + kt) : 0.f;
        course::mbar_wait_or_trap(&full[s], (it / S) & 1);
        const unsigned long long da = course::make_smem_desc(course::smem_u32(a_slot(s)) + rows * 128, 16, 1024,
                                                             course::DESC_SWIZZLE_128B);
        const unsigned long long db = course::make_smem_desc(course::smem_u32(b_slot(s)), 16, 1024,
                                                             course::DESC_SWIZZLE_128B);
        const int c = wg - 1;
        if constexpr (Cfg::PING) course::named_barrier_sync(3 + c, 256);   // my turn: the other has issued
        course::wgmma_fence_operand(part);
        course::wgmma_fence();
        // 1. the k tile's four wgmma m64n128k32 into `part`: the first overwrites it (scale-d 0),
        //    each next one advances both descriptors 32 bytes (32 fp8) along the 128-byte rows
        // BEGIN SOLUTION
#pragma unroll
        for (int k = 0; k < BK / 32; ++k)
          wg_e4m3(part, course::desc_advance(da, 32 * k), course::desc_advance(db, 32 * k), k > 0 ? 1 : 0);
        // END SOLUTION
        course::wgmma_commit();
        if constexpr (Cfg::PING)
          if (c == 0 || !(u + clusters >= units && kt == k_tiles - 1)) course::named_barrier_arrive(3 + (1 - c), 256);   // your turn
        course::wgmma_wait<0>();
        course::wgmma_fence_operand(part);
        release(s);                                  // the slot's tiles are read: the producer may refill it
        // 2. promotion: acc += part · (the row's A scale) · (the block's B scale)
        // BEGIN SOLUTION
        float s_lo[BN / 32], s_hi[BN / 32];
#pragma unroll
        for (int q = 0; q < BN / 32; ++q) {
          const float b = (BN == 128 || 32 * q < split) ? scale_b : scale_b_next;
          s_lo[q] = scale_lo * b;
          s_hi[q] = scale_hi * b;
        }
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = fmaf(part[i], (i & 2) ? s_hi[i / 16] : s_lo[i / 16], acc[i]);
        // END SOLUTION
      }
      }
      // the epilogue (05.03's): bf16 pairs into the staging boxes, 128-byte swizzled, then TMA stores
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
          if (n0 + 64 * h < N) course::tma_store_2d(&c_map, box, n0 + 64 * h, m0 + rows);
          course::bulk_commit();
        }
      }
    }
    if (signaller) course::bulk_wait_read<0>();
  }
  if constexpr (CL > 1) course::cluster_sync();
}
