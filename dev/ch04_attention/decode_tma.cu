// decode_tma.cu -- how K/V reach shared memory in lesson 04.04's decode kernel: the variants that
// dev/ch04_attention/decode_tma.py checks and times. The kernel is the lesson's
// (tools/ch04_attention/decode_cell.cu: head packing, split-KV, fused last-block merge, paged rows),
// with one more template knob, LOAD (bit flags):
//   0          cp.async, 16 bytes per thread per copy, swizzled tiles (the lesson's kernel)
//   EF         cp.async with an L2 evict_first cache policy (createpolicy.fractional, sm_80+)
//   PF         cp.async with the L2::256B prefetch-size hint
//   TW         the main loop carries each thread's own write address in the next stage (stage base
//              + its swizzled chunk offset) instead of the stage base. Needed with EF: otherwise ptxas
//              13.0 (the device's NVRTC) splits the address into a vector register plus the stage base
//              in a uniform register, pairs that register with the cache policy, and never writes the
//              pair -- the LDGSTS traps (CUDA_ERROR_ILLEGAL_INSTRUCTION on the H100, 2026-11-24; the
//              miscompile of IST-DASLab/marlin#44; NVRTC 13.5 gets it right). TW alone is the control.
//   BULK       one 1-D bulk copy (cp.async.bulk, sm_90) per 256-byte K or V row, into rows padded to
//              D·2 + 16 bytes (a bulk copy cannot swizzle: the pad keeps ldmatrix conflict-free),
//              completing on one mbarrier per stage; BULK | EF adds the evict_first policy
// and one more argument, `trace`: null, or 3 %globaltimer stamps per block (entry, end of the
// main loop, exit) for the timeline of a launch.
#include "course.cuh"
#include "attention.cuh"
#include "tma.cuh"
using namespace attn;

enum : int { EF = 1, PF = 2, BULK = 4, TW = 8 };

template <int D_, int BN_, int WARPS_, int STAGES_, bool PAGED_, int MINB_, int LOAD_>
struct DevConfig {
  static constexpr int D = D_, BN = BN_, WARPS = WARPS_, STAGES = STAGES_, MINB = MINB_, LOAD = LOAD_;
  static constexpr bool PAGED = PAGED_, IS_BULK = (LOAD_ & BULK) != 0;
  static constexpr int HEADS = 16;
  static constexpr int THREADS = WARPS * 32;
  static constexpr int TPW = BN / WARPS;
  static constexpr int NT = TPW / 8, KC = TPW / 16, KD = D / 16, DT = D / 8, CH = D / 8;
  static constexpr int PITCH = IS_BULK ? D * 2 + 16 : D * 2;    // bytes per K/V row in shared memory
  static constexpr int Q_BYTES = HEADS * D * 2;
  static constexpr int KV_BYTES = BN * PITCH;
  static constexpr int STAGE_BYTES = 2 * KV_BYTES;
  static constexpr int RED_PITCH = D + 8;
  static constexpr int RED_BYTES = WARPS * 16 * (RED_PITCH + 2) * 4;
  static constexpr int MAIN_BYTES = STAGES * STAGE_BYTES > RED_BYTES ? STAGES * STAGE_BYTES : RED_BYTES;
  static constexpr int BAR_OFF = Q_BYTES + MAIN_BYTES;            // STAGES mbarriers (bulk only)
  static constexpr int ROWS_PER_PASS = THREADS / CH;
  static constexpr int SMEM_BYTES = BAR_OFF + (IS_BULK ? STAGES * 8 : 0) + 16;
  static constexpr int TILE_M = HEADS, TILE_N = BN, TILE_K = D;
  static_assert(D == 64 || D == 128, "head dim 64 or 128");
  static_assert(TPW % 16 == 0, "each warp takes a multiple of 16 tokens");
  static_assert(ROWS_PER_PASS % 8 == 0 && HEADS % ROWS_PER_PASS == 0, "q's swizzled chunk is the same on every pass");
  static_assert(IS_BULK || BN % ROWS_PER_PASS == 0, "a thread's swizzled chunk is the same on every pass");
  static_assert(BAR_OFF % 8 == 0 && STAGE_BYTES % 16 == 0, "aligned stages and barriers");
};
//   D BN warps stages blocks/SM LOAD
template <int D, int BN, int W, int S, int MB, int LOAD> using DecX = DevConfig<D, BN, W, S, false, MB, LOAD>;
template <int D, int BN, int W, int S, int MB, int LOAD> using PagX = DevConfig<D, BN, W, S, true, MB, LOAD>;

