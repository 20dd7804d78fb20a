%%cuda fa -k "fa2<V1<128>>" -k "fa2<V1<64>>" -k "fa2<V2<128>>" -k "fa2<V3<128>>" -k "fa2<V3<64>>"
#include "course.cuh"      // the launch contract, ldmatrix / mma / cp.async helpers
#include "attention.cuh"   // this chapter's helpers (zero-fill cp.async, ex2, bf16 packing, quad reductions, swizzle)
using namespace attn;

// O (B, H, Sq, D) bf16 = softmax(Q Kᵀ / √D [+ causal mask]) V, row-major and contiguous:
// Q (B, H, Sq, D), K and V (B, Hkv, Sk, D) bf16; query head h reads KV head h / (H / Hkv).
// A block owns BR query rows of one (batch, head); its WARPS warps split them (split-Q: warp w
// owns rows w · BR/WARPS …, MT m16 tiles) and share every K/V tile of BC keys, which streams
// through shared memory STAGES tiles deep (cp.async, one barrier per tile).
template <int D_, int BR_, int BC_, int WARPS_, int STAGES_, bool QREG_, int MINB_>
struct Config {
  static constexpr int D = D_, BR = BR_, BC = BC_, WARPS = WARPS_, STAGES = STAGES_, MINB = MINB_;
  static constexpr bool QREG = QREG_;          // Q fragments held in registers for the whole loop
  static constexpr float TAU = 8.f;            // lazy rescale: a row's reference may lag its max by 2^8
  static constexpr int THREADS = WARPS * 32;
  static constexpr int WROWS = BR / WARPS;     // query rows of one warp
  static constexpr int MT = WROWS / 16;        // its m16 tiles
  static constexpr int NT = BC / 8;            // n8 tiles of S = Q Kᵀ (keys)
  static constexpr int KD = D / 16;            // k16 steps of Q Kᵀ (over d)
  static constexpr int KC = BC / 16;           // k16 steps of P V (over keys)
  static constexpr int DT = D / 8;             // n8 tiles of O (over d)
  static constexpr int CH = D / 8;             // 16-byte chunks in a row of Q, K, V, O
  static constexpr int Q_BYTES = BR * D * 2;   // (BR, D) bf16
  static constexpr int KV_BYTES = BC * D * 2;  // (BC, D) bf16: one of K, V
  static constexpr int STAGE_BYTES = 2 * KV_BYTES;
  static constexpr int ROWS_PER_PASS = THREADS / CH;   // rows one cp.async pass of the block covers
  // the launch contract (course.cuh): block size, dynamic shared memory, rows of Q per block,
  // keys per tile, head dimension, pipeline depth
  static constexpr int SMEM_BYTES = Q_BYTES + STAGES * STAGE_BYTES;
  static constexpr int TILE_M = BR, TILE_N = BC, TILE_K = D;
  static_assert(D == 64 || D == 128, "head dim 64 or 128");
  static_assert(WROWS % 16 == 0 && BC % 16 == 0 && STAGES >= 2, "tile shapes");
  static_assert(ROWS_PER_PASS % 8 == 0 && BR % ROWS_PER_PASS == 0 && BC % ROWS_PER_PASS == 0,
                "a thread's swizzled chunk is the same on every pass");
};
//                                  D   BR   BC           warps stages         Q in regs  blocks/SM
template <int D> using V1 = Config<D, 64, 64,            4, 2,              true,  2>;  // 4 warps × 16 rows
template <int D> using V2 = Config<D, 128, 64,           4, 2,              false, 2>;  // 4 warps × 32 rows
template <int D> using V3 = Config<D, 128, D == 128 ? 32 : 64, 4, D == 128 ? 3 : 2, false, 2>;  // + narrow K/V tiles, 3 stages (d 128)
// (at d = 64, V3 is V2: the same type. The launch function reads block size, shared memory and
// tiles from these types.)

