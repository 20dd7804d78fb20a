%%cuda f3 --arch sm_90a -k "flash3<F3<128, 1, 1, 1>>" -k "flash3<F3<64, 1, 1, 1>>" -k "flash3<F3<128, 0, 1, 1>>" -k "flash3<F3<128, 1, 0, 1>>" -k "flash3<F3<128, 1, 1, 0>>" -k "flash3<F3<128, 1, 1, 1, 2>>"
#include "course.cuh"      // the launch contract, smem_u32
#include "tma.cuh"         // TensorMap, mbarrier
#include "wgmma.cuh"       // smem descriptors, wgmma fence/commit/wait, wgmma (A and B in shared memory)
#include "pipeline.cuh"    // setmaxnreg, the bounded wait, mbar_arrive
#include "attention.cuh"   // ex2, quad_max / quad_sum, ref_point, bf16_t (chapter 04)
#include "flash3.cuh"      // the 3-D TMA load, the work units, wgmma with A from registers
using course::TensorMap;
using namespace attn;

// O (B, H, Sq, D) bf16 = softmax(Q Kᵀ / √D [+ causal mask]) V; Q (B, H, Sq, D), K and V (B, Hkv, Sk, D)
// bf16, row-major; query head h reads KV head h / (H / Hkv). The kernel is persistent: each CTA loops
// over work units of BM = 128 query rows of one (batch, head). Two CONSUMER warpgroups own 64 rows each:
// S = Q Kᵀ with wgmma (Q and K in shared memory), the online softmax in registers, O += P V with wgmma
// (P from registers, V in shared memory). A PRODUCER warpgroup (one thread) loads each unit's Q and
// streams K and V through a ring of STAGES slots with TMA; each slot of K and of V has a full and an
// empty mbarrier (05.03's ring), and so has Q, so the next unit's loads start while this one ends.
// Three compile-time switches, for the ablation:
//   WS       1: the producer warpgroup and setmaxnreg; 0: no producer, thread 0 of the first
//            consumer issues the loads between its own wgmmas (256 threads)
//   PINGPONG 1: the two consumers take turns to issue their wgmmas (turn[w] mbarriers), so one's
//            softmax runs while the other's wgmmas hold the tensor core
//   OVERLAP  1: inside a warpgroup, S_j = Q K_jᵀ and O += P_{j-1} V_{j-1} are issued together and
//            the softmax of S_j runs while P V is still on the tensor core (wait_group 1)
// STAGES_: the ring's slots (0, the default: 3; the ablation also times 2).
template <int D_, int WS_, int PINGPONG_, int OVERLAP_, int STAGES_ = 0>
struct F3 {
  static constexpr int D = D_, BM = 128, BN = 128, STAGES = STAGES_ ? STAGES_ : 3;
  static constexpr bool WS = WS_, PINGPONG = PINGPONG_, OVERLAP = OVERLAP_;
  static constexpr int CONSUMERS = 2;
  static constexpr int THREADS = 128 * (CONSUMERS + (WS ? 1 : 0));
  static constexpr int CHUNK_Q = BM * 128, CHUNK_KV = BN * 128;   // one 64-column (128-byte) box of a tile
  static constexpr int Q_BYTES = BM * D * 2, KV_BYTES = BN * D * 2;
  static constexpr int SMEM_BYTES = Q_BYTES + 2 * STAGES * KV_BYTES + 1024;   // + 1 KiB to align to the swizzle
  static constexpr int PRODUCER_REGS = 24, CONSUMER_REGS = 240;             // 128·24 + 256·240 ≤ 65536
  static constexpr int TILE_M = BM, TILE_N = BN, TILE_K = D;   // the launch contract (course.cuh)
  static_assert(D == 64 || D == 128, "head dim 64 or 128");
};