__device__ __forceinline__ unsigned long long evict_first_policy() {
  unsigned long long p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}

// 16 bytes (src_bytes < 16: zero fill) with the LOAD's L2 qualifiers
template <int LOAD>
__device__ __forceinline__ void kv_copy16(unsigned saddr, const void* g, unsigned src_bytes, unsigned long long pol) {
  if constexpr ((LOAD & (EF | PF)) == (EF | PF)) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2, %3;\n"
                 :: "r"(saddr), "l"(g), "r"(src_bytes), "l"(pol) : "memory");
  } else if constexpr ((LOAD & EF) != 0) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n"
                 :: "r"(saddr), "l"(g), "r"(src_bytes), "l"(pol) : "memory");
  } else if constexpr ((LOAD & PF) != 0) {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n"
                 :: "r"(saddr), "l"(g), "r"(src_bytes) : "memory");
  } else {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(saddr), "l"(g), "r"(src_bytes) : "memory");
  }
}

// One contiguous run of `bytes` (a multiple of 16) global -> shared, counted on `bar`.
template <bool HINT>
__device__ __forceinline__ void bulk_copy(unsigned sdst, const void* g, unsigned bytes, unsigned bar,
                                          unsigned long long pol) {
  if constexpr (HINT) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1], %2, [%3], %4;\n" :: "r"(sdst), "l"(g), "r"(bytes), "r"(bar), "l"(pol) : "memory");
  } else {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 :: "r"(sdst), "l"(g), "r"(bytes), "r"(bar) : "memory");
  }
}

__device__ __forceinline__ void st_zero16(unsigned saddr) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" :: "r"(saddr), "r"(0) : "memory");
}

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

// Element offset of token t0 + tok of sequence b, KV head kvh, in the K (or V) cache.
template <class C>
__device__ __forceinline__ size_t kv_row_off(int tok, int t0, int b, int kvh, int Hkv, int cap, int page_shift,
                                             const int* __restrict__ block_table) {
  if constexpr (C::PAGED) {
    const int tk = t0 + tok;
    const int page = __ldg(block_table + (size_t)b * (cap >> page_shift) + (tk >> page_shift));
    return ((((size_t)page << page_shift) + (tk & ((1 << page_shift) - 1))) * Hkv + kvh) * C::D;
  } else {
    return (((size_t)b * Hkv + kvh) * cap + t0 + tok) * C::D;
  }
}

// cp.async tile j (swizzled rows): thread (ld_r, ld_c) copies chunk ld_c of rows ld_r + i · ROWS_PER_PASS
// of K and V; `so` is the shared address of its first chunk in the stage. Rows past ntok become zeros.
template <class C>
__device__ __forceinline__ void load_tile(unsigned so, int j, int ntok, int ld_r, int ld_c,
                                          const bf16_t* __restrict__ kc, const bf16_t* __restrict__ vc,
                                          const int* __restrict__ block_table, int t0, int b, int kvh, int Hkv,
                                          int cap, int page_shift, unsigned long long pol) {
  constexpr int BN = C::BN, D = C::D;
  const bool full = (j + 1) * BN <= ntok;
#pragma unroll
  for (int i = 0; i < BN / C::ROWS_PER_PASS; ++i, so += C::ROWS_PER_PASS * D * 2) {
    const int r = ld_r + i * C::ROWS_PER_PASS, tok = j * BN + r;
    if (full) {
      const size_t e = kv_row_off<C>(tok, t0, b, kvh, Hkv, cap, page_shift, block_table) + ld_c * 8;
      kv_copy16<C::LOAD>(so, kc + e, 16u, pol);
      kv_copy16<C::LOAD>(so + C::KV_BYTES, vc + e, 16u, pol);
    } else {
      const bool ok = tok < ntok;
      const size_t e = ok ? kv_row_off<C>(tok, t0, b, kvh, Hkv, cap, page_shift, block_table) + ld_c * 8 : 0;
      kv_copy16<C::LOAD>(so, kc + e, ok ? 16u : 0u, pol);
      kv_copy16<C::LOAD>(so + C::KV_BYTES, vc + e, ok ? 16u : 0u, pol);
    }
  }
}

