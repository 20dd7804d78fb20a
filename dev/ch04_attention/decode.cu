// decode.cu -- attention for one new token per sequence (decode), on tensor cores.
//
// O (B, Hq, D) bf16 = softmax(scale · q Kᵀ) V over the first L_b tokens of sequence b's cache.
// q (B, Hq, D) bf16; query head h reads KV head h / G, G = Hq / Hkv (GQA; Hkv = 1 is MQA).
// Cache, contiguous: K, V (B, Hkv, CAP, D) bf16 (CAP >= max L_b).
// Cache, paged:      K, V (num_pages, P, Hkv, D) bf16, pages of P tokens; block_table (B, CAP) int32
//                    maps sequence b's logical page i to a physical page (any order); P a power
//                    of two (16-64 in the tests), passed as page_shift = log2 P.
// seq_lens (B) int32 = L_b (0 allowed: the output is 0 and the LSE -inf).
//
// Head packing: a block takes one (sequence, KV head) and all G query heads that read it, as the
// rows of an m16 tile (G <= 16 · MT), so each K/V element is loaded from memory once.
// Split-KV (flash decoding): the L_b tokens are cut into chunks of `chunk` tokens, one block each
// (grid.x = n_splits); a block writes its normalized partial output (fp32) and its LSE, and the
// chunks are merged with weights exp(lse_s - lse_max) (combine.cuh): by combine_d* after the split
// kernel, or -- when `counters` (B · Hkv ints, zero) is given -- by the last block of each
// (sequence, KV head) to finish, inside the split kernel. With n_splits == 1 the block writes the
// bf16 output directly.
// Inside a block, K/V tiles of BN tokens stream through shared memory (cp.async, STAGES deep); the
// warps split each tile's tokens (TG warps per m16 tile, TPW tokens each), keep their own online
// softmax state, and are merged through shared memory at the end.
//
// Wrong variants (harness.py proves each is caught):
//   WRONG_KV_OOB          (contiguous cache) the last tile is taken as full: tokens past L_b are
//                         read and not masked
//   WRONG_GQA_HEAD        query head g of the group is taken as g · Hkv + kvh (interleaved), not kvh · G + g
//   WRONG_PAGE_IGNORED    the block table is ignored: pages assumed contiguous per sequence
//   WRONG_COMBINE_NO_LSE  the combine averages the chunks' outputs, ignoring their LSE weights
#include "combine.cuh"

using namespace attn;

template <int D_, int BN_, int WARPS_, int STAGES_, int MT_, bool PAGED_, int MINB_>
struct DecConfig {
  static constexpr int D = D_, BN = BN_, WARPS = WARPS_, STAGES = STAGES_, MT = MT_, MINB = MINB_;
  static constexpr bool PAGED = PAGED_;
  static constexpr int THREADS = WARPS * 32;
  static constexpr int HEADS = 16 * MT;            // query heads one block holds (G <= HEADS)
  static constexpr int TG = WARPS / MT;            // warps per m16 tile: they split a tile's tokens
  static constexpr int TPW = BN / TG;              // tokens of one warp in one tile
  static constexpr int NT = TPW / 8, KC = TPW / 16, KD = D / 16, DT = D / 8, CH = D / 8;
  static constexpr int Q_BYTES = HEADS * D * 2;    // (HEADS, D) bf16
  static constexpr int KV_BYTES = BN * D * 2;      // (BN, D) bf16, one of K or V
  static constexpr int STAGE_BYTES = 2 * KV_BYTES;
  static constexpr int RED_PITCH = D + 8;          // fp32 per row of a warp's staged output
  static constexpr int RED_BYTES = WARPS * 16 * (RED_PITCH + 2) * 4;   // acc + m, l per row
  static constexpr int PT_INTS = PAGED ? 256 : 0;  // physical page ids of one chunk
  static constexpr int MAIN_BYTES = STAGES * STAGE_BYTES > RED_BYTES ? STAGES * STAGE_BYTES : RED_BYTES;
  static constexpr int SMEM_BYTES = Q_BYTES + MAIN_BYTES + PT_INTS * 4 + 16;   // + the fixup ticket
  static constexpr int ROWS_PER_PASS = THREADS / CH;
  static_assert(D == 64 || D == 128, "head dim 64 or 128");
  static_assert(WARPS % MT == 0 && TPW % 16 == 0, "each warp takes a multiple of 16 tokens");
  static_assert(ROWS_PER_PASS % 8 == 0 && BN % ROWS_PER_PASS == 0 && HEADS % ROWS_PER_PASS == 0,
                "a thread's swizzled chunk is the same on every pass");
};

