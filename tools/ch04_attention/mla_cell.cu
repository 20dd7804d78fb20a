%%cuda mla -k "mla<H16>" -k "mla<H32>" -k "combine<Comb512>"
#include "course.cuh"      // the launch contract, ldmatrix / mma / cp.async helpers
#include "attention.cuh"   // zero-fill cp.async, ex2, bf16 packing, quad reductions
using namespace attn;

// DeepSeek's multi-head latent attention (MLA), decode, with the up-projections absorbed.
// Every token of sequence b's cache is one row of DK = 576 bf16: c_kv (512: the latent that
// serves as both key and value), then k_pe (64: the rotary part of the key). One latent "head"
// is shared by all Hq query heads (MQA-like).
//   cache (B, CAP, 576) bf16, seq_lens (B) int32 = L_b (0 allowed: O = 0)
//   q     (B, Hq, 576) bf16 = [q_nope · W_UK (512) | q_pe (64)]: already absorbed
//   O     (B, Hq, 512) bf16 = softmax(scale · q · cache_rowᵀ) · c_kv   (W_UV is applied afterwards)
// A block takes HEADS = 16 · MT query heads of one sequence and one chunk of its tokens (split-KV:
// grid (head groups, splits, B)); chunks are merged by `combine`, as in lesson 04. Tiles of BN tokens
// × 1152 bytes stream through shared memory, STAGES deep. Per tile, the block's 4 · MT warps:
//   1. Q·Kᵀ split over the 576 columns: warp w takes m16 tile w % MT and column quarter w / MT
//      (144 columns, 9 k16 steps), its Q fragments held in registers for the whole chunk; the four
//      quarter-sums go to shared memory, (4, HEADS, BN) fp32;
//   2. every warp of an m16 tile adds the four quarters and runs the same online softmax
//      (identical m, l, P: no warp needs another's state);
//   3. O += P · c_kv for its 128-column quarter of the 512 outputs, (16, 128) fp32 in registers.
template <int MT_, int BN_, int STAGES_, int MINB_>
struct MlaConfig {
  static constexpr int DK = 576, DV = 512;         // latent + rope; latent
  static constexpr int MT = MT_, BN = BN_, STAGES = STAGES_, MINB = MINB_;
  static constexpr int HEADS = 16 * MT;            // query heads of one block
  static constexpr int WARPS = 4 * MT, THREADS = WARPS * 32;
  static constexpr int KQ = DK / 16 / 4;           // k16 steps of one column quarter (9)
  static constexpr int NT = BN / 8;                // n8 tiles of a tile's scores
  static constexpr int KC = BN / 16;               // k16 steps of P · c_kv
  static constexpr int DS = DV / 4;                // output columns of one warp (128)
  static constexpr int DTS = DS / 8;               // its n8 tiles (16)
  static constexpr int CH = DK / 8;                // 16-byte chunks per row (72)
  static constexpr int ROW_BYTES = DK * 2;         // 1152 = 9 × 128
  static constexpr int Q_BYTES = HEADS * ROW_BYTES;          // (HEADS, 576) bf16, read once into registers
  static constexpr int S_PITCH = BN + 8;                     // fp32 per score row (no bank conflicts)
  static constexpr int S_BYTES = 4 * HEADS * S_PITCH * 4;    // (4 quarters, HEADS, BN) fp32
  static constexpr int QS_BYTES = Q_BYTES > S_BYTES ? Q_BYTES : S_BYTES;   // Q, then the scores
  static constexpr int KV_BYTES = BN * ROW_BYTES;            // (BN, 576) bf16
  // the launch contract: block size, dynamic shared memory, heads per block, tokens per tile, row width
  static constexpr int SMEM_BYTES = QS_BYTES + STAGES * KV_BYTES;
  static constexpr int TILE_M = HEADS, TILE_N = BN, TILE_K = DK;
  static_assert(BN % 16 == 0 && STAGES >= 2, "tile shapes");
};
//                         MT  BN stages blocks/SM
using H16 = MlaConfig<1, 32, 4, 1>;      // 16 heads a block, 3 tiles of 36 KB in flight
using H32 = MlaConfig<2, 64, 2, 1>;      // 32 heads a block, 72 KB tiles (more heads per byte read)

template <int DV_>
struct CombineConfig {                   // one block per (query head, sequence), one float4 per thread
  static constexpr int DV = DV_, THREADS = DV / 4, SMEM_BYTES = 0;
  static constexpr int TILE_K = DV;    // the output width it merges
};
using Comb512 = CombineConfig<512>;

