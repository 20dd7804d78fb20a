%%cuda f8 --arch sm_90a -k "flash3_fp8<F8<0, 1, 1>>" -k "flash3_fp8<F8<0, 0, 1>>" -k "flash3_fp8<F8<0, 1, 0>>" -k "flash3_fp8<F8<0, 1, 1, 3>>" -k "flash3_fp8<F8<0, 1, 1, 0, 0, 128>>"
#include "course.cuh"      // the launch contract, smem_u32
#include "tma.cuh"         // TensorMap, mbarrier
#include "wgmma.cuh"       // smem descriptors, wgmma fence/commit/wait, wgmma m64n128k32 e4m3 (A and B in shared memory)
#include "pipeline.cuh"    // setmaxnreg, the bounded wait, mbar_arrive
#include "attention.cuh"   // ex2, quad_max / quad_sum, ref_point, bf16_t (chapter 04)
#include "flash3.cuh"      // the 3-D TMA load, the work units (05.05's bf16 part)
#include "flash3_fp8.cuh"  // pack_e4m3x2, wgmma m64n128k32 e4m3 with A from registers, the key order
using course::TensorMap;
using namespace attn;

// O (B, H, Sq, 128) bf16 = softmax(Q Kᵀ · qd · kd / √d [+ causal mask]) V · vd, from e4m3 inputs:
//   Q (B, H, Sq, 128) and K (B, Hkv, Sk, 128), row-major; V stored TRANSPOSED, Vt (B, Hkv, 128, Sk_pad)
//   (Sk_pad = Sk rounded up to 16), the keys of each group of 16 in the order the accumulator of S
//   holds them (flash3_fp8.cuh, the problem's KEY_ORDER), the padding zeros; the tensor map
//   runs to Sk_pad; qd (B, H), kd and vd (B, Hkv): fp32 descales, one per head.
// 05.05's bf16 kernel with FP8 operands: persistent, a producer warpgroup streaming K and Vt tiles of
// BN keys through a ring of STAGES slots, two consumer warpgroups of 64 query rows, the intra-warpgroup
// overlap: S_j's softmax runs while P V_{j-1} is on the tensor core; P V_{j-1} is waited for only when O
// must be rescaled (or at the unit's end), so P lives in two register buffers (p, pb): P_j is packed into
// the one P V_{j-2} read, and the wait for S_j retires P V_{j-2} too.
// Ping-pong (PINGPONG = 1) is not built: it measured 3-4 points slower (results/ch05/fp8attn_*_run3), and
// with 05.05's late wait ptxas serialized its wgmmas (C7519, "WG.AR in divergent path"). What changes:
//   * S = Q Kᵀ: 4 wgmma m64n192k32 e4m3 (both K-major, as 05.04's GEMM): rows of 128 bytes, +32 per k32;
//   * O += P V: FP8 wgmma reads B only K-major, i.e. V as (d, keys) with keys contiguous: Vt's tile
//     (128 rows of d × BN keys) is exactly that, in boxes of 64 keys (a 128-byte-swizzled row holds 128
//     keys at most; 64-byte rows, 64-byte swizzle). P comes from registers, rounded to e4m3 and packed:
//     with Vt's keys in the accumulator's order, the places S's accumulator gives a thread ARE the A
//     fragment's (to_a_fragment, below; FA3 writes its in-kernel V transpose in such an order too);
//   * the descales: qd · kd joins the softmax's scale, vd multiplies O in the epilogue;
//   * P is computed as 2^(s − max + 8): its largest value is 256, so that the probabilities down to
//     2^-14 of the max stay normal e4m3 numbers (relative error ≤ 2^-4); l sums the same values, the 2^8
//     cancels in O / l.
//   * LAZY: the running max moves (and O, l are rescaled) only when a row's new max exceeds it by more
//     than LAZY_GAP = log2(448 / 256): below that P stays ≤ 448, still an e4m3 number (FA4's conditional
//     rescaling, made safe by P's headroom); the decision is per warp, so a warp skips its 64 FMULs. A
//     row's max exceeds m + gap iff one of its lanes' own maxima does: the warp votes on the lanes' maxima,
//     and the quad's shuffles (the row's max) run only when the vote says it moves;
//   * TREE: the row max and sum over a thread's 32 values in four independent chains, not one.
//   POLY_: of every 8 exponentials of P, that many computed with 05.06's cubic on the FMA units (FA4's
//     split: MUFU.EX2 does 16 a clock an SM, as many as the FP8 tensor core's work asks for); 0: none.
//   STAGES_: the ring's slots (0, the default: 4 of 48 KiB at BN 192, 208 KiB in all; 5 at BN 128).
//   BN_: keys a tile, 192 (FA3 takes 224 for FP8 at d 128: its GEMMs are half as long as bf16's, the
//     per-tile work of the CUDA cores is what it amortizes) or 128 (the ablation's).
// The loop's bookkeeping is kept small (it is instructions in the softmax's stream): the barriers' shared
// addresses and the tiles' descriptors are computed once (a slot's = slot 0's + s · 24 KiB), the ring's
// index is unsigned (% S and / S: a mask and a shift).
// The reference is F8<0, 1, 1>; the others are the ablation's (results/ch05/fp8attn_*).
template <int PINGPONG_, int LAZY_, int TREE_, int STAGES_ = 0, int POLY_ = 0, int BN_ = 192>
struct F8 {
  static constexpr int D = 128, BM = 128, BN = BN_, STAGES = STAGES_ ? STAGES_ : (BN_ == 128 ? 5 : 4);
  static constexpr int VBOX = BN == 128 ? 128 : 64;              // keys per TMA box of Vt
  static_assert(BN == 128 || BN == 192, "BN: 128 or 192");
  static_assert(!PINGPONG_, "ping-pong is no longer built (see above)");
  static constexpr bool LAZY = LAZY_, TREE = TREE_;
  static constexpr int POLY = POLY_;                               // of every 8 exponentials, POLY on the FMA units
  static constexpr float LAZY_GAP = 0.8f;                        // < log2(448 / 256) = 0.807
  static constexpr int CONSUMERS = 2, THREADS = 384;
  static constexpr int Q_BYTES = BM * D, KV_BYTES = BN * D;      // one byte an element: 24 KiB a tile
  static constexpr int SMEM_BYTES = Q_BYTES + 2 * STAGES * KV_BYTES + 1024;   // + 1 KiB to align to the swizzle
  static constexpr int PRODUCER_REGS = 24, CONSUMER_REGS = 240;
  static constexpr int TILE_M = BM, TILE_N = BN, TILE_K = D;     // the launch contract (course.cuh)
  static constexpr float P_SHIFT = 8.f;                          // P's largest value: 2^8
};