template <int D>
__device__ __forceinline__ unsigned swz(int r, int c) {    // as fa2.cu: chunk c of row r at c ^ (r % 8)
  return r * (D * 2) + ((c ^ (r & 7)) << 4);
}

template <class C>
__device__ __forceinline__ void decode_split(const bf16_t* __restrict__ q, const bf16_t* __restrict__ kc,
                                             const bf16_t* __restrict__ vc, const int* __restrict__ block_table,
                                             const int* __restrict__ seq_lens, float* __restrict__ o_part,
                                             float* __restrict__ lse_part, bf16_t* __restrict__ o,
                                             float* __restrict__ lse, int* __restrict__ counters, int Hq, int Hkv,
                                             int cap, int page_shift, int chunk, int n_splits, float scale_log2) {
  constexpr int D = C::D, BN = C::BN, KD = C::KD, KC = C::KC, NT = C::NT, DT = C::DT, CH = C::CH;
  constexpr int STAGES = C::STAGES, MT = C::MT;
  extern __shared__ __align__(1024) unsigned char smem[];  // Q (HEADS, D) | stages {K, V} (BN, D) | pages
  const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int G = Hq / Hkv;
  const int L = seq_lens[b];
  const int t0 = split * chunk;                            // first token of this block's chunk
  if (t0 >= L && split > 0) return;                        // empty chunk: the combine skips it
  const int ntok = min(L, t0 + chunk) - t0;                // tokens of this chunk (>= 0)
  const int n_tiles = ntok > 0 ? (ntok + BN - 1) / BN : 0;
  int* ticket = reinterpret_cast<int*>(smem + C::SMEM_BYTES - 16);

  // Query head of packed row gi (gi < G).
  auto head_of = [&](int gi) {
#ifdef WRONG_GQA_HEAD
    return gi * Hkv + kvh;
#else
    return kvh * G + gi;
#endif
  };

  if (L == 0) {                                            // no key: O = 0, LSE = -inf (block 0 only)
    for (int item = threadIdx.x; item < G * D; item += C::THREADS) {
      const int h = head_of(item / D);
      o[((size_t)b * Hq + h) * D + item % D] = 0;
      if (lse != nullptr && item % D == 0) lse[(size_t)b * Hq + h] = -INFINITY;
    }
    return;
  }

  int* pt = reinterpret_cast<int*>(smem + C::Q_BYTES + C::MAIN_BYTES);   // page ids of this chunk
  if constexpr (C::PAGED) {
    const int p0 = t0 >> page_shift, np = ntok > 0 ? ((t0 + ntok - 1) >> page_shift) - p0 + 1 : 0;
    for (int i = tid; i < np; i += C::THREADS) pt[i] = block_table[(size_t)b * cap + p0 + i];
    __syncthreads();
  }

  // cp.async: thread tid copies chunk tid % CH of rows tid / CH + i · ROWS_PER_PASS.
  const int ld_r = tid / CH, ld_c = tid % CH;
  const unsigned ld_soff = swz<D>(ld_r, ld_c);
  // Element offset of token tok (chunk-relative) of this KV head: the same in the K and the V cache.
  auto row_off = [&](int tok) -> size_t {
    if constexpr (C::PAGED) {
#ifdef WRONG_PAGE_IGNORED
      const int page = b * cap + ((t0 + tok) >> page_shift);   // wrong: pages taken as contiguous
#else
      const int page = pt[((t0 + tok) >> page_shift) - (t0 >> page_shift)];
#endif
      const int off = (t0 + tok) & ((1 << page_shift) - 1);
      return ((((size_t)page << page_shift) + off) * Hkv + kvh) * D;
    } else {
      return (((size_t)b * Hkv + kvh) * cap + t0 + tok) * D;
    }
  };
  auto load_kv = [&](unsigned stage, int j) {
#ifdef WRONG_KV_OOB
    const bool full = !C::PAGED || (j + 1) * BN <= ntok;   // wrong (contiguous cache): reads past L_b
#else
    const bool full = (j + 1) * BN <= ntok;
#endif
#pragma unroll
    for (int i = 0; i < BN / C::ROWS_PER_PASS; ++i) {
      const int r = ld_r + i * C::ROWS_PER_PASS, tok = j * BN + r;
      const unsigned so = stage + ld_soff + i * C::ROWS_PER_PASS * D * 2;
      if (full) {                                          // whole tile: no row test
        const size_t e = row_off(tok) + ld_c * 8;
        cp_async_16(so, kc + e);
        cp_async_16(so + C::KV_BYTES, vc + e);
      } else {
        const bool ok = tok < ntok;
        const size_t e = ok ? row_off(tok) + ld_c * 8 : 0;   // rows past the end: zero fill, no read
        cp_async_16z(so, kc + e, ok ? 16u : 0u);
        cp_async_16z(so + C::KV_BYTES, vc + e, ok ? 16u : 0u);
      }
    }
  };

  // Q: rows gi < G are the group's query heads, the rest zero.
#pragma unroll
  for (int i = 0; i < C::HEADS / C::ROWS_PER_PASS; ++i) {
    const int r = ld_r + i * C::ROWS_PER_PASS;
    const bool ok = r < G;
    cp_async_16z(sbase + ld_soff + i * C::ROWS_PER_PASS * D * 2,
                 ok ? q + ((size_t)b * Hq + head_of(r)) * D + ld_c * 8 : q, ok ? 16u : 0u);
  }
  const unsigned stage0 = sbase + C::Q_BYTES;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n_tiles) load_kv(stage0 + s * C::STAGE_BYTES, s);
    course::cp_async_commit();
  }

  const int mi = warp % MT, tg = warp / MT;                // m16 tile of heads, token group
  const int wtok = tg * C::TPW;                            // this warp's first token in a tile
  const unsigned q_ld = swz<D>(mi * 16 + (lane & 15), lane >> 4);
  const unsigned k_ld = swz<D>(wtok + (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const unsigned v_ld = C::KV_BYTES + swz<D>(wtok + (lane & 15), lane >> 4);

  float acc[DT][4];
#pragma unroll
  for (int n = 0; n < DT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  unsigned qf[KD][4];

  unsigned rd = stage0, wr = stage0 + (STAGES - 1) * C::STAGE_BYTES;
  const unsigned send = stage0 + STAGES * C::STAGE_BYTES;
  for (int j = 0; j < n_tiles; ++j) {
    course::cp_async_wait<STAGES - 2>();
    __syncthreads();
    if (j + STAGES - 1 < n_tiles) load_kv(wr, j + STAGES - 1);
    course::cp_async_commit();
    wr = (wr + C::STAGE_BYTES == send) ? stage0 : wr + C::STAGE_BYTES;
    if (j == 0) {
#pragma unroll
      for (int ks = 0; ks < KD; ++ks) ldsm_x4(qf[ks], sbase + (q_ld ^ (ks * 32)));
    }

    // S = q Kᵀ for this warp's TPW tokens: (16, TPW) fp32
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
        ldsm_x4(kb, rd + ((k_ld + nn * 16 * D * 2) ^ (ks * 32)));
        mma_bf16(s[2 * nn], qf[ks], kb[0], kb[1]);
        mma_bf16(s[2 * nn + 1], qf[ks], kb[2], kb[3]);
      }
#ifdef WRONG_KV_OOB
    if (C::PAGED && (j + 1) * BN > ntok) {                 // wrong (contiguous): no mask past L_b
#else
    if ((j + 1) * BN > ntok) {                             // the ragged last tile
#endif
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (j * BN + wtok + n * 8 + 2 * t + (e & 1) >= ntok) s[n][e] = -INFINITY;
    }
    // online softmax (rows g and g + 8)
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
    // O += P V
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
        ldsm_x4_trans(vb[0], vb[1], vb[2], vb[3], rd + ((v_ld + kk * 16 * D * 2) ^ (dd * 32)));
        mma_bf16(acc[2 * dd], pa, vb[0], vb[1]);
        mma_bf16(acc[2 * dd + 1], pa, vb[2], vb[3]);
      }
    }
    rd = (rd + C::STAGE_BYTES == send) ? stage0 : rd + C::STAGE_BYTES;
  }
  course::cp_async_wait<0>();
  __syncthreads();                                         // every warp is done with the stages

  // ---- merge the TG warps of each m16 tile through shared memory --------------------------------
  float* red = reinterpret_cast<float*>(smem + C::Q_BYTES);   // WARPS × (16, RED_PITCH) fp32
  float* ml = red + C::WARPS * 16 * C::RED_PITCH;             // WARPS × 16 × {m, l}
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
  // Thread → (row of HEADS, 4 consecutive columns): HEADS · D / 4 items.
  for (int item = tid; item < C::HEADS * D / 4; item += C::THREADS) {
    const int row = item / (D / 4), c4 = (item % (D / 4)) * 4;
    const int m16 = row / 16, r = row % 16;
    if (row >= G) continue;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < C::TG; ++w) M = fmaxf(M, ml[((w * MT + m16) * 16 + r) * 2]);
    const float ref = ref_point(M);
    float Ls = 0.f;
    float4 acc4 = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < C::TG; ++w) {
      const int wi = w * MT + m16;
      const float sc = ex2(ml[(wi * 16 + r) * 2] - ref);
      Ls += sc * ml[(wi * 16 + r) * 2 + 1];
      const float4 v = *reinterpret_cast<const float4*>(red + (wi * 16 + r) * C::RED_PITCH + c4);
      acc4.x += sc * v.x, acc4.y += sc * v.y, acc4.z += sc * v.z, acc4.w += sc * v.w;
    }
    const float inv = Ls > 0.f ? 1.f / Ls : 0.f;
    const float lse_v = Ls > 0.f ? (ref + __log2f(Ls)) * LN2 : -INFINITY;
    const int h = head_of(row);
    if (n_splits == 1) {
      uint2 pk = make_uint2(pack_bf16(acc4.x * inv, acc4.y * inv), pack_bf16(acc4.z * inv, acc4.w * inv));
      *reinterpret_cast<uint2*>(o + ((size_t)b * Hq + h) * D + c4) = pk;
      if (lse != nullptr && c4 == 0) lse[(size_t)b * Hq + h] = lse_v;
    } else {
      const size_t ps = ((size_t)b * Hq + h) * n_splits + split;
      *reinterpret_cast<float4*>(o_part + ps * D + c4) =
          make_float4(acc4.x * inv, acc4.y * inv, acc4.z * inv, acc4.w * inv);
      if (c4 == 0) lse_part[ps] = lse_v;
    }
  }
  // Fused combine: the last block of this (sequence, KV head) merges the group's G heads.
  if (n_splits > 1 && counters != nullptr) {
    const int ns = min(n_splits, (L + chunk - 1) / chunk);
    if (last_arrival(counters + (size_t)b * Hkv + kvh, ns, ticket)) {
      for (int item = tid; item < G * D / 4; item += C::THREADS) {
        const int h = head_of(item / (D / 4)), c4 = (item % (D / 4)) * 4;
        const size_t hb = (size_t)b * Hq + h;
        merge_partials(o_part + hb * n_splits * D, lse_part + hb * n_splits, ns, D, c4, o + hb * D,
                       lse != nullptr ? lse + hb : nullptr);
      }
    }
  }
}