// Chunk c of row r: chunks come in groups of 8 (128 B); inside a group, c ^ (r % 8).
template <class C>
__device__ __forceinline__ unsigned mswz(int r, int c) {
  return r * C::ROW_BYTES + (((c & ~7) | ((c & 7) ^ (r & 7))) << 4);
}

template <class C>
__global__ void __launch_bounds__(C::THREADS, C::MINB)
mla(const bf16_t* __restrict__ q, const bf16_t* __restrict__ cache, const int* __restrict__ seq_lens,
    float* __restrict__ o_part, float* __restrict__ lse_part, bf16_t* __restrict__ o, int Hq, int cap,
    int chunk, int n_splits, float scale_log2) {
  constexpr int DK = C::DK, DV = C::DV, BN = C::BN, CH = C::CH, KC = C::KC, NT = C::NT, KQ = C::KQ;
  constexpr int STAGES = C::STAGES, MT = C::MT;
  extern __shared__ __align__(1024) unsigned char smem[];   // Q, then scores | STAGES × tile
  const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int hg = blockIdx.x, split = blockIdx.y, b = blockIdx.z;
  const int h0 = hg * C::HEADS;                            // first query head of the block
  const int L = seq_lens[b];
  const int t0 = split * chunk;
  if (t0 >= L && split > 0) return;                        // an empty chunk: the merge skips it
  const int ntok = min(L, t0 + chunk) - t0;
  const int n_tiles = ntok > 0 ? (ntok + BN - 1) / BN : 0;
  const int nh = min(C::HEADS, Hq - h0);                   // heads of this block
  if (L == 0) {                                            // no key: O = 0 (block 0 only)
    for (int item = tid; item < nh * DV; item += C::THREADS)
      o[((size_t)b * Hq + h0 + item / DV) * DV + item % DV] = 0;
    return;
  }
  const bf16_t* crow = cache + ((size_t)b * cap + t0) * DK;   // token 0 of the chunk: a tile is
                                                             // BN · 1152 contiguous bytes
  // Q (rows h0 + r < Hq, the rest zeros) is its own commit group, then STAGES - 1 tiles.
  for (int idx = tid; idx < C::HEADS * CH; idx += C::THREADS) {
    const int r = idx / CH, c = idx - r * CH;
    const bool ok = r < nh;
    cp_async_16z(sbase + mswz<C>(r, c), ok ? q + ((size_t)b * Hq + h0 + r) * DK + c * 8 : q, ok ? 16u : 0u);
  }
  course::cp_async_commit();
  auto load_tile = [&](unsigned stage, int j) {
    const bool full = (j + 1) * BN <= ntok;
#pragma unroll
    for (int i = 0; i < (BN * CH + C::THREADS - 1) / C::THREADS; ++i) {
      const int idx = tid + i * C::THREADS;
      if (BN * CH % C::THREADS == 0 || idx < BN * CH) {
        const int r = idx / CH, c = idx - r * CH;
        const bf16_t* src = crow + (size_t)j * BN * DK + idx * 8;
        if (full) {
          course::cp_async_16(stage + mswz<C>(r, c), src);
        } else {                                           // rows past the end: zeros, nothing read
          const bool ok = j * BN + r < ntok;
          cp_async_16z(stage + mswz<C>(r, c), ok ? src : cache, ok ? 16u : 0u);
        }
      }
    }
  };
  const unsigned stage0 = sbase + C::QS_BYTES;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n_tiles) load_tile(stage0 + s * C::KV_BYTES, s);
    course::cp_async_commit();
  }

  const int mi = warp % MT, part = warp / MT;              // m16 tile; column quarter
  // Q fragments of this warp's (16 heads, 144 columns): 9 k16 steps at chunk 18·part + 2k + lane/16.
  unsigned qf[KQ][4];
  course::cp_async_wait<STAGES - 1>();                     // the Q group has landed (this thread's part)
  __syncthreads();                                         // ... everyone's
#pragma unroll
  for (int k = 0; k < KQ; ++k)
    course::ldmatrix_x4(qf[k], sbase + mswz<C>(mi * 16 + (lane & 15), 18 * part + 2 * k + (lane >> 4)));
  __syncthreads();                                         // the Q region becomes the score buffer
  float* sS = reinterpret_cast<float*>(smem);              // (4, HEADS, S_PITCH) fp32

  // B of Q·Kᵀ (K rows = tokens, not transposed): one x4 = two n8 tiles of one k16 step; k_off[k] is
  // this lane's byte offset for step k of this warp's quarter; 16 more tokens add 16 rows.
  unsigned k_off[KQ];