template <class C>
__global__ void __launch_bounds__(C::THREADS, C::MINB)
fa2(const bf16_t* __restrict__ Q, const bf16_t* __restrict__ K, const bf16_t* __restrict__ V,
    bf16_t* __restrict__ O, int Sq, int Sk, int H, int Hkv, float scale_log2, int causal) {
  constexpr int D = C::D, BR = C::BR, BC = C::BC, MT = C::MT, NT = C::NT, KD = C::KD, KC = C::KC;
  constexpr int DT = C::DT, CH = C::CH, STAGES = C::STAGES;
  extern __shared__ __align__(1024) unsigned char smem[];   // Q (BR, D) | STAGES × {K, V} (BC, D)
  const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;                     // mma fragment row group, column pair

  // Causal blocks start with the longest rows (the last m-block): the short ones fill the tail.
  const int mblk = causal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z, hk = h / (H / Hkv);
  const int r0 = mblk * BR;                                 // first query row of the block
  const bf16_t* Qh = Q + ((size_t)b * H + h) * Sq * D;
  const bf16_t* Kh = K + ((size_t)b * Hkv + hk) * Sk * D;
  const bf16_t* Vh = V + ((size_t)b * Hkv + hk) * Sk * D;

  // Key tiles this block visits, and the first that needs a mask (causal diagonal or ragged end).
  const int kv_end = causal ? min(Sk, r0 + BR) : Sk;
  const int n_tiles = (kv_end + BC - 1) / BC;
  const int n_nomask = causal ? min(Sk / BC, (r0 + 1) / BC) : Sk / BC;

  // cp.async: thread tid copies chunk tid % CH of rows tid / CH + i · ROWS_PER_PASS.
  const int ld_r = tid / CH, ld_c = tid % CH;
  const unsigned ld_soff = swz<D>(ld_r, ld_c);
  // Rows at or past rows_valid become zeros (nothing is read: the address is clamped).
  auto load_rows = [&](unsigned sdst, const bf16_t* src, int row0, int nrows, int rows_valid) {
#pragma unroll
    for (int i = 0; i < nrows / C::ROWS_PER_PASS; ++i) {
      const int r = ld_r + i * C::ROWS_PER_PASS;
      const bool ok = row0 + r < rows_valid;
      const bf16_t* gp = ok ? src + (size_t)(row0 + r) * D + ld_c * 8 : src;
      cp_async_16z(sdst + ld_soff + i * C::ROWS_PER_PASS * D * 2, gp, ok ? 16u : 0u);
    }
  };
  // A whole K/V tile (the usual case) is copied with no row test; only a ragged last tile is tested.
  auto load_kv = [&](unsigned stage, int j) {
    if ((j + 1) * BC <= Sk) {
      const int off = (j * BC + ld_r) * D + ld_c * 8;       // < 2^31: one head's K is < 2^31 elements
#pragma unroll
      for (int i = 0; i < BC / C::ROWS_PER_PASS; ++i) {
        course::cp_async_16(stage + ld_soff + i * C::ROWS_PER_PASS * D * 2, Kh + off + i * C::ROWS_PER_PASS * D);
        course::cp_async_16(stage + C::KV_BYTES + ld_soff + i * C::ROWS_PER_PASS * D * 2,
                            Vh + off + i * C::ROWS_PER_PASS * D);
      }
    } else {
      load_rows(stage, Kh, j * BC, BC, Sk);
      load_rows(stage + C::KV_BYTES, Vh, j * BC, BC, Sk);
    }
  };
  // Tile j lives in stage j % STAGES.
  auto stage_of = [&](int jj) -> unsigned { return C::Q_BYTES + (unsigned)(jj % STAGES) * C::STAGE_BYTES; };

  // Prologue: Q and the first STAGES - 1 K/V tiles, one commit group per tile (Q joins the first).
  load_rows(sbase, Qh, r0, BR, Sq);
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n_tiles) load_kv(sbase + stage_of(s), s);
    course::cp_async_commit();
  }

  // ldmatrix lane addresses (byte offsets), XORed with 32 · (k16 step) later:
  // A = Q rows: lanes 0-15 rows 0-15 at d 0-7, lanes 16-31 the same rows at d 8-15.
  const int wrow = warp * C::WROWS;                          // first row of this warp in the block
  const unsigned q_ld = swz<D>(wrow + (lane & 15), lane >> 4);
  // B of Q Kᵀ = K rows (keys), not transposed: lanes 0-7 keys 0-7 at d 0-7, 8-15 keys 0-7 at d 8-15,
  // 16-23 keys 8-15 at d 0-7, 24-31 keys 8-15 at d 8-15: one x4 = b0, b1 of two n8 tiles of keys.
  const unsigned k_ld = swz<D>((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  // B of P V = V rows (keys), transposed: lanes 0-15 keys 0-15 at d-chunk 0, 16-31 at d-chunk 1:
  // one x4.trans = b0, b1 of two n8 tiles of d.
  const unsigned v_ld = C::KV_BYTES + swz<D>(lane & 15, lane >> 4);

  float acc[MT][DT][4];                                      // (WROWS, D) fp32 running output
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int n = 0; n < DT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][n][e] = 0.f;
  float m_run[MT][2], l_run[MT][2];                          // per row g and g + 8 of each m16 tile:
#pragma unroll                                               // the reference point (log2 units) and
  for (int i = 0; i < MT; ++i)                               // this lane's part of the row sum
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) m_run[i][hh] = -INFINITY, l_run[i][hh] = 0.f;
  unsigned qf[C::QREG ? MT : 1][C::QREG ? KD : 1][4];        // Q fragments, when kept in registers

  // One key tile: S = Q Kᵀ, (mask), online softmax, O += P V. MASK is a compile-time flag: the
  // tiles that need no mask (all but at most BR / BC + 1 of them) run with no mask code at all.
  auto tile = [&](int j, auto mask_tag) {
    constexpr bool MASK = decltype(mask_tag)::value;
    course::cp_async_wait<STAGES - 2>();                     // tile j (and Q) landed for this thread,
    __syncthreads();                                         // for all; all are done with tile j - 1
    if (j + STAGES - 1 < n_tiles) load_kv(sbase + stage_of(j + STAGES - 1), j + STAGES - 1);
    course::cp_async_commit();                               // always: the group count stays in step
    const unsigned rd = sbase + stage_of(j);

    if constexpr (C::QREG) {
      if (j == 0) {
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int ks = 0; ks < KD; ++ks) course::ldmatrix_x4(qf[i][ks], sbase + ((q_ld + i * 16 * D * 2) ^ (ks * 32)));
      }
    }

    // ---- S = Q Kᵀ: (WROWS, BC) fp32 in registers --------------------------------------------------
    float s[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[i][n][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < KD; ++ks) {
      unsigned a[MT][4];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        if constexpr (C::QREG) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[i][e] = qf[i][ks][e];
        } else {
          course::ldmatrix_x4(a[i], sbase + ((q_ld + i * 16 * D * 2) ^ (ks * 32)));
        }
      }