// ---- combine: O = Σ_s w_s O_s / Σ_s w_s, w_s = exp(lse_s - max lse) --------------------------------
template <int DV_>
struct CombineConfig {
  static constexpr int DV = DV_, THREADS = DV / 4, SMEM_BYTES = 0;   // one float4 of O per thread
};

template <class C>
__device__ __forceinline__ void combine(const float* __restrict__ o_part, const float* __restrict__ lse_part,
                                        const int* __restrict__ seq_lens, bf16_t* __restrict__ o,
                                        float* __restrict__ lse, int Hq, int chunk, int n_splits) {
  const int h = blockIdx.x, b = blockIdx.y;
  const int L = seq_lens[b];
  const int ns = min(n_splits, (L + chunk - 1) / chunk);  // chunks that hold tokens
  const size_t hb = (size_t)b * Hq + h;
  for (int c4 = threadIdx.x * 4; c4 < C::DV; c4 += C::THREADS * 4)
    merge_partials(o_part + hb * n_splits * C::DV, lse_part + hb * n_splits, ns, C::DV, c4, o + hb * C::DV,
                   lse != nullptr ? lse + hb : nullptr);
}

#define DEC_KERNEL(NAME, ...)                                                                      \
  using NAME##_cfg = DecConfig<__VA_ARGS__>;                                                      \
  extern "C" __global__ void __launch_bounds__(NAME##_cfg::THREADS, NAME##_cfg::MINB)             \
      NAME(const bf16_t* q, const bf16_t* kc, const bf16_t* vc, const int* block_table,            \
           const int* seq_lens, float* o_part, float* lse_part, bf16_t* o, float* lse,             \
           int* counters, int Hq, int Hkv, int cap, int page_shift, int chunk, int n_splits,      \
           float scale_log2) {                                                                    \
    decode_split<NAME##_cfg>(q, kc, vc, block_table, seq_lens, o_part, lse_part, o, lse, counters, \
                             Hq, Hkv, cap, page_shift, chunk, n_splits, scale_log2);              \
  }                                                                                               \
  extern "C" __global__ void NAME##_meta(int* out) {                                              \
    out[0] = NAME##_cfg::THREADS; out[1] = NAME##_cfg::SMEM_BYTES; out[2] = NAME##_cfg::BN;       \
    out[3] = NAME##_cfg::HEADS; out[4] = NAME##_cfg::D; out[5] = NAME##_cfg::STAGES;              \
    out[6] = NAME##_cfg::WARPS; out[7] = NAME##_cfg::PAGED; out[8] = NAME##_cfg::PT_INTS;         \
  }