#pragma unroll
  for (int k = 0; k < KQ; ++k)
    k_off[k] = mswz<C>((lane & 7) + ((lane >> 4) << 3), 18 * part + 2 * k + ((lane >> 3) & 1));
  // B of P·V (x4.trans): c_kv rows (tokens) lane % 16 at chunks 16·part + 2dd + lane / 16. Rows are
  // multiples of 128 B, so dd moves by XOR 32 (dd % 4) and + 128 (dd / 4).
  const unsigned v_off = (lane & 15) * C::ROW_BYTES + part * (C::DS * 2) + (((lane >> 4) ^ (lane & 7)) << 4);

  float acc[C::DTS][4];                                    // (16 heads, 128 columns) fp32
#pragma unroll
  for (int n = 0; n < C::DTS; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

  unsigned rd = stage0, wr = stage0 + (STAGES - 1) * C::KV_BYTES;
  const unsigned send = stage0 + STAGES * C::KV_BYTES;
  for (int j = 0; j < n_tiles; ++j) {
    course::cp_async_wait<STAGES - 2>();
    __syncthreads();                                       // tile j landed; scores of j - 1 consumed
    if (j + STAGES - 1 < n_tiles) load_tile(wr, j + STAGES - 1);
    course::cp_async_commit();
    wr = (wr + C::KV_BYTES == send) ? stage0 : wr + C::KV_BYTES;

    // ---- 1. this warp's quarter of the scores: (16, BN) over 144 columns --------------------------
    float s[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = 0.f;
#pragma unroll
    for (int k = 0; k < KQ; ++k)
#pragma unroll
      for (int nn = 0; nn < NT / 2; ++nn) {
        unsigned kb[4];
        course::ldmatrix_x4(kb, rd + k_off[k] + nn * 16 * C::ROW_BYTES);
        mma_bf16(s[2 * nn], qf[k], kb[0], kb[1]);
        mma_bf16(s[2 * nn + 1], qf[k], kb[2], kb[3]);
      }
    float* sq = sS + ((size_t)part * C::HEADS + mi * 16) * C::S_PITCH;
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
        *reinterpret_cast<float2*>(sq + (g + 8 * hh) * C::S_PITCH + n * 8 + 2 * t) =
            make_float2(s[n][2 * hh], s[n][2 * hh + 1]);
    __syncthreads();                                       // all quarter-scores of tile j are in sS

    // ---- 2. scores = the sum of the 4 quarters; online softmax (the same in every warp of the tile) -
    float p[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        float2 v = make_float2(0.f, 0.f);
#pragma unroll
        for (int kq = 0; kq < 4; ++kq) {
          const float2 w = *reinterpret_cast<const float2*>(
              sS + ((size_t)kq * C::HEADS + mi * 16 + g + 8 * hh) * C::S_PITCH + n * 8 + 2 * t);
          v.x += w.x, v.y += w.y;
        }
        p[n][2 * hh] = v.x, p[n][2 * hh + 1] = v.y;
      }
    if ((j + 1) * BN > ntok) {                             // the ragged last tile
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (j * BN + n * 8 + 2 * t + (e & 1) >= ntok) p[n][e] = -INFINITY;
    }
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < NT; ++n) mx = fmaxf(mx, fmaxf(p[n][2 * hh], p[n][2 * hh + 1]));
      mx = quad_max(mx);
      const float m_new = fmaxf(m_run[hh], mx * scale_log2);
      const float ref = ref_point(m_new), alpha = ex2(m_run[hh] - ref);
      m_run[hh] = m_new;
      float rs = 0.f;
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 2 * hh; e < 2 * hh + 2; ++e) {
          const float pv = ex2(fmaf(p[n][e], scale_log2, -ref));
          p[n][e] = pv;
          rs += pv;
        }
      l_run[hh] = l_run[hh] * alpha + rs;
#pragma unroll
      for (int n = 0; n < C::DTS; ++n) acc[n][2 * hh] *= alpha, acc[n][2 * hh + 1] *= alpha;
    }
    // ---- 3. O[:, part·128 + (0..127)] += P · c_kv[:, same columns]: about 15 lines ---------------
    // BEGIN SOLUTION