// 2^x on the FMA units for x ≤ 9 (05.06's cubic on [0, 1]): n = x − 0.5 rounded by adding 1.5·2^23 (its
// low bits are then n), f = x − n, p(f) · 2^n by adding n to the exponent; below -125: 2^-125, not 0.
__device__ __forceinline__ float ex2_fma(float x) {
  constexpr float C0 = 0.999900288f, C1 = 0.696324771f, C2 = 0.224693156f, C3 = 0.078967257f, MAGIC = 12582912.f;
  x = fmaxf(x, -125.f);
  const float t = __fadd_rn(__fadd_rn(x, -0.5f), MAGIC), f = __fsub_rn(x, __fsub_rn(t, MAGIC));
  const float p = fmaf(fmaf(fmaf(C3, f, C2), f, C1), f, C0);
  return __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
}

template <class C>
__global__ void __launch_bounds__(C::THREADS, 1)
flash3_fp8(const __grid_constant__ TensorMap q_map,    // Q as (B·H, Sq, 128) bytes: boxes of 128 × BM rows × 1 head
           const __grid_constant__ TensorMap k_map,    // K as (B·Hkv, Sk, 128): boxes of 128 × BN rows
           const __grid_constant__ TensorMap vt_map,   // Vt as (B·Hkv, 128, Sk): boxes of BN keys × 128 rows of d
           const float* __restrict__ qd, const float* __restrict__ kd, const float* __restrict__ vd,
           bf16_t* __restrict__ O, int Sq, int Sk, int B, int H, int Hkv, int group, float scale_log2, int causal) {
  constexpr int D = C::D, BM = C::BM, BN = C::BN, S = C::STAGES;
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long q_full, q_empty, k_full[S], k_empty[S], v_full[S], v_empty[S];
  unsigned char* q_tile = smem_raw + ((1024 - (course::smem_u32(smem_raw) & 1023)) & 1023);
  auto k_slot = [&](int s) { return q_tile + C::Q_BYTES + s * C::KV_BYTES; };
  auto v_slot = [&](int s) { return q_tile + C::Q_BYTES + (S + s) * C::KV_BYTES; };

  // Work units as in 05.05's bf16 kernel: BM query rows of one (batch, head), `group` heads at a time.
  const int mblocks = (Sq + BM - 1) / BM, units = mblocks * H * B;
  using Unit = course::Flash3Unit;
  auto unit = [&](int u) { return course::flash3_unit<BM, BN>(u, mblocks, Sk, B, H, Hkv, group, causal); };

  if (threadIdx.x == 0) {
    course::prefetch_tensormap(&q_map);
    course::prefetch_tensormap(&k_map);
    course::prefetch_tensormap(&vt_map);
    course::mbar_init(&q_full, 1);
    course::mbar_init(&q_empty, C::CONSUMERS);
    for (int s = 0; s < S; ++s) {
      course::mbar_init(&k_full[s], 1);
      course::mbar_init(&v_full[s], 1);
      course::mbar_init(&k_empty[s], C::CONSUMERS);
      course::mbar_init(&v_empty[s], C::CONSUMERS);
    }
    course::fence_mbarrier_init();
  }
  __syncthreads();

  const int wg = threadIdx.x / 128 - 1;                  // consumer index 0, 1; -1: the producer
  if (wg < 0) {
    // ---------------------------------------------------------------- the producer warpgroup
    course::setmaxnreg_dec<C::PRODUCER_REGS>();
    if (threadIdx.x == 0 && Sk > 0) {
      int it = 0, tq = 0;
      for (int u = blockIdx.x; u < units; u += gridDim.x, ++tq) {
        const Unit w = unit(u);
        course::mbar_wait_or_trap(&q_empty, (tq & 1) ^ 1);
        course::mbar_arrive_expect_tx(&q_full, C::Q_BYTES);
        course::tma_load_3d(q_tile, &q_map, 0, w.r0, w.qh, &q_full);
        for (int j = 0; j < w.n_tiles; ++j, ++it) {
          const int s = it % S, parity = ((it / S) & 1) ^ 1;
          course::mbar_wait_or_trap(&k_empty[s], parity);
          course::mbar_arrive_expect_tx(&k_full[s], C::KV_BYTES);
          course::tma_load_3d(k_slot(s), &k_map, 0, j * BN, w.kh, &k_full[s]);
          course::mbar_wait_or_trap(&v_empty[s], parity);
          course::mbar_arrive_expect_tx(&v_full[s], C::KV_BYTES);
#pragma unroll
          for (int c = 0; c < BN / C::VBOX; ++c)                                 // keys j·BN …, all 128 rows of d
            course::tma_load_3d(v_slot(s) + c * C::VBOX * D, &vt_map, j * BN + c * C::VBOX, 0, w.kh, &v_full[s]);
        }
      }
    }
    return;
  }
  // ---------------------------------------------------------------- the consumer warpgroups
  course::setmaxnreg_inc<C::CONSUMER_REGS>();
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  const int rows = 64 * wg + 16 * warp + lane / 4;      // this thread's rows of a unit: rows and rows + 8
  if (Sk == 0) {                                        // no key: O = 0
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
      const Unit w = unit(u);
#pragma unroll
      for (int i = 0; i < D / 2; i += 2) {
        const int row = w.r0 + rows + 8 * ((i >> 1) & 1);
        if (row < Sq) *reinterpret_cast<unsigned*>(O + ((size_t)w.qh * Sq + row) * D + course::wgmma_acc_col(i)) = 0u;
      }
    }
    return;
  }
  const bool signaller = tid == 0;

  constexpr int NS = BN / 2, NO = D / 2;
  float s_acc[NS], o_acc[NO];
  unsigned p[BN / 8], pb[BN / 8];                        // P in e4m3, four to a register, in the A fragment's places:
                                                         // two buffers (tiles of even j in p, odd j in pb)
  float m[2], l[2];
  float sc_log2 = 0.f;                                   // the unit's scale of S: log2(e) / √d · qd · kd
  Unit w;
  unsigned it = 0;                                       // tiles consumed before this unit (the ring's index)

  // Computed once: the barriers' shared addresses (8 bytes a slot) and the descriptors of Q's rows and of
  // slot 0's K and Vt tiles; a slot's are slot 0's + s · 24 KiB (the address field counts 16 bytes).
  const unsigned kf_a = course::smem_u32(k_full), ke_a = course::smem_u32(k_empty);
  const unsigned vf_a = course::smem_u32(v_full), ve_a = course::smem_u32(v_empty);
  const unsigned long long q_desc = course::make_smem_desc(course::smem_u32(q_tile) + wg * 64 * 128, 16, 1024, course::DESC_SWIZZLE_128B);
  const unsigned long long k_desc = course::make_smem_desc(course::smem_u32(k_slot(0)), 16, 1024, course::DESC_SWIZZLE_128B);
  const unsigned long long v_desc = C::VBOX == 128       // 64-key boxes: 64-byte rows, 8-row atoms of 512 B
      ? course::make_smem_desc(course::smem_u32(v_slot(0)), 16, 1024, course::DESC_SWIZZLE_128B)
      : course::make_smem_desc(course::smem_u32(v_slot(0)), 16, 512, course::DESC_SWIZZLE_64B);
  auto wait_k = [&](unsigned g) { course::mbar_wait_at(kf_a + 8 * (g % S), (g / S) & 1); };   // tile g of the ring
  auto wait_v = [&](unsigned g) { course::mbar_wait_at(vf_a + 8 * (g % S), (g / S) & 1); };
  auto free_k = [&](unsigned g) { if (signaller) course::mbar_arrive_at(ke_a + 8 * (g % S)); };
  auto free_v = [&](unsigned g) { if (signaller) course::mbar_arrive_at(ve_a + 8 * (g % S)); };

  auto issue_qk = [&](int j) {                           // S = Q K_jᵀ: 4 wgmma m64nBNk32, +32 bytes a step
    const unsigned long long kd = k_desc + ((it + j) % S) * (C::KV_BYTES >> 4);
#pragma unroll
    for (int kk = 0; kk < D / 32; ++kk) course::wgmma_e4m3(s_acc, q_desc + 2 * kk, kd + 2 * kk, kk > 0 ? 1 : 0);
  };
  auto issue_pv = [&](int j, const unsigned (&p)[BN / 8]) {   // O += P V_j: BN / 32 wgmma m64n128k32, A = P from registers
    const unsigned long long vd = v_desc + ((it + j) % S) * (C::KV_BYTES >> 4);
#pragma unroll
    for (int kk = 0; kk < BN / 32; ++kk) {               // +32 bytes a k32 step; with 64-key boxes, the next box after two
      const unsigned a[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
      course::wgmma_m64n128k32_rs_e4m3(o_acc, a, vd + (C::VBOX == 128 ? 2 * kk : ((kk / 2) * C::VBOX * D + 32 * (kk % 2)) >> 4));
    }
  };

  auto softmax = [&](int j, float (&alpha)[2]) -> bool {   // true: O and l must be rescaled by alpha
    const bool masked = j * BN + BN > Sk || (causal && j * BN + BN - 1 > w.r0 + 64 * wg);
    if (masked) {
#pragma unroll
      for (int i = 0; i < NS; ++i) {
        const int col = j * BN + course::wgmma_acc_col(i), row = w.r0 + rows + 8 * ((i >> 1) & 1);
        if (col >= Sk || (causal && col > row)) s_acc[i] = -INFINITY;
      }
    }
    constexpr int CH = C::TREE ? 4 : 1;                  // independent chains per row
    float mc[2][CH];
#pragma unroll
    for (int c = 0; c < CH; ++c) mc[0][c] = mc[1][c] = -INFINITY;
#pragma unroll
    for (int i = 0; i < NS; ++i) mc[(i >> 1) & 1][(i >> 2) % CH] = fmaxf(mc[(i >> 1) & 1][(i >> 2) % CH], s_acc[i]);
    float v[2], mx[2];                                   // this lane's max of each row; the row's
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      v[r] = mc[r][0];
#pragma unroll
      for (int c = 1; c < CH; ++c) v[r] = fmaxf(v[r], mc[r][c]);
    }
    bool move = true;
    if constexpr (C::LAZY) {                             // the vote on the lanes' maxima; the quad's max only if it moves
      move = __any_sync(0xffffffffu, v[0] * sc_log2 > m[0] + C::LAZY_GAP || v[1] * sc_log2 > m[1] + C::LAZY_GAP);
      if (move) {
#pragma unroll
        for (int r = 0; r < 2; ++r) mx[r] = fmaxf(m[r], quad_max(v[r]) * sc_log2);
      }
    } else {
#pragma unroll
      for (int r = 0; r < 2; ++r) mx[r] = fmaxf(m[r], quad_max(v[r]) * sc_log2);   // sc_log2 > 0: the scaled scores' max
    }
    float ref[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float keep = move ? mx[r] : m[r];
      ref[r] = ref_point(keep);
      alpha[r] = move ? ex2(m[r] - ref[r]) : 1.f;        // 0 while the row had no score (m = -inf)
      m[r] = keep;
      ref[r] -= C::P_SHIFT;                              // P = 2^(s − m + 8): at most 256 (448 with LAZY)
    }
    float sc[2][CH];
#pragma unroll
    for (int c = 0; c < CH; ++c) sc[0][c] = sc[1][c] = 0.f;
#pragma unroll
    for (int i = 0; i < NS; ++i) {
      const float x = fmaf(s_acc[i], sc_log2, -ref[(i >> 1) & 1]);
      s_acc[i] = (i & 7) < C::POLY ? ex2_fma(x) : ex2(x);
      sc[(i >> 1) & 1][(i >> 2) % CH] += s_acc[i];
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = sc[r][0];
#pragma unroll
      for (int c = 1; c < CH; ++c) sum += sc[r][c];
      l[r] = move ? l[r] * alpha[r] + sum : l[r] + sum;
    }
    return move;
  };
  auto rescale_o = [&](const float (&alpha)[2]) {      // skipped when no row of the warp has a new max
    if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#pragma unroll
    for (int i = 0; i < NO; ++i) o_acc[i] *= alpha[(i >> 1) & 1];
  };
  // P (fp32, S's accumulator places) -> e4m3 in the A fragment's places, 32 keys (one k32 step) at a time.
  // Lane q of a quad holds, in rows g and g + 8, accumulator columns 8c + 2q, 8c + 2q + 1 (c = 0 … 3):
  // elements x[4c + {0, 1}] (row g) and x[4c + {2, 3}] (row g + 8), x = s_acc + 16kk. The A fragment's
  // register a[h] (h = 0: row g, k 0 … 15; 1: row g + 8; 2, 3: the same for k 16 … 31) holds in lane q the
  // A columns 16(h / 2) + 4q … + 3, and Vt holds at those columns (KEY_ORDER) the keys of accumulator columns
  // 8c + 2q, 8c + 2q + 1 for c = 2(h / 2) and 2(h / 2) + 1 -- exactly this lane's. Nothing moves between lanes.
  auto to_a_fragment = [&](unsigned (&p)[BN / 8]) {
#pragma unroll
    for (int kk = 0; kk < BN / 32; ++kk) {
      const float* x = s_acc + 16 * kk;
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        // BEGIN SOLUTION
        const int e = 8 * (h >> 1) + 2 * (h & 1);          // block c = 2(h / 2), this row's pair; then block c + 1
        p[4 * kk + h] = course::pack_e4m3x2(x[e], x[e + 1]) | (course::pack_e4m3x2(x[e + 4], x[e + 5]) << 16);
        // END SOLUTION
      }
    }
  };

  int tq = 0;
  for (int u = blockIdx.x; u < units; u += gridDim.x, ++tq) {
    w = unit(u);
    const int n = w.n_tiles;
    // BEGIN SOLUTION
    sc_log2 = scale_log2 * __ldg(qd + w.qh) * __ldg(kd + w.kh);
    // END SOLUTION
    const float v_scale = __ldg(vd + w.kh);
#pragma unroll
    for (int i = 0; i < NO; ++i) o_acc[i] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
    course::mbar_wait_or_trap(&q_full, tq & 1);
    float alpha[2];
    wait_k(it);
    course::wgmma_fence_operand(s_acc);
    course::wgmma_fence();
    issue_qk(0);
    course::wgmma_commit();
    course::wgmma_wait<0>();
    course::wgmma_fence_operand(s_acc);
    free_k(it);
    if (n == 1 && signaller) course::mbar_arrive(&q_empty);
    softmax(0, alpha);
    to_a_fragment(p);                                    // P_0
    bool move = false;                                   // O is zero: nothing to rescale
    // Tile j (P_{j-1} in `cur`): S_j = Q K_jᵀ and O += P_{j-1} V_{j-1} issued together; the wait for S_j
    // retires P V_{j-2} too (its V slot goes back, its P buffer is free); S_j's softmax runs while P V_{j-1}
    // is on the tensor core, and P_j is packed into the free buffer. O is waited for (P V_{j-1}) only when
    // it must be rescaled, before the next tile's P V adds to it.
    auto step = [&](int j, const unsigned (&cur)[BN / 8], unsigned (&nxt)[BN / 8]) {
      wait_k(it + j);
      wait_v(it + j - 1);
      if (move) {                                        // P V_{j-2} done before O changes
        course::wgmma_wait<0>();
        course::wgmma_fence_operand(o_acc);
        rescale_o(alpha);
        course::wgmma_fence_operand(o_acc);
      }
      course::wgmma_fence_operand(s_acc);
      course::wgmma_fence();
      issue_qk(j);
      course::wgmma_commit();
      issue_pv(j - 1, cur);
      course::wgmma_commit();
      course::wgmma_wait<1>();                           // S_j is done, and so is P V_{j-2}
      course::wgmma_fence_operand(s_acc);
      free_k(it + j);
      if (j >= 2) free_v(it + j - 2);
      if (j == n - 1 && signaller) course::mbar_arrive(&q_empty);
      move = softmax(j, alpha);                          // under P V_{j-1}
      to_a_fragment(nxt);
    };
    for (int j = 1; j < n; j += 2) {                     // two tiles an iteration: the buffers trade places
      step(j, p, pb);
      if (j + 1 >= n) break;
      step(j + 1, pb, p);
    }
    wait_v(it + n - 1);                                  // the last tile's P V
    course::wgmma_wait<0>();
    course::wgmma_fence_operand(o_acc);
    if (n >= 2) free_v(it + n - 2);
    if ((n - 1) & 1) {                                   // P_{n-1} is in pb
#pragma unroll
      for (int i = 0; i < BN / 8; ++i) p[i] = pb[i];
    }
    if (move) rescale_o(alpha);
    course::wgmma_fence_operand(o_acc);
    course::wgmma_fence();
    issue_pv(n - 1, p);
    course::wgmma_commit();
    course::wgmma_wait<0>();
    course::wgmma_fence_operand(o_acc);
    free_v(it + n - 1);
    it += n;

    // The epilogue: O · vd / l, bf16 pairs straight to global memory.
    float f[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float lr = quad_sum(l[r]);
      // BEGIN SOLUTION
      f[r] = lr > 0.f ? v_scale / lr : 0.f;
      // END SOLUTION
    }
    bf16_t* Oh = O + (size_t)w.qh * Sq * D;
#pragma unroll
    for (int i = 0; i < NO; i += 2) {
      const int row = w.r0 + rows + 8 * ((i >> 1) & 1), col = course::wgmma_acc_col(i);
      if (row < Sq)
        *reinterpret_cast<unsigned*>(Oh + (size_t)row * D + col) =
            course::pack_bf16x2(o_acc[i] * f[(i >> 1) & 1], o_acc[i + 1] * f[(i >> 1) & 1]);
    }
  }
}
