// Lesson 04.04's decode kernel with K/V brought in by TMA (2-D tensor maps, 128-byte swizzle) instead
// of 16-byte cp.async: one thread issues each tile's boxes into a ring of STAGES stages, one
// mbarrier per stage (its transaction count = the stage's bytes). Everything else is the lesson's
// (decode_cell.cu): head packing, the warps' token split, the online softmax, the fused merge.
//
// Why: a read stream of the lesson's 268.6 MB made of 1-D bulk copies reaches 92% of the copy peer
// under the grader's write flush where 16-byte loads reach 89.6% (flush_study.py --reads, H100).
//
// Maps (host: decode_tmap.py): contiguous K/V (B·Hkv·CAP, D) rows, boxes of BN rows × 64 columns;
// paged K/V (num_pages·P, Hkv·D), boxes of R = min(P, BN) rows × 64 columns at column kvh·D (the
// page's rows of this head, 2 KB apart). A stage holds K then V, each as D/64 column halves of
// (BN rows × 128 B), swizzled by TMA: chunk c of row r at ((c ^ r) & 7) · 16 within its 1024-B group.
// Rows past the sequence's end come in too (the next head's tokens, NaN in the tests, or zeros past
// the tensor): their scores are masked, and the ragged last tile's V rows are zeroed in shared memory.
#include "course.cuh"
#include "attention.cuh"
#include "tma.cuh"
using namespace attn;

template <int D_, int BN_, int WARPS_, int STAGES_, bool PAGED_, int MINB_>
struct DecTConfig {
  static constexpr int D = D_, BN = BN_, WARPS = WARPS_, STAGES = STAGES_, MINB = MINB_;
  static constexpr bool PAGED = PAGED_;
  static constexpr int HEADS = 16, THREADS = WARPS * 32;
  static constexpr int TPW = BN / WARPS;
  static constexpr int NT = TPW / 8, KC = TPW / 16, KD = D / 16, DT = D / 8, CH = D / 8;
  static constexpr int HALF_BYTES = BN * 128;             // BN rows × 64 columns bf16
  static constexpr int Q_BYTES = HEADS * D * 2;
  static constexpr int KV_BYTES = BN * D * 2;
  static constexpr int STAGE_BYTES = 2 * KV_BYTES;
  static constexpr int RED_PITCH = D + 8;
  static constexpr int RED_BYTES = WARPS * 16 * (RED_PITCH + 2) * 4;
  static constexpr int MAIN_BYTES = STAGES * STAGE_BYTES > RED_BYTES ? STAGES * STAGE_BYTES : RED_BYTES;
  static constexpr int BAR_OFF = Q_BYTES + MAIN_BYTES;
  static constexpr int ROWS_PER_PASS = THREADS / CH;
  // + 1024: the base is rounded up to 1024 B (the 128-byte swizzle's period); STAGES mbarriers; ticket
  static constexpr int SMEM_BYTES = 1024 + BAR_OFF + STAGES * 8 + 16;
  static constexpr int TILE_M = HEADS, TILE_N = BN, TILE_K = D;
  static_assert(D == 64 || D == 128, "head dim 64 or 128");
  static_assert(Q_BYTES % 1024 == 0 && HALF_BYTES % 1024 == 0, "boxes start on the swizzle's period");
};
template <int D> using DecT = DecTConfig<D, 64, 4, 3, false, 2>;
template <int D> using PagedT = DecTConfig<D, 64, 4, 3, true, 2>;
template <int D> using DecT4 = DecTConfig<D, 64, 4, 4, false, 1>;
template <int D> using PagedT4 = DecTConfig<D, 64, 4, 4, true, 1>;