#define COMBINE_KERNEL(NAME, WIDTH)                                                                 \
  using NAME##_cfg = CombineConfig<WIDTH>;                                                        \
  extern "C" __global__ void __launch_bounds__(NAME##_cfg::THREADS)                               \
      NAME(const float* o_part, const float* lse_part, const int* seq_lens, bf16_t* o, float* lse, \
           int Hq, int chunk, int n_splits) {                                                     \
    combine<NAME##_cfg>(o_part, lse_part, seq_lens, o, lse, Hq, chunk, n_splits);                 \
  }                                                                                               \
  extern "C" __global__ void NAME##_meta(int* out) {                                              \
    out[0] = NAME##_cfg::THREADS; out[1] = NAME##_cfg::SMEM_BYTES; out[2] = NAME##_cfg::DV;       \
  }

//                      D   BN warps stages MT paged minblocks
DEC_KERNEL(dec_d128_a,  128, 64, 4, 4, 1, false, 1)   // G <= 16, 4 tiles of 32 KB in flight
DEC_KERNEL(dec_d128_b,  128, 64, 4, 3, 1, false, 2)   // G <= 16, 2 blocks per SM
DEC_KERNEL(dec_d128_c,  128, 128, 8, 3, 1, false, 1)  // G <= 16, 8 warps, 64 KB tiles
DEC_KERNEL(dec_d128_m2, 128, 64, 4, 4, 2, false, 1)   // G <= 32 (MQA 32 heads)
DEC_KERNEL(dec_d64_a,   64, 64, 4, 4, 1, false, 2)
DEC_KERNEL(pdec_d128_a, 128, 64, 4, 4, 1, true, 1)    // paged
DEC_KERNEL(pdec_d128_b, 128, 64, 4, 3, 1, true, 2)
DEC_KERNEL(pdec_d128_c, 128, 128, 8, 3, 1, true, 1)
DEC_KERNEL(pdec_d64_a,  64, 64, 4, 4, 1, true, 2)
COMBINE_KERNEL(combine_d64, 64)
COMBINE_KERNEL(combine_d128, 128)
COMBINE_KERNEL(combine_d512, 512)