// Columns c4 .. c4 + 3 of one head from its ns partials (the lesson's merge_partials).
__device__ __forceinline__ void merge_partials(const float* o_part_row, const float* lse_row, int ns, int DV,
                                               int c4, bf16_t* o_row) {
  float M = -INFINITY;
  for (int s = 0; s < ns; ++s) M = fmaxf(M, __ldcg(lse_row + s));
  const float ref = M == -INFINITY ? 0.f : M;
  float W = 0.f;
  float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int s = 0; s < ns; ++s) {
    const float w = __expf(__ldcg(lse_row + s) - ref);
    const float4 v = __ldcg(reinterpret_cast<const float4*>(o_part_row + (size_t)s * DV + c4));
    W += w;
    a.x += w * v.x, a.y += w * v.y, a.z += w * v.z, a.w += w * v.w;
  }
  const float inv = W > 0.f ? 1.f / W : 0.f;
  *reinterpret_cast<uint2*>(o_row + c4) = make_uint2(pack_bf16(a.x * inv, a.y * inv), pack_bf16(a.z * inv, a.w * inv));
}

template <class C>
__global__ void __launch_bounds__(C::THREADS, C::MINB)
decode_dev(const bf16_t* __restrict__ q, const bf16_t* __restrict__ kc, const bf16_t* __restrict__ vc,
           const int* __restrict__ block_table, const int* __restrict__ seq_lens, float* __restrict__ o_part,
           float* __restrict__ lse_part, bf16_t* __restrict__ o, int* __restrict__ counters, int Hq, int Hkv,
           int cap, int page_shift, int chunk, int n_splits, float scale_log2, unsigned long long* __restrict__ trace) {
  constexpr int D = C::D, BN = C::BN, KD = C::KD, KC = C::KC, NT = C::NT, DT = C::DT, CH = C::CH;
  constexpr int STAGES = C::STAGES;
  extern __shared__ __align__(1024) unsigned char smem[];  // Q | stages {K, V} | mbarriers | ticket
  const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const size_t blk = ((size_t)b * gridDim.y + kvh) * gridDim.x + split;
  if (trace != nullptr && tid == 0) trace[3 * blk] = globaltimer();
  const int G = Hq / Hkv;
  const int L = seq_lens[b];
  const int t0 = split * chunk;
  if (t0 >= L && split > 0) return;
  const int ntok = min(L, t0 + chunk) - t0;
  const int n_tiles = ntok > 0 ? (ntok + BN - 1) / BN : 0;
  int* ticket = reinterpret_cast<int*>(smem + C::SMEM_BYTES - 16);
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(smem + C::BAR_OFF);

  auto head_of = [&](int gi) -> int { return kvh * G + gi; };
  auto row_off = [&](int tok) -> size_t {
    return kv_row_off<C>(tok, t0, b, kvh, Hkv, cap, page_shift, block_table);
  };

  if (L == 0) {
    for (int item = threadIdx.x; item < G * D; item += C::THREADS)
      o[((size_t)b * Hq + head_of(item / D)) * D + item % D] = 0;
    if (trace != nullptr && tid == 0) trace[3 * blk + 1] = trace[3 * blk + 2] = globaltimer();
    return;
  }

  unsigned long long pol = 0;
  if constexpr ((C::LOAD & EF) != 0) pol = evict_first_policy();

  const int ld_r = tid / CH, ld_c = tid % CH;
  const unsigned ld_soff = swz<D>(ld_r, ld_c);
  const unsigned stage0 = sbase + C::Q_BYTES;
  // cp.async tile j into the stage at shared address `so` + ld_soff's row 0 (so: see TW)
  auto load_kv = [&](unsigned so, int j) {
    load_tile<C>(so, j, ntok, ld_r, ld_c, kc, vc, block_table, t0, b, kvh, Hkv, cap, page_shift, pol);
  };
  // bulk: tile j into stage s, one row copy per thread (rows past the end: zeros, by plain stores)
  auto load_bulk = [&](int s, int j) {
    const unsigned stage = stage0 + s * C::STAGE_BYTES;
    const int rows = min(BN, ntok - j * BN);
    if (tid == 0) course::mbar_arrive_expect_tx(bars + s, (unsigned)rows * 2u * D * 2u);
    for (int r = tid; r < 2 * BN; r += C::THREADS) {
      const int row = r % BN, which = r / BN;
      const unsigned dst = stage + which * C::KV_BYTES + row * C::PITCH;
      if (row < rows) {
        bulk_copy<(C::LOAD & EF) != 0>(dst, (which ? vc : kc) + row_off(j * BN + row), D * 2,
                                       course::smem_u32(bars + s), pol);
      } else {
#pragma unroll
        for (int c = 0; c < D * 2; c += 16) st_zero16(dst + c);
      }
    }
  };

#pragma unroll
  for (int i = 0; i < C::HEADS / C::ROWS_PER_PASS; ++i) {
    const int r = ld_r + i * C::ROWS_PER_PASS;
    const bool ok = r < G;
    cp_async_16z(sbase + ld_soff + i * C::ROWS_PER_PASS * D * 2,
                 ok ? q + ((size_t)b * Hq + head_of(r)) * D + ld_c * 8 : q, ok ? 16u : 0u);
  }
  if constexpr (C::IS_BULK) {
    course::cp_async_commit();
    if (tid == 0) {
      for (int s = 0; s < STAGES; ++s) course::mbar_init(bars + s, 1);
      course::fence_mbarrier_init();
    }
    __syncthreads();
    for (int s = 0; s < STAGES - 1; ++s)
      if (s < n_tiles) load_bulk(s, s);
  } else {
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < n_tiles) load_kv(stage0 + s * C::STAGE_BYTES + ld_soff, s);
      course::cp_async_commit();
    }
  }

  const int wtok = warp * C::TPW;
  const unsigned q_ld = swz<D>(lane & 15, lane >> 4);
  const int k_row = wtok + (lane & 7) + ((lane >> 4) << 3), k_chunk = (lane >> 3) & 1;
  const int v_row = wtok + (lane & 15), v_chunk = lane >> 4;
  const unsigned k_ld = C::IS_BULK ? k_row * C::PITCH + k_chunk * 16 : swz<D>(k_row, k_chunk);
  const unsigned v_ld = C::KV_BYTES + (C::IS_BULK ? v_row * C::PITCH + v_chunk * 16 : swz<D>(v_row, v_chunk));

  float acc[DT][4];
