%%cuda dec -k "decode<Dec<128>>" -k "decode<Dec<64>>" -k "decode<Paged<128>>" -k "decode<Paged<64>>" -k "combine<Comb<128>>" -k "combine<Comb<64>>"
#include "course.cuh"      // the launch contract, ldmatrix / mma / cp.async helpers
#include "attention.cuh"   // zero-fill cp.async, ex2, bf16 packing, quad reductions, swizzle, last_arrival
using namespace attn;

// One new token per sequence (decode): O (B, Hq, D) bf16 = softmax(q Kᵀ / √D) V over the first
// L_b tokens of sequence b's cache. q (B, Hq, D) bf16; query head h reads KV head h / G, G = Hq / Hkv
// (GQA; Hkv = 1 is MQA). seq_lens (B) int32 = L_b (0 allowed: O = 0).
// Cache, contiguous: K, V (B, Hkv, CAP, D) bf16, CAP >= every L_b.
// Cache, paged:      K, V (num_pages, P, Hkv, D) bf16, pages of P = 2^page_shift tokens;
//                    block_table (B, CAP / P) int32 maps sequence b's page i to a physical page
//                    (any order); a cp.async row looks its page up in the table (L1-cached).
//
// Head packing: a block takes one (sequence, KV head) and the G <= 16 query heads that read it, as
// the rows of one m16 tile, so every K/V byte is loaded once for all G heads.
// Split-KV (flash decoding): the tokens are cut into chunks of `chunk`, one block each (grid.x =
// n_splits). A block leaves its normalized partial output and its log-sum-exp (fp32); the chunks
// are merged with weights exp(lse_s − max lse) by `combine` (a second launch) or, when `counters`
// (B · Hkv ints, zero) is given, by the last block of each (sequence, KV head) to finish.
// With n_splits == 1 the block writes O directly.
// Inside a block K/V tiles of BN tokens stream through shared memory (cp.async, STAGES deep); the
// WARPS warps split each tile's tokens (BN / WARPS each), keep their own online-softmax state, and
// are merged through shared memory at the end.
template <int D_, int BN_, int WARPS_, int STAGES_, bool PAGED_, int MINB_>
struct DecConfig {
  static constexpr int D = D_, BN = BN_, WARPS = WARPS_, STAGES = STAGES_, MINB = MINB_;
  static constexpr bool PAGED = PAGED_;
  static constexpr int HEADS = 16;                 // query heads one block holds: G <= 16
  static constexpr int THREADS = WARPS * 32;
  static constexpr int TPW = BN / WARPS;           // tokens of one warp in a tile
  static constexpr int NT = TPW / 8, KC = TPW / 16, KD = D / 16, DT = D / 8, CH = D / 8;
  static constexpr int Q_BYTES = HEADS * D * 2;    // (HEADS, D) bf16
  static constexpr int KV_BYTES = BN * D * 2;      // (BN, D) bf16: one of K, V
  static constexpr int STAGE_BYTES = 2 * KV_BYTES;
  static constexpr int RED_PITCH = D + 8;          // fp32 per row of a warp's staged output
  static constexpr int RED_BYTES = WARPS * 16 * (RED_PITCH + 2) * 4;   // each warp's O, m, l
  static constexpr int MAIN_BYTES = STAGES * STAGE_BYTES > RED_BYTES ? STAGES * STAGE_BYTES : RED_BYTES;
  static constexpr int ROWS_PER_PASS = THREADS / CH;
  // the launch contract: block size, dynamic shared memory (+16 B: the last-arrival ticket),
  // heads per block, tokens per tile, head dimension, pipeline depth
  static constexpr int SMEM_BYTES = Q_BYTES + MAIN_BYTES + 16;
  static constexpr int TILE_M = HEADS, TILE_N = BN, TILE_K = D;
  static_assert(D == 64 || D == 128, "head dim 64 or 128");
  static_assert(TPW % 16 == 0, "each warp takes a multiple of 16 tokens");
  static_assert(ROWS_PER_PASS % 8 == 0 && BN % ROWS_PER_PASS == 0 && HEADS % ROWS_PER_PASS == 0,
                "a thread's swizzled chunk is the same on every pass");
};
//                                         D  BN warps stages paged blocks/SM
template <int D> using Dec = DecConfig<D, 64, 4, 3, false, 2>;
template <int D> using Paged = DecConfig<D, 64, 4, 3, true, 2>;