#pragma unroll
      for (int nn = 0; nn < NT / 2; ++nn) {
        unsigned kb[4];                                      // b0, b1 of key tiles 2nn and 2nn + 1
        course::ldmatrix_x4(kb, rd + ((k_ld + nn * 16 * D * 2) ^ (ks * 32)));
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          mma_bf16(s[i][2 * nn], a[i], kb[0], kb[1]);
          mma_bf16(s[i][2 * nn + 1], a[i], kb[2], kb[3]);
        }
      }
    }

    // ---- mask: the causal diagonal and keys past Sk (only in the tiles that cross them) ----------
    if constexpr (MASK) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = j * BC + n * 8 + 2 * t + (e & 1);           // key
            const int row = r0 + wrow + i * 16 + g + 8 * (e >> 1);       // query
            if (col >= Sk || (causal && col > row)) s[i][n][e] = -INFINITY;
          }
    }

    // ---- online softmax (lazy reference point), P into A fragments, O += P V ----------------------
    // BEGIN SOLUTION
    // Each row's p = 2^(s · scale · log2 e − m_run) is taken against a reference m_run kept within
    // TAU of the row's true max (p ≤ 2^TAU: no overflow, bf16 keeps its relative precision). Only
    // when some row of the warp outgrew its reference by more than TAU does the warp move every
    // grown row's reference up to its max and rescale that row's l and output by 2^(old − new).
    float mt[MT][2];                                         // this tile's row max, log2 units
    bool grow = false;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        float mx = fmaxf(s[i][0][2 * hh], s[i][0][2 * hh + 1]);