#pragma unroll
  for (int n = 0; n < DT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  unsigned qf[KD][4];

  // wr: the stage the next tile goes to; with TW, this thread's chunk in it (see TW)
  constexpr bool TWA = (C::LOAD & TW) != 0;
  const unsigned w_off = TWA ? ld_soff : 0u;
  unsigned rd = stage0, wr = stage0 + (STAGES - 1) * C::STAGE_BYTES + w_off;
  const unsigned send = stage0 + STAGES * C::STAGE_BYTES;
  for (int j = 0; j < n_tiles; ++j) {
    if constexpr (C::IS_BULK) {
      if (j == 0) course::cp_async_wait<0>();              // q
      course::mbar_wait(bars + j % STAGES, (unsigned)(j / STAGES) & 1u);
      __syncthreads();                                     // also: every warp is done with tile j - 1
      if (j + STAGES - 1 < n_tiles) load_bulk((j + STAGES - 1) % STAGES, j + STAGES - 1);
      rd = stage0 + (j % STAGES) * C::STAGE_BYTES;
    } else {
      course::cp_async_wait<STAGES - 2>();
      __syncthreads();
      if (j + STAGES - 1 < n_tiles) load_kv(TWA ? wr : wr + ld_soff, j + STAGES - 1);
      course::cp_async_commit();
      wr = (wr + C::STAGE_BYTES == send + w_off) ? stage0 + w_off : wr + C::STAGE_BYTES;
    }
    if (j == 0) {
#pragma unroll
      for (int ks = 0; ks < KD; ++ks) course::ldmatrix_x4(qf[ks], sbase + (q_ld ^ (ks * 32)));
    }

    float s[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < KD; ++ks)
#pragma unroll
      for (int nn = 0; nn < NT / 2; ++nn) {
        unsigned kb[4];
        const unsigned ka = C::IS_BULK ? rd + k_ld + nn * 16 * C::PITCH + ks * 32
                                       : rd + ((k_ld + nn * 16 * D * 2) ^ (ks * 32));
        course::ldmatrix_x4(kb, ka);
        mma_bf16(s[2 * nn], qf[ks], kb[0], kb[1]);
        mma_bf16(s[2 * nn + 1], qf[ks], kb[2], kb[3]);
      }
    if ((j + 1) * BN > ntok) {
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (j * BN + wtok + n * 8 + 2 * t + (e & 1) >= ntok) s[n][e] = -INFINITY;
    }
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < NT; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * hh], s[n][2 * hh + 1]));
      mx = quad_max(mx);
      const float m_new = fmaxf(m_run[hh], mx * scale_log2);
      const float ref = ref_point(m_new), alpha = ex2(m_run[hh] - ref);
      m_run[hh] = m_new;
      float rs = 0.f;
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 2 * hh; e < 2 * hh + 2; ++e) {
          const float p = ex2(fmaf(s[n][e], scale_log2, -ref));
          s[n][e] = p;
          rs += p;
        }
      l_run[hh] = l_run[hh] * alpha + rs;