template <class C>
__global__ void __launch_bounds__(C::THREADS, 1)
flash3(const __grid_constant__ TensorMap q_map,    // Q as (B·H, Sq, D): boxes of 64 columns × BM rows × 1 head
       const __grid_constant__ TensorMap k_map,    // K as (B·Hkv, Sk, D): boxes of 64 columns × BN rows × 1 head
       const __grid_constant__ TensorMap v_map,    // V likewise
       bf16_t* __restrict__ O, int Sq, int Sk, int B, int H, int Hkv, int group, float scale_log2, int causal) {
  constexpr int D = C::D, BM = C::BM, BN = C::BN, S = C::STAGES;
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long q_full, q_empty, k_full[S], k_empty[S], v_full[S], v_empty[S], turn[2];
  unsigned char* q_tile = smem_raw + ((1024 - (course::smem_u32(smem_raw) & 1023)) & 1023);
  auto k_slot = [&](int s) { return q_tile + C::Q_BYTES + s * C::KV_BYTES; };
  auto v_slot = [&](int s) { return q_tile + C::Q_BYTES + (S + s) * C::KV_BYTES; };

  // Work unit u (u = blockIdx.x, + gridDim.x, ...): BM query rows of one (batch, head), `group` heads at
  // a time, causal: the longest block first; causal tiles above the diagonal skipped (flash3.cuh).
  const int mblocks = (Sq + BM - 1) / BM, units = mblocks * H * B;
  using Unit = course::Flash3Unit;
  auto unit = [&](int u) { return course::flash3_unit<BM, BN>(u, mblocks, Sk, B, H, Hkv, group, causal); };

  if (threadIdx.x == 0) {
    course::prefetch_tensormap(&q_map);
    course::prefetch_tensormap(&k_map);
    course::prefetch_tensormap(&v_map);
    course::mbar_init(&q_full, 1);
    course::mbar_init(&q_empty, C::CONSUMERS);
    for (int s = 0; s < S; ++s) {
      course::mbar_init(&k_full[s], 1);                  // the producer's arrive.expect_tx
      course::mbar_init(&v_full[s], 1);
      course::mbar_init(&k_empty[s], C::CONSUMERS);      // one arrival per consumer warpgroup
      course::mbar_init(&v_empty[s], C::CONSUMERS);
    }
    course::mbar_init(&turn[0], 4);                      // one arrival per warp of the other consumer
    course::mbar_init(&turn[1], 4);
    course::fence_mbarrier_init();
  }
  __syncthreads();

  // The producer's two jobs (one thread): a unit's Q once the consumers are done with the last one's
  // (its tq-th load), then key tile j of the unit -- the it-th over every unit -- into slot it % S,
  // once the consumers have released that slot's previous tile (it - S).
  auto load_q = [&](const Unit& w, int tq) {
    course::mbar_wait_or_trap(&q_empty, (tq & 1) ^ 1);
    course::mbar_arrive_expect_tx(&q_full, C::Q_BYTES);
    for (int c = 0; c < D / 64; ++c) course::tma_load_3d(q_tile + c * C::CHUNK_Q, &q_map, 64 * c, w.r0, w.qh, &q_full);
  };
  auto load_kv = [&](const Unit& w, int j, int it) {
    const int s = it % S, parity = ((it / S) & 1) ^ 1;
    course::mbar_wait_or_trap(&k_empty[s], parity);
    course::mbar_arrive_expect_tx(&k_full[s], C::KV_BYTES);
    for (int c = 0; c < D / 64; ++c) course::tma_load_3d(k_slot(s) + c * C::CHUNK_KV, &k_map, 64 * c, j * BN, w.kh, &k_full[s]);
    course::mbar_wait_or_trap(&v_empty[s], parity);
    course::mbar_arrive_expect_tx(&v_full[s], C::KV_BYTES);
    for (int c = 0; c < D / 64; ++c) course::tma_load_3d(v_slot(s) + c * C::CHUNK_KV, &v_map, 64 * c, j * BN, w.kh, &v_full[s]);
  };

  const int wg = threadIdx.x / 128 - (C::WS ? 1 : 0);   // consumer index 0, 1; -1: the producer
  if (wg < 0) {
    // ---------------------------------------------------------------- the producer warpgroup
    if constexpr (C::WS) {
      course::setmaxnreg_dec<C::PRODUCER_REGS>();
      if (threadIdx.x == 0 && Sk > 0) {
        int it = 0, tq = 0;
        for (int u = blockIdx.x; u < units; u += gridDim.x, ++tq) {
          const Unit w = unit(u);
          load_q(w, tq);
          for (int j = 0; j < w.n_tiles; ++j, ++it) load_kv(w, j, it);
        }
      }
    }
    return;
  }
  // ---------------------------------------------------------------- the consumer warpgroups
  if constexpr (C::WS) course::setmaxnreg_inc<C::CONSUMER_REGS>();
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
  const bool loader = !C::WS && threadIdx.x == 0;       // without WS: this thread issues the loads
  const bool signaller = threadIdx.x % 128 == 0;        // one thread releases slots for the warpgroup

  // Ping-pong: consumer w waits for its turn[w] phase k before issuing its k-th batch of wgmmas,
  // and hands the turn to the other consumer right after issuing them (one arrival per warp).
  int turns = 0;
  auto my_turn = [&] {
    if constexpr (C::PINGPONG) course::mbar_wait_or_trap(&turn[wg], turns & 1);
    ++turns;
  };
  auto pass_turn = [&] {
    if constexpr (C::PINGPONG) {
      if (lane == 0) course::mbar_arrive(&turn[wg ^ 1]);
    }
  };
  if (C::PINGPONG && wg == 1) pass_turn();               // consumer 0 goes first

  constexpr int NS = BN / 2, NO = D / 2;                 // a thread's floats of S (64 × BN) and of O (64 × D)
  float s_acc[NS], o_acc[NO];
  unsigned p[BN / 4];                                    // P rounded to bf16, two to a register
  float m[2], l[2];                                      // running max (log2 units) and partial sums of rows 0, 1
  Unit w;                                                // the unit being computed
  int it = 0;                                            // key tiles consumed before this unit (over every unit)

  auto issue_qk = [&](int j) {                           // S = Q K_jᵀ: D / 16 wgmmas m64n{BN}k16
    const int s = (it + j) % S;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const unsigned qa = course::smem_u32(q_tile) + (kk / 4) * C::CHUNK_Q + wg * 64 * 128 + 32 * (kk % 4);
      const unsigned kb = course::smem_u32(k_slot(s)) + (kk / 4) * C::CHUNK_KV + 32 * (kk % 4);
      course::wgmma_bf16<0, 0>(s_acc, course::make_smem_desc(qa, 16, 1024, course::DESC_SWIZZLE_128B),
                               course::make_smem_desc(kb, 16, 1024, course::DESC_SWIZZLE_128B), kk > 0 ? 1 : 0);
    }
  };
  auto issue_pv = [&](int j) {                           // O += P V_j: BN / 16 wgmmas m64n{D}k16, A from registers
    const unsigned vb = course::smem_u32(v_slot((it + j) % S));
    // BEGIN SOLUTION
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const unsigned a[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
      course::wgmma_rs_bf16<1>(o_acc, a, course::make_smem_desc(vb + 2048 * kk, C::CHUNK_KV, 1024,
                                                                course::DESC_SWIZZLE_128B));
    }
    // END SOLUTION
  };
  auto release = [&](unsigned long long* bar) {
    if (signaller) course::mbar_arrive(bar);
  };

  // The online softmax of S_j (scores in s_acc): mask, new row maxima, P = 2^(s·scale − m) in place,
  // row sums (each thread keeps its own share until the epilogue); returns the factors that rescale
  // what O and l held (O is rescaled once P V_{j-1} is done). The max is taken over the raw scores
  // and scaled once (scale > 0): one FMNMX an element, then one FFMA and one MUFU.EX2.
  auto softmax = [&](int j, float (&alpha)[2]) {
    const bool masked = j * BN + BN > Sk || (causal && j * BN + BN - 1 > w.r0 + 64 * wg);
    if (masked) {
#pragma unroll
      for (int i = 0; i < NS; ++i) {
        const int col = j * BN + course::wgmma_acc_col(i), row = w.r0 + rows + 8 * ((i >> 1) & 1);
        if (col >= Sk || (causal && col > row)) s_acc[i] = -INFINITY;
      }
    }
    float mx[2] = {s_acc[0], s_acc[2]};
#pragma unroll
    for (int i = 4; i < NS; i += 4) {
      mx[0] = fmaxf(mx[0], fmaxf(s_acc[i], s_acc[i + 1]));
      mx[1] = fmaxf(mx[1], fmaxf(s_acc[i + 2], s_acc[i + 3]));
    }
    mx[0] = fmaxf(mx[0], s_acc[1]);
    mx[1] = fmaxf(mx[1], s_acc[3]);
    float ref[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float mr = fmaxf(m[r], quad_max(mx[r]) * scale_log2);
      ref[r] = ref_point(mr);
      // BEGIN SOLUTION
      alpha[r] = ex2(m[r] - ref[r]);                     // 0 while the row had no score (m = -inf)
      // END SOLUTION
      m[r] = mr;
    }
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < NS; ++i) {
      s_acc[i] = ex2(fmaf(s_acc[i], scale_log2, -ref[(i >> 1) & 1]));
      sum[(i >> 1) & 1] += s_acc[i];
    }
    l[0] = l[0] * alpha[0] + sum[0];
    l[1] = l[1] * alpha[1] + sum[1];
  };
  auto rescale_o = [&](const float (&alpha)[2]) {      // skipped when no row of the warp has a new max
    if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#pragma unroll
    for (int i = 0; i < NO; ++i) o_acc[i] *= alpha[(i >> 1) & 1];
  };
  auto pack_p = [&] {
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) p[i] = course::pack_bf16x2(s_acc[2 * i], s_acc[2 * i + 1]);
  };
  // P V_t is done: O and P are ours again, and V_t's slot goes back to the producer (without WS, the
  // loader refills it at the end of the iteration, once it no longer holds the turn).
  auto pv_done = [&](int t) {
    course::wgmma_wait<0>();
    course::wgmma_fence_operand(o_acc);
    release(&v_empty[(it + t) % S]);
  };

  int tq = 0;                                            // units so far: Q's tq-th load
  for (int u = blockIdx.x; u < units; u += gridDim.x, ++tq) {
    w = unit(u);
    const int n = w.n_tiles;
    if (loader) {                                        // without WS: Q and the first S key tiles
      load_q(w, tq);
      for (int j = 0; j < min(S, n); ++j) load_kv(w, j, it + j);
    }
#pragma unroll
    for (int i = 0; i < NO; ++i) o_acc[i] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
    course::mbar_wait_or_trap(&q_full, tq & 1);
    float alpha[2];
    // tile 0: S_0 = Q K_0ᵀ, its softmax
    course::mbar_wait_or_trap(&k_full[it % S], (it / S) & 1);
    my_turn();
    course::wgmma_fence_operand(s_acc);
    course::wgmma_fence();
    issue_qk(0);
    course::wgmma_commit();
    pass_turn();
    course::wgmma_wait<0>();
    course::wgmma_fence_operand(s_acc);
    release(&k_empty[it % S]);
    if (n == 1) release(&q_empty);                       // the unit's last Q Kᵀ is done: Q may be replaced
    softmax(0, alpha);
    // tile j: O rescaled and P_{j-1} packed, then S_j = Q K_jᵀ and O += P_{j-1} V_{j-1} issued in one
    // turn; S_j's softmax runs while P V_{j-1} is still on the tensor core, and P V_{j-1} is waited for
    // only at the top of the next iteration -- after the waits on the barriers, which ptxas does not
    // move code across (with the wait at the end of this iteration, ptxas hoisted it above the softmax)
    for (int j = 1; j < n; ++j) {
      const int s = (it + j) % S, sp = (it + j - 1) % S;
      course::mbar_wait_or_trap(&k_full[s], ((it + j) / S) & 1);
      course::mbar_wait_or_trap(&v_full[sp], ((it + j - 1) / S) & 1);
      // BEGIN SOLUTION
      if (C::OVERLAP && j >= 2) pv_done(j - 2);          // P V_{j-2}, issued last iteration
      rescale_o(alpha);
      pack_p();
      my_turn();                                         // the turn is held only to issue
      course::wgmma_fence_operand(s_acc);
      course::wgmma_fence_operand(o_acc);
      course::wgmma_fence();
      issue_qk(j);
      course::wgmma_commit();
      issue_pv(j - 1);
      course::wgmma_commit();
      pass_turn();
      if constexpr (C::OVERLAP) course::wgmma_wait<1>();  // S_j is done; P V_{j-1} may still run
      else course::wgmma_wait<0>();
      course::wgmma_fence_operand(s_acc);
      release(&k_empty[s]);
      if (j == n - 1) release(&q_empty);
      if (!C::OVERLAP) pv_done(j - 1);
      softmax(j, alpha);                                   // under P V_{j-1} when OVERLAP
      // END SOLUTION
      const int refill = j - (C::OVERLAP ? 2 : 1) + S;     // without WS: the tile whose slot was just released
      if (loader && refill < n && (!C::OVERLAP || j >= 2)) load_kv(w, refill, it + refill);
    }
    // the last tile's P V
    const int last = (it + n - 1) % S;
    course::mbar_wait_or_trap(&v_full[last], ((it + n - 1) / S) & 1);
    if (C::OVERLAP && n >= 2) pv_done(n - 2);
    rescale_o(alpha);
    pack_p();
    my_turn();
    course::wgmma_fence_operand(o_acc);
    course::wgmma_fence();
    issue_pv(n - 1);
    course::wgmma_commit();
    pass_turn();
    pv_done(n - 1);
    it += n;

    // The epilogue: O / l, bf16 pairs straight to global memory.
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float lr = quad_sum(l[r]);
      inv[r] = lr > 0.f ? 1.f / lr : 0.f;
    }
    bf16_t* Oh = O + (size_t)w.qh * Sq * D;
#pragma unroll
    for (int i = 0; i < NO; i += 2) {
      const int row = w.r0 + rows + 8 * ((i >> 1) & 1), col = course::wgmma_acc_col(i);
      if (row < Sq)
        *reinterpret_cast<unsigned*>(Oh + (size_t)row * D + col) =
            course::pack_bf16x2(o_acc[i] * inv[(i >> 1) & 1], o_acc[i + 1] * inv[(i >> 1) & 1]);
    }
  }
}