template <int BN>
__device__ __forceinline__ unsigned tswz(int r, int c) {   // byte offset of chunk c of row r in K or V
  return (c >> 3) * (BN * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

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
decode_t(const __grid_constant__ course::TensorMap kmap, const __grid_constant__ course::TensorMap vmap,
         const bf16_t* __restrict__ q, const int* __restrict__ block_table, const int* __restrict__ seq_lens,
         float* __restrict__ o_part, float* __restrict__ lse_part, bf16_t* __restrict__ o, int* __restrict__ counters,
         int Hq, int Hkv, int cap, int page_shift, int box_rows, int chunk, int n_splits, float scale_log2) {
  constexpr int D = C::D, BN = C::BN, KD = C::KD, KC = C::KC, NT = C::NT, DT = C::DT, CH = C::CH;
  constexpr int STAGES = C::STAGES;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned raw = (unsigned)__cvta_generic_to_shared(smem_raw);
  unsigned char* smem = smem_raw + ((1024u - (raw & 1023u)) & 1023u);      // 1024-B aligned
  const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
  unsigned long long* bar = reinterpret_cast<unsigned long long*>(smem + C::BAR_OFF);
  int* ticket = reinterpret_cast<int*>(smem + C::BAR_OFF + STAGES * 8);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int G = Hq / Hkv;
  const int L = seq_lens[b];
  const int t0 = split * chunk;
  if (t0 >= L && split > 0) return;
  const int ntok = min(L, t0 + chunk) - t0;
  const int n_tiles = ntok > 0 ? (ntok + BN - 1) / BN : 0;
  auto head_of = [&](int gi) -> int { return kvh * G + gi; };

  if (L == 0) {
    for (int item = threadIdx.x; item < G * D; item += C::THREADS)
      o[((size_t)b * Hq + head_of(item / D)) * D + item % D] = 0;
    return;
  }

  // tile j (of this chunk) into stage s: every box of K and V, counted on bar[s]
  auto issue = [&](int s, int j) {
    unsigned char* st = smem + C::Q_BYTES + s * C::STAGE_BYTES;
    course::mbar_arrive_expect_tx(&bar[s], C::STAGE_BYTES);
    if constexpr (!C::PAGED) {
      const int row = ((b * Hkv + kvh) * cap) + t0 + j * BN;
#pragma unroll
      for (int h = 0; h < D / 64; ++h) {
        course::tma_load_2d(st + h * C::HALF_BYTES, &kmap, h * 64, row, &bar[s]);
        course::tma_load_2d(st + C::KV_BYTES + h * C::HALF_BYTES, &vmap, h * 64, row, &bar[s]);
      }
    } else {
      const int P = 1 << page_shift, maxp = cap >> page_shift;
      for (int p = 0; p < BN / box_rows; ++p) {
        const int tk = t0 + j * BN + p * box_rows;             // the box's first token
        const int page = tk < L ? __ldg(block_table + (size_t)b * maxp + (tk >> page_shift)) : 0;
        const int row = page * P + (tk & (P - 1));
#pragma unroll
        for (int h = 0; h < D / 64; ++h) {
          const int off = h * C::HALF_BYTES + p * box_rows * 128;
          course::tma_load_2d(st + off, &kmap, kvh * D + h * 64, row, &bar[s]);
          course::tma_load_2d(st + C::KV_BYTES + off, &vmap, kvh * D + h * 64, row, &bar[s]);
        }
      }
    }
  };

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) course::mbar_init(&bar[s], 1);
    course::fence_mbarrier_init();
    course::prefetch_tensormap(&kmap);
    course::prefetch_tensormap(&vmap);
  }
  __syncthreads();
  if (tid == 0)
    for (int s = 0; s < STAGES - 1; ++s)
      if (s < n_tiles) issue(s, s);

  // Q: rows gi < G are the group's query heads, the rest zeros (cp.async, the lesson's swizzle).
  const int ld_r = tid / CH, ld_c = tid % CH;
  const unsigned ld_soff = swz<D>(ld_r, ld_c);
#pragma unroll
  for (int i = 0; i < C::HEADS / C::ROWS_PER_PASS; ++i) {
    const int r = ld_r + i * C::ROWS_PER_PASS;
    const bool ok = r < G;
    cp_async_16z(sbase + ld_soff + i * C::ROWS_PER_PASS * D * 2,
                 ok ? q + ((size_t)b * Hq + head_of(r)) * D + ld_c * 8 : q, ok ? 16u : 0u);
  }
  course::cp_async_commit();
  course::cp_async_wait<0>();

  const int wtok = warp * C::TPW;
  const unsigned q_ld = swz<D>(lane & 15, lane >> 4);
  const unsigned k_ld = tswz<BN>(wtok + (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const unsigned v_ld = C::KV_BYTES + tswz<BN>(wtok + (lane & 15), lane >> 4);

  float acc[DT][4];
#pragma unroll
  for (int n = 0; n < DT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  unsigned qf[KD][4];

  for (int j = 0; j < n_tiles; ++j) {
    const int s = j % STAGES;
    __syncthreads();                                       // tile j-1's stage is free
    if (tid == 0 && j + STAGES - 1 < n_tiles) issue((j + STAGES - 1) % STAGES, j + STAGES - 1);
    if (j == 0) {
#pragma unroll
      for (int ks = 0; ks < KD; ++ks) course::ldmatrix_x4(qf[ks], sbase + (q_ld ^ (ks * 32)));
    }
    course::mbar_wait(&bar[s], (j / STAGES) & 1);
    const unsigned rd = sbase + C::Q_BYTES + s * C::STAGE_BYTES;
    const int valid = ntok - j * BN;                       // rows of this tile that are tokens of the chunk
    if (valid < BN) {                                      // the ragged last tile: V rows past it are zeros
      unsigned char* vst = smem + C::Q_BYTES + s * C::STAGE_BYTES + C::KV_BYTES;
      for (int idx = tid; idx < (BN - valid) * CH; idx += C::THREADS) {
        const int r = valid + idx / CH, c = idx % CH;
        *reinterpret_cast<uint4*>(vst + tswz<BN>(r, c)) = make_uint4(0, 0, 0, 0);
      }
      __syncthreads();
    }

    float sc[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[n][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < KD; ++ks)
#pragma unroll
      for (int nn = 0; nn < NT / 2; ++nn) {
        unsigned kb[4];
        course::ldmatrix_x4(kb, rd + (ks >> 2) * C::HALF_BYTES + ((k_ld + nn * 16 * 128) ^ ((ks & 3) * 32)));
        mma_bf16(sc[2 * nn], qf[ks], kb[0], kb[1]);
        mma_bf16(sc[2 * nn + 1], qf[ks], kb[2], kb[3]);
      }
    if (valid < BN) {
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (wtok + n * 8 + 2 * t + (e & 1) >= valid) sc[n][e] = -INFINITY;
    }
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < NT; ++n) mx = fmaxf(mx, fmaxf(sc[n][2 * hh], sc[n][2 * hh + 1]));
      mx = quad_max(mx);
      const float m_new = fmaxf(m_run[hh], mx * scale_log2);
      const float ref = ref_point(m_new), alpha = ex2(m_run[hh] - ref);
      m_run[hh] = m_new;
      float rs = 0.f;
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 2 * hh; e < 2 * hh + 2; ++e) {
          const float p = ex2(fmaf(sc[n][e], scale_log2, -ref));
          sc[n][e] = p;
          rs += p;
        }
      l_run[hh] = l_run[hh] * alpha + rs;
#pragma unroll
      for (int n = 0; n < DT; ++n) acc[n][2 * hh] *= alpha, acc[n][2 * hh + 1] *= alpha;
    }
#pragma unroll
    for (int kk = 0; kk < KC; ++kk) {
      unsigned pa[4];
      pa[0] = pack_bf16(sc[2 * kk][0], sc[2 * kk][1]);
      pa[1] = pack_bf16(sc[2 * kk][2], sc[2 * kk][3]);
      pa[2] = pack_bf16(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
      pa[3] = pack_bf16(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
      for (int dd = 0; dd < DT / 2; ++dd) {
        unsigned vb[4];
        course::ldmatrix_x4_trans(vb[0], vb[1], vb[2], vb[3],
                                  rd + (dd >> 2) * C::HALF_BYTES + ((v_ld + kk * 16 * 128) ^ ((dd & 3) * 32)));
        mma_bf16(acc[2 * dd], pa, vb[0], vb[1]);
        mma_bf16(acc[2 * dd + 1], pa, vb[2], vb[3]);
      }
    }
  }
  __syncthreads();                                         // every warp is done with the stages

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
      const float f = ex2(ml[(w * 16 + row) * 2] - ref);
      Ls += f * ml[(w * 16 + row) * 2 + 1];
      const float4 v = *reinterpret_cast<const float4*>(red + (w * 16 + row) * C::RED_PITCH + c4);
      a4.x += f * v.x, a4.y += f * v.y, a4.z += f * v.z, a4.w += f * v.w;
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
}