#pragma unroll
      for (int n = 0; n < DT; ++n) acc[n][2 * hh] *= alpha, acc[n][2 * hh + 1] *= alpha;
    }
#pragma unroll
    for (int kk = 0; kk < KC; ++kk) {
      unsigned pa[4];
      pa[0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
      pa[1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
      pa[2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int dd = 0; dd < DT / 2; ++dd) {
        unsigned vb[4];
        const unsigned va = C::IS_BULK ? rd + v_ld + kk * 16 * C::PITCH + dd * 32
                                       : rd + ((v_ld + kk * 16 * D * 2) ^ (dd * 32));
        course::ldmatrix_x4_trans(vb[0], vb[1], vb[2], vb[3], va);
        mma_bf16(acc[2 * dd], pa, vb[0], vb[1]);
        mma_bf16(acc[2 * dd + 1], pa, vb[2], vb[3]);
      }
    }
    if constexpr (!C::IS_BULK) rd = (rd + C::STAGE_BYTES == send) ? stage0 : rd + C::STAGE_BYTES;
  }
  course::cp_async_wait<0>();
  __syncthreads();
  if (trace != nullptr && tid == 0) trace[3 * blk + 1] = globaltimer();

  float* red = reinterpret_cast<float*>(smem + C::Q_BYTES);
  float* ml = red + C::WARPS * 16 * C::RED_PITCH;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int row = g + 8 * hh;
    float* dst = red + (warp * 16 + row) * C::RED_PITCH;
#pragma unroll
    for (int n = 0; n < DT; ++n)
      *reinterpret_cast<float2*>(dst + n * 8 + 2 * t) = make_float2(acc[n][2 * hh], acc[n][2 * hh + 1]);
    const float l = quad_sum(l_run[hh]);
    if (t == 0) ml[(warp * 16 + row) * 2] = m_run[hh], ml[(warp * 16 + row) * 2 + 1] = l;
  }
  __syncthreads();
  for (int item = tid; item < G * D / 4; item += C::THREADS) {
    const int row = item / (D / 4), c4 = (item % (D / 4)) * 4;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < C::WARPS; ++w) M = fmaxf(M, ml[(w * 16 + row) * 2]);
    const float ref = ref_point(M);
    float Ls = 0.f;
    float4 a4 = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < C::WARPS; ++w) {
      const float sc = ex2(ml[(w * 16 + row) * 2] - ref);
      Ls += sc * ml[(w * 16 + row) * 2 + 1];
      const float4 v = *reinterpret_cast<const float4*>(red + (w * 16 + row) * C::RED_PITCH + c4);
      a4.x += sc * v.x, a4.y += sc * v.y, a4.z += sc * v.z, a4.w += sc * v.w;
    }
    const float inv = Ls > 0.f ? 1.f / Ls : 0.f;
    const int h = head_of(row);
    if (n_splits == 1) {
      *reinterpret_cast<uint2*>(o + ((size_t)b * Hq + h) * D + c4) =
          make_uint2(pack_bf16(a4.x * inv, a4.y * inv), pack_bf16(a4.z * inv, a4.w * inv));
    } else {
      const size_t ps = ((size_t)b * Hq + h) * n_splits + split;
      *reinterpret_cast<float4*>(o_part + ps * D + c4) = make_float4(a4.x * inv, a4.y * inv, a4.z * inv, a4.w * inv);
      if (c4 == 0) lse_part[ps] = Ls > 0.f ? (ref + __log2f(Ls)) * LN2 : -INFINITY;
    }
  }
  if (n_splits > 1 && counters != nullptr) {
    const int ns = min(n_splits, (L + chunk - 1) / chunk);
    if (last_arrival(counters + (size_t)b * Hkv + kvh, ns, ticket)) {
      for (int item = tid; item < G * D / 4; item += C::THREADS) {
        const size_t hb = (size_t)b * Hq + head_of(item / (D / 4));
        merge_partials(o_part + hb * n_splits * D, lse_part + hb * n_splits, ns, D, (item % (D / 4)) * 4, o + hb * D);
      }
    }
  }
  if (trace != nullptr && tid == 0) trace[3 * blk + 2] = globaltimer();
}