#pragma unroll
    for (int kk = 0; kk < KC; ++kk) {
      unsigned pa[4];                                      // P of tokens 16kk .. 16kk + 15 as an A fragment
      pa[0] = pack_bf16(p[2 * kk][0], p[2 * kk][1]);
      pa[1] = pack_bf16(p[2 * kk][2], p[2 * kk][3]);
      pa[2] = pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]);
      pa[3] = pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3]);
#pragma unroll
      for (int dd = 0; dd < C::DTS / 2; ++dd) {
        unsigned vb[4];                                    // b0, b1 of column tiles 2dd and 2dd + 1
        course::ldmatrix_x4_trans(vb[0], vb[1], vb[2], vb[3],
                                  rd + kk * 16 * C::ROW_BYTES + (v_off ^ (32 * (dd & 3))) + 128 * (dd >> 2));
        mma_bf16(acc[2 * dd], pa, vb[0], vb[1]);
        mma_bf16(acc[2 * dd + 1], pa, vb[2], vb[3]);
      }
    }
    // END SOLUTION
    rd = (rd + C::KV_BYTES == send) ? stage0 : rd + C::KV_BYTES;
  }
  course::cp_async_wait<0>();

  // ---- epilogue: rows g, g + 8 of m16 tile mi, columns part·128 + n·8 + 2t ----------------------------
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int head = h0 + mi * 16 + g + 8 * hh;
    const float l = quad_sum(l_run[hh]);
    if (head >= Hq) continue;
    const float inv = l > 0.f ? 1.f / l : 0.f;
    if (n_splits == 1) {
      bf16_t* dst = o + ((size_t)b * Hq + head) * DV + part * C::DS + 2 * t;
#pragma unroll
      for (int n = 0; n < C::DTS; ++n)
        *reinterpret_cast<unsigned*>(dst + n * 8) = pack_bf16(acc[n][2 * hh] * inv, acc[n][2 * hh + 1] * inv);
    } else {                                               // this chunk's normalized O and its LSE
      const size_t ps = ((size_t)b * Hq + head) * n_splits + split;
      float* dst = o_part + ps * DV + part * C::DS + 2 * t;
#pragma unroll
      for (int n = 0; n < C::DTS; ++n)
        *reinterpret_cast<float2*>(dst + n * 8) = make_float2(acc[n][2 * hh] * inv, acc[n][2 * hh + 1] * inv);
      if (part == 0 && t == 0) lse_part[ps] = l > 0.f ? (ref_point(m_run[hh]) + __log2f(l)) * LN2 : -INFINITY;
    }
  }
}

// The split-KV merge of lesson 04 (merge_partials there), for 512 columns: O = Σ_s w_s O_s / Σ_s w_s,
// w_s = exp(lse_s − max lse). One block per (query head, sequence), one float4 of O per thread.
template <class C>
__global__ void __launch_bounds__(C::THREADS)
combine(const float* __restrict__ o_part, const float* __restrict__ lse_part, const int* __restrict__ seq_lens,
        bf16_t* __restrict__ o, int Hq, int chunk, int n_splits) {
  const int h = blockIdx.x, b = blockIdx.y;
  const int L = seq_lens[b];
  if (L == 0) return;                                      // the split kernel wrote O = 0
  const int ns = min(n_splits, (L + chunk - 1) / chunk);   // chunks that hold tokens
  const size_t hb = (size_t)b * Hq + h;
  const float* lse_row = lse_part + hb * n_splits;
  const float* o_row = o_part + hb * n_splits * C::DV;
  const int c4 = threadIdx.x * 4;
  float M = -INFINITY;
  for (int s = 0; s < ns; ++s) M = fmaxf(M, __ldcg(lse_row + s));
  const float ref = M == -INFINITY ? 0.f : M;
  float W = 0.f;
  float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int s = 0; s < ns; ++s) {
    const float w = __expf(__ldcg(lse_row + s) - ref);
    const float4 v = __ldcg(reinterpret_cast<const float4*>(o_row + (size_t)s * C::DV + c4));
    W += w;
    a.x += w * v.x, a.y += w * v.y, a.z += w * v.z, a.w += w * v.w;
  }
  const float inv = W > 0.f ? 1.f / W : 0.f;
  *reinterpret_cast<uint2*>(o + hb * C::DV + c4) = make_uint2(pack_bf16(a.x * inv, a.y * inv), pack_bf16(a.z * inv, a.w * inv));
}