template <int DV_>
struct CombineConfig {                 // one block per (query head, sequence), one float4 per thread
  static constexpr int DV = DV_, THREADS = DV / 4, SMEM_BYTES = 0;
  static constexpr int TILE_K = DV;    // the output width it merges
};
template <int D> using Comb = CombineConfig<D>;

// Columns c4 .. c4 + 3 of one head's output from its ns partials: O = Σ_s w_s O_s / Σ_s w_s with
// w_s = exp(lse_s − max_s lse_s). o_part_row (n_splits, DV) fp32 and lse_row (n_splits) fp32 are
// this head's; other blocks wrote them, so they are read through L2 (__ldcg).
__device__ __forceinline__ void merge_partials(const float* o_part_row, const float* lse_row, int ns, int DV,
                                               int c4, bf16_t* o_row) {
  // BEGIN SOLUTION
  float M = -INFINITY;
  for (int s = 0; s < ns; ++s) M = fmaxf(M, __ldcg(lse_row + s));
  const float ref = M == -INFINITY ? 0.f : M;              // every split empty: weights 0
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
  // END SOLUTION
}

template <class C>
__global__ void __launch_bounds__(C::THREADS, C::MINB)
decode(const bf16_t* __restrict__ q, const bf16_t* __restrict__ kc, const bf16_t* __restrict__ vc,
       const int* __restrict__ block_table, const int* __restrict__ seq_lens, float* __restrict__ o_part,
       float* __restrict__ lse_part, bf16_t* __restrict__ o, int* __restrict__ counters, int Hq, int Hkv,
       int cap, int page_shift, int chunk, int n_splits, float scale_log2) {
  constexpr int D = C::D, BN = C::BN, KD = C::KD, KC = C::KC, NT = C::NT, DT = C::DT, CH = C::CH;
  constexpr int STAGES = C::STAGES;
  extern __shared__ __align__(1024) unsigned char smem[];  // Q (16, D) | stages {K, V} (BN, D) | ticket
  const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int G = Hq / Hkv;
  const int L = seq_lens[b];
  const int t0 = split * chunk;                            // first token of this block's chunk
  if (t0 >= L && split > 0) return;                        // an empty chunk: the merge skips it
  const int ntok = min(L, t0 + chunk) - t0;                // tokens of this chunk (>= 0)
  const int n_tiles = ntok > 0 ? (ntok + BN - 1) / BN : 0;
  int* ticket = reinterpret_cast<int*>(smem + C::SMEM_BYTES - 16);

  // The query head of packed row gi (gi < G) of this block, and (paged) the element offset of
  // token tok of the chunk in the K or V cache (the same for both): about 5 lines.
  auto head_of = [&](int gi) -> int {
    // BEGIN SOLUTION
    return kvh * G + gi;
    // END SOLUTION
  };
  auto row_off = [&](int tok) -> size_t {
    if constexpr (C::PAGED) {
      // BEGIN SOLUTION
      const int tk = t0 + tok;                               // token of the sequence
      const int page = __ldg(block_table + (size_t)b * (cap >> page_shift) + (tk >> page_shift));
      return ((((size_t)page << page_shift) + (tk & ((1 << page_shift) - 1))) * Hkv + kvh) * D;
      // END SOLUTION
    } else {
      return (((size_t)b * Hkv + kvh) * cap + t0 + tok) * D;
    }
  };

  if (L == 0) {                                            // no key: O = 0 (block 0 only)
    for (int item = threadIdx.x; item < G * D; item += C::THREADS)
      o[((size_t)b * Hq + head_of(item / D)) * D + item % D] = 0;
    return;
  }

  // cp.async: thread tid copies chunk tid % CH of rows tid / CH + i · ROWS_PER_PASS.
  const int ld_r = tid / CH, ld_c = tid % CH;
  const unsigned ld_soff = swz<D>(ld_r, ld_c);
  auto load_kv = [&](unsigned stage, int j) {
    const bool full = (j + 1) * BN <= ntok;
#pragma unroll
    for (int i = 0; i < BN / C::ROWS_PER_PASS; ++i) {
      const int r = ld_r + i * C::ROWS_PER_PASS, tok = j * BN + r;
      const unsigned so = stage + ld_soff + i * C::ROWS_PER_PASS * D * 2;
      if (full) {                                          // a whole tile: no row test
        const size_t e = row_off(tok) + ld_c * 8;
        course::cp_async_16(so, kc + e);
        course::cp_async_16(so + C::KV_BYTES, vc + e);
      } else {                                             // rows past the end: zeros, nothing read
        const bool ok = tok < ntok;
        const size_t e = ok ? row_off(tok) + ld_c * 8 : 0;
        cp_async_16z(so, kc + e, ok ? 16u : 0u);
        cp_async_16z(so + C::KV_BYTES, vc + e, ok ? 16u : 0u);
      }
    }
  };

  // Q: rows gi < G are the group's query heads, the rest zeros.
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

  const int wtok = warp * C::TPW;                          // this warp's first token in a tile
  const unsigned q_ld = swz<D>(lane & 15, lane >> 4);
  const unsigned k_ld = swz<D>(wtok + (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const unsigned v_ld = C::KV_BYTES + swz<D>(wtok + (lane & 15), lane >> 4);

  float acc[DT][4];                                        // (16 heads, D) fp32, this warp's tokens
#pragma unroll
  for (int n = 0; n < DT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};   // rows g and g + 8
  unsigned qf[KD][4];                                      // q fragments, loaded once

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
      for (int ks = 0; ks < KD; ++ks) course::ldmatrix_x4(qf[ks], sbase + (q_ld ^ (ks * 32)));
    }

    // S = q Kᵀ for this warp's TPW tokens: (16 heads, TPW) fp32
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
        course::ldmatrix_x4(kb, rd + ((k_ld + nn * 16 * D * 2) ^ (ks * 32)));
        mma_bf16(s[2 * nn], qf[ks], kb[0], kb[1]);
        mma_bf16(s[2 * nn + 1], qf[ks], kb[2], kb[3]);
      }
    if ((j + 1) * BN > ntok) {                             // the ragged last tile: tokens past the end
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (j * BN + wtok + n * 8 + 2 * t + (e & 1) >= ntok) s[n][e] = -INFINITY;
    }
    // online softmax of rows g and g + 8 (exact rescale: a decode tile is small)
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
        course::ldmatrix_x4_trans(vb[0], vb[1], vb[2], vb[3], rd + ((v_ld + kk * 16 * D * 2) ^ (dd * 32)));
        mma_bf16(acc[2 * dd], pa, vb[0], vb[1]);
        mma_bf16(acc[2 * dd + 1], pa, vb[2], vb[3]);
      }
    }
    rd = (rd + C::STAGE_BYTES == send) ? stage0 : rd + C::STAGE_BYTES;
  }
  course::cp_async_wait<0>();
  __syncthreads();                                         // every warp is done with the stages

  // ---- merge the warps' (m, l, O) through shared memory (the stages are free now) ---------------
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
  for (int item = tid; item < G * D / 4; item += C::THREADS) {      // (head row, 4 columns)
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
    } else {                                               // this chunk's normalized O and its LSE
      const size_t ps = ((size_t)b * Hq + h) * n_splits + split;
      *reinterpret_cast<float4*>(o_part + ps * D + c4) = make_float4(a4.x * inv, a4.y * inv, a4.z * inv, a4.w * inv);
      if (c4 == 0) lse_part[ps] = Ls > 0.f ? (ref + __log2f(Ls)) * LN2 : -INFINITY;
    }
  }
  // Fused merge: the last block of this (sequence, KV head) to finish merges the G heads.
  if (n_splits > 1 && counters != nullptr) {
    const int ns = min(n_splits, (L + chunk - 1) / chunk);
    if (last_arrival(counters + (size_t)b * Hkv + kvh, ns, ticket)) {
      for (int item = tid; item < G * D / 4; item += C::THREADS) {
        const size_t hb = (size_t)b * Hq + head_of(item / (D / 4));
        merge_partials(o_part + hb * n_splits * D, lse_part + hb * n_splits, ns, D, (item % (D / 4)) * 4, o + hb * D);
      }
    }
  }
}

// The merge as a second launch: one block per (query head, sequence).
template <class C>
__global__ void __launch_bounds__(C::THREADS)
combine(const float* __restrict__ o_part, const float* __restrict__ lse_part, const int* __restrict__ seq_lens,
        bf16_t* __restrict__ o, int Hq, int chunk, int n_splits) {
  const int h = blockIdx.x, b = blockIdx.y;
  const int L = seq_lens[b];
  if (L == 0) return;                                      // the split kernel wrote O = 0
  const int ns = min(n_splits, (L + chunk - 1) / chunk);   // chunks that hold tokens
  const size_t hb = (size_t)b * Hq + h;
  merge_partials(o_part + hb * n_splits * C::DV, lse_part + hb * n_splits, ns, C::DV, threadIdx.x * 4, o + hb * C::DV);
}