#pragma unroll
        for (int n = 1; n < NT; ++n) mx = fmaxf(mx, fmaxf(s[i][n][2 * hh], s[i][n][2 * hh + 1]));
        mt[i][hh] = quad_max(mx) * scale_log2;
        grow |= mt[i][hh] > m_run[i][hh] + C::TAU;           // a row's first key always counts (-inf)
      }
    if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const float m_new = fmaxf(m_run[i][hh], mt[i][hh]);
          const float alpha = ex2(m_run[i][hh] - ref_point(m_new));   // 1 if unchanged, 0 from -inf
          m_run[i][hh] = m_new;
          l_run[i][hh] *= alpha;
#pragma unroll
          for (int n = 0; n < DT; ++n) acc[i][n][2 * hh] *= alpha, acc[i][n][2 * hh + 1] *= alpha;
        }
    }
    // P, packed to bf16 as soon as it exists, straight into the A-fragment layout of P V: key step
    // kk = n8 tiles 2kk (a0 row g, a1 row g + 8) and 2kk + 1 (a2 row g, a3 row g + 8).
    unsigned pa[MT][KC][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const float ref = ref_point(m_run[i][hh]);
        float rs = 0.f;
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          const float p0 = ex2(fmaf(s[i][n][2 * hh], scale_log2, -ref));
          const float p1 = ex2(fmaf(s[i][n][2 * hh + 1], scale_log2, -ref));
          rs += p0 + p1;
          pa[i][n / 2][(n % 2) * 2 + hh] = pack_bf16(p0, p1);
        }
        l_run[i][hh] += rs;                                  // this lane's part of the row sum
      }
#pragma unroll
    for (int kk = 0; kk < KC; ++kk)
#pragma unroll
      for (int dd = 0; dd < DT / 2; ++dd) {
        unsigned vb[4];                                      // b0, b1 of d tiles 2dd and 2dd + 1
        course::ldmatrix_x4_trans(vb[0], vb[1], vb[2], vb[3], rd + ((v_ld + kk * 16 * D * 2) ^ (dd * 32)));
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          mma_bf16(acc[i][2 * dd], pa[i][kk], vb[0], vb[1]);
          mma_bf16(acc[i][2 * dd + 1], pa[i][kk], vb[2], vb[3]);
        }
      }
    // END SOLUTION
  };
  int j = 0;
  for (; j < min(n_nomask, n_tiles); ++j) tile(j, Flag<false>{});
  for (; j < n_tiles; ++j) tile(j, Flag<true>{});
  course::cp_async_wait<0>();                                // nothing left in flight into smem

  // ---- epilogue: O = acc / l as bf16, staged in this warp's own Q rows (only this warp read them),
  // then written as 16-byte row chunks --------------------------------------------------------------
  __syncwarp();
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const float l = quad_sum(l_run[i][hh]);
      const float inv = l > 0.f ? 1.f / l : 0.f;             // a row that saw no key writes zeros
      const int row = wrow + i * 16 + g + 8 * hh;
#pragma unroll
      for (int n = 0; n < DT; ++n)
        *reinterpret_cast<unsigned*>(smem + swz<D>(row, n) + 4 * t) =
            pack_bf16(acc[i][n][2 * hh] * inv, acc[i][n][2 * hh + 1] * inv);
    }
  __syncwarp();
  bf16_t* Oh = O + ((size_t)b * H + h) * Sq * D;
#pragma unroll
  for (int it = 0; it < C::WROWS * CH / 32; ++it) {
    const int idx = it * 32 + lane, row = wrow + idx / CH, c = idx % CH;
    if (r0 + row < Sq)
      *reinterpret_cast<uint4*>(Oh + (size_t)(r0 + row) * D + c * 8) =
          *reinterpret_cast<const uint4*>(smem + swz<D>(row, c));
  }
}
