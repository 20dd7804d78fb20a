// Tunable bf16 GEMM for dev/ch03_gemm/tune_hgemm.py: C (M, N) = A (M, K) · B (K, N), all row-major,
// bf16 in (as 16-bit words), fp32 accumulation, bf16 out. mma.sync m16n8k16 + ldmatrix (x4, x4.trans)
// + cp.async multistage pipeline + XOR-swizzled shared memory + grouped block order.
// The configuration comes from #defines that tune_hgemm.py puts in front of this file (after
// `#include "course.cuh"`, which must come first: its launch contract names a member STAGES):
//   BM BN BK        block tile            WARPS_M WARPS_N  warp grid (warp tile BM/WARPS_M × BN/WARPS_N:
//                   any multiple of 16 × 16, e.g. 64×64, 96×64 (MT 6), 64×96 (NT 12), 80×64)
//   STAGES          cp.async stages
//   FRAG_DB         0: each k16 step loads its fragments, then multiplies (ptxas overlaps what registers allow)
//                   1: ldmatrix of k16 step ks+1 (A and B) before the mmas of ks, across the tile boundary too
//                   2: half: only B is double-buffered (step ks+1's B before the mmas of ks); A is loaded
//                      one m16 row at a time inside the step. The stage refill then moves after the barrier
//                      (A of a tile's last step is read after it), so one tile less is in flight: STAGES >= 3
//   EPI_SMEM        1: C staged through shared memory, 16-byte stores
//   MINB            __launch_bounds__ min blocks per SM       GROUP  block-swizzle group height (tiles)
//   L2PF            0: cp.async.cg; 128/256: + .L2::128B / .L2::256B prefetch hint      (default 0)
//   ORDER           mma issue order: 0 m-tiles outer, n serpentine; 1 n-tiles outer, m serpentine (default 0)
//   PRED            1: the refill of the main loop is never skipped by a branch: past the last tile it copies
//                   the last tile again with cp.async's src-size 0 (no global read, zeros into a stage that is
//                   never multiplied), so ptxas can interleave it with the mmas (default 0: `if (next < KT)`)
//   BAR_ROW         FRAG_DB 2: the m16 row of the last k16 step after whose A load the barrier sits
//                   (default MT / 2: that row's mmas and the rest follow the barrier without a load)
//   DRAIN           FRAG_DB 1: 1 = refills without a bounds test from running source pointers, then a
//                   drain loop over the last STAGES-1 tiles that only multiplies (default 0)
//   SPLIT           DRAIN 1: each stage is copied as two cp.async groups, A in the first k16 step and B in
//                   the last (after its barrier), so a warp's copies are spread over the k tile (default 0)
//   PERSIST         1: also define hgemm_persistent (end of file): one block per SM loops over tiles, its
//                   pipeline running across tile boundaries; launch it with min(tiles, SMs) blocks (default 0)
//   WS              n = 1..4: also define hgemm_ws (end of file): 8 multiplier warps + a copier warpgroup of
//                   which n warps copy, stages handed over by mbarriers; PERSIST 1: min(tiles, SMs) blocks (default 0)
// A and B must be padded (zeros) to multiples of BM/BK and BK/BN; C is M × N exactly (stores guarded).
// BN must be a multiple of 64 (the B swizzle XORs within groups of 8 chunks). When THREADS is not a
// multiple of 8 · BN/8 (BN = 192: 24 chunks a row), B is copied in 64-column slabs instead (B_SLAB below).
// The launch contract (grader/cuda/launch.py): each kernel is a template over a configuration type
// (Tuned, Persistent, WarpSpecialized below) stating its THREADS, SMEM_BYTES and TILE_M/N/K, and is
// compiled by name expression (hgemm_tuned<Tuned>, ...): the host reads its block size, dynamic shared
// memory and tile from the cubin (course::launch_shape<Cfg>) and launches it with
// grader.problems.gemm.tiled_launch. Nothing about the launch is computed a second time in Python.

#ifndef L2PF
#define L2PF 0
#endif
#ifndef ORDER
#define ORDER 0
#endif
#ifndef DRAIN
#define DRAIN 0
#endif
#ifndef PERSIST
#define PERSIST 0
#endif
#ifndef PRED
#define PRED 0
#endif
#ifndef WS
#define WS 0
#endif
#ifndef SPLIT
#define SPLIT 0
#endif

constexpr int THREADS = WARPS_M * WARPS_N * 32;
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
constexpr int MT = WM / 16, NT = WN / 8, KS = BK / 16;
constexpr int ACH = BK / 8, BCH = BN / 8;              // 16-byte chunks per smem row of A / B
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BK * BN * 2, STAGE_BYTES = A_BYTES + B_BYTES;
// cp.async passes per thread per stage; the last pass of A may be partial (BM = 160: 2.5 passes)
constexpr int A_PER = (BM * ACH + THREADS - 1) / THREADS;
constexpr bool A_EVEN = BM * ACH % THREADS == 0;
constexpr int A_ROWS_PER_PASS = THREADS / ACH;
// B: rows of BCH chunks when THREADS / BCH is a whole multiple of 8 rows (the swizzle repeats every
// pass); otherwise (B_SLAB) 64-column slabs: thread tid copies chunk tid % 8 of slab-row tid / 8 +
// i · THREADS / 8, slab-rows numbered slab-major (BK of them per 64-column slab).
constexpr bool B_SLAB = (THREADS % BCH != 0) || ((THREADS / BCH) % 8 != 0);
constexpr int B_ROWS_PER_PASS = B_SLAB ? 0 : THREADS / BCH;
constexpr int B_VR = THREADS / 8;                        // slab-rows per pass (B_SLAB)
constexpr int B_PER = (BK * BCH + THREADS - 1) / THREADS;
constexpr bool B_EVEN = BK * BCH % THREADS == 0;
constexpr int EPI_PITCH = BN + 8;                       // bf16 per staged C row (+16 B: no bank conflicts)
constexpr int EPI_BYTES = BM * EPI_PITCH * 2;            // the staged C tile
constexpr int EPI_ITERS = (BM * BCH + THREADS - 1) / THREADS;

// hgemm_tuned's launch: the stages, whose shared memory the staged C tile reuses (EPI_SMEM)
struct Tuned {
  static constexpr int THREADS = ::THREADS, TILE_M = BM, TILE_N = BN, TILE_K = BK;
  static constexpr int SMEM_BYTES = EPI_SMEM && EPI_BYTES > STAGES * STAGE_BYTES ? EPI_BYTES : STAGES * STAGE_BYTES;
};

static_assert(WM * WARPS_M == BM && WN * WARPS_N == BN, "warp grid must tile the block");
static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile: m16 tiles, pairs of n8 tiles (one ldmatrix x4.trans)");
static_assert(ACH == 4 || ACH == 8, "BK must be 32 or 64");
static_assert(BCH % 8 == 0, "BN must be a multiple of 64");
static_assert(THREADS % ACH == 0 && A_ROWS_PER_PASS % 8 == 0, "A swizzle must repeat across passes");
static_assert(!B_SLAB || (THREADS % 64 == 0 && (B_VR % BK == 0 || BK % B_VR == 0)),
              "B slabs: the slab-row step must be a multiple of 8 and divide BK (or BK divide it)");
static_assert(KS % 2 == 0 || FRAG_DB != 1, "fragment double buffering pairs k16 steps");
static_assert(FRAG_DB != 2 || (STAGES >= 3 && KS >= 2), "half double buffering refills after the barrier");

// physical chunk of logical chunk c in row r (ldmatrix's 8 rows hit 8 different 16-byte bank groups)
__device__ __forceinline__ int swz_a(int r, int c) { return ACH == 8 ? (c ^ (r & 7)) : (c ^ ((r >> 1) & 3)); }
__device__ __forceinline__ int swz_b(int r, int c) { return c ^ (r & 7); }

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void cp_async16(unsigned saddr, const void* g) {
#if L2PF == 256
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" :: "r"(saddr), "l"(g) : "memory");
#elif L2PF == 128
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" :: "r"(saddr), "l"(g) : "memory");
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(saddr), "l"(g) : "memory");
#endif
}
// src_size 0: nothing is read from global memory, the 16 bytes of shared memory are zero-filled
__device__ __forceinline__ void cp_async16_zfill(unsigned saddr, const void* g, unsigned src_size) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(saddr), "l"(g), "r"(src_size) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }

// ---- pieces both kernels share
// grouped block order: GROUP tile-rows walked column by column share A rows / B columns in L2
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int& bm, int& bn) {
  const int per_group = GROUP * tiles_n, first_m = (t / per_group) * GROUP;
  const int group_m = min(tiles_m - first_m, GROUP);
  bm = first_m + (t % per_group) % group_m;
  bn = (t % per_group) / group_m;
}

// k-steps a block walks when it takes tiles blockIdx.x, +gridDim.x, … (the looping kernels)
__device__ __forceinline__ int block_k_steps(int ntiles, int KT) {
  return ((ntiles - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x) * KT;
}

__device__ __forceinline__ void zero_acc(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;
}

// per-thread ldmatrix byte offsets inside a stage. A: lanes 0-15 rows 0-15 of k 0-7, lanes 16-31
// k 8-15, + i·16 rows (swizzle-invariant). B (trans): rows k (+16·ks, swizzle-invariant), two n8
// tiles per x4.
__device__ __forceinline__ void frag_offsets(unsigned (&a_ld)[KS], unsigned (&b_ld)[NT / 2], int wm, int wn,
                                             int lane) {
  {
    const int r = wm + (lane & 15);
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) a_ld[ks] = r * (BK * 2) + swz_a(r, 2 * ks + (lane >> 4)) * 16;
  }
  {
    const int r = (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int jj = 0; jj < NT / 2; ++jj)
      b_ld[jj] = A_BYTES + r * (BN * 2) + swz_b(r, wn / 8 + 2 * jj + (lane >> 4)) * 16;
  }
}

__device__ __forceinline__ void load_frags(unsigned (&a)[MT][4], unsigned (&b)[NT][2], const unsigned (&a_ld)[KS],
                                           const unsigned (&b_ld)[NT / 2], unsigned stage_base, int ks) {
#pragma unroll
  for (int i = 0; i < MT; ++i) ldsm_x4(a[i], stage_base + a_ld[ks] + i * 16 * BK * 2);
#pragma unroll
  for (int jj = 0; jj < NT / 2; ++jj)
    ldsm_x4_t(b[2 * jj][0], b[2 * jj][1], b[2 * jj + 1][0], b[2 * jj + 1][1], stage_base + b_ld[jj] + ks * 16 * BN * 2);
}

// one k16 step of the warp tile, in the ORDER the configuration asks for
__device__ __forceinline__ void warp_mmas(float (&acc)[MT][NT][4], const unsigned (&a)[MT][4],
                                          const unsigned (&b)[NT][2]) {
#if ORDER == 1
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const int ii = (j & 1) ? MT - 1 - i : i;   // serpentine over m: neighbouring mmas share a fragment
      mma_bf16(acc[ii][j], a[ii], b[j]);
    }
#else
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int jj = (i & 1) ? NT - 1 - j : j;   // serpentine: neighbouring mmas share a fragment
      mma_bf16(acc[i][jj], a[i], b[jj]);
    }
#endif
}

// the warp's accumulators, rounded to bf16, into the staged C tile (pitch EPI_PITCH)
__device__ __forceinline__ void stage_c(unsigned short* sc, const float (&acc)[MT][NT][4], int wm, int wn, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        unsigned packed;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(acc[i][j][2 * h + 1]), "f"(acc[i][j][2 * h]));
        *reinterpret_cast<unsigned*>(sc + (wm + 16 * i + g + 8 * h) * EPI_PITCH + wn + 8 * j + 2 * t) = packed;
      }
}

// the staged C tile to C at (m0, n0): 16-byte stores inside C, element stores at its edges
template <int UNROLL>
__device__ __forceinline__ void store_c(const unsigned short* sc, unsigned short* C, int M, int N, int m0, int n0,
                                        int tid) {
  const bool vec = (m0 + BM <= M) && (n0 + BN <= N) && (N % 8 == 0);
#pragma unroll UNROLL
  for (int it = 0; it < EPI_ITERS; ++it) {
    const int idx = tid + it * THREADS, r = idx / BCH, c = idx % BCH;
    if (BM * BCH % THREADS != 0 && idx >= BM * BCH) break;
    const uint4 v = *reinterpret_cast<const uint4*>(sc + r * EPI_PITCH + 8 * c);
    unsigned short* dst = C + (size_t)(m0 + r) * N + n0 + 8 * c;
    if (vec) {
      *reinterpret_cast<uint4*>(dst) = v;
    } else if (m0 + r < M) {
      const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (n0 + 8 * c + e < N) dst[e] = (unsigned short)(w[e / 2] >> (16 * (e % 2)));
    }
  }
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, MINB)
hgemm_tuned(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
            unsigned short* __restrict__ C, int M, int N, int K, int lda, int ldb, int tiles_m, int tiles_n) {
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;

  int bm, bn;
  tile_coords(blockIdx.x, tiles_m, tiles_n, bm, bn);

  // ---- per-thread copy addresses (the swizzle repeats every pass: computed once)
  const int a_r = tid / ACH, a_c = tid % ACH;
  const unsigned a_soff = a_r * (BK * 2) + swz_a(a_r, a_c) * 16;
  const unsigned short* gA = A + (size_t)(bm * BM + a_r) * lda + 8 * a_c;
  const int KT = K / BK;
  const bool a_last = A_EVEN || a_r + (A_PER - 1) * A_ROWS_PER_PASS < BM;   // partial last pass of A
  // B, row mode: row b_r (+ i · B_ROWS_PER_PASS), chunk b_c. Slab mode: slab-row v = tid / 8 is row
  // v % BK of slab v / BK, chunk tid % 8 of the slab; pass i adds i · B_VR slab-rows, which (B_VR and
  // BK dividing one another) adds (i · B_VR) % BK rows and (i · B_VR) / BK slabs, keeping row % 8.
  const int b_r = B_SLAB ? (tid / 8) % BK : tid / BCH;
  const int b_c = B_SLAB ? ((tid / 8) / BK) * 8 + tid % 8 : tid % BCH;
  const unsigned b_soff = A_BYTES + b_r * (BN * 2) + swz_b(b_r, b_c) * 16;
  const unsigned short* gB = B + (size_t)b_r * ldb + bn * BN + 8 * b_c;
  const bool b_last = B_EVEN || (B_SLAB ? tid / 8 + (B_PER - 1) * B_VR < BK * (BCH / 8)
                                        : b_r + (B_PER - 1) * B_ROWS_PER_PASS < BK);

  // src_size: 16, or 0 (PRED refill past the last tile: kt is then a valid tile, nothing is read)
  // parts: 1 = A's copies, 2 = B's, 3 = both
  auto load_from = [&](unsigned stage_base, const unsigned short* ga, const unsigned short* gb,
                       unsigned src_size = 16, int parts = 3) {
    auto cp = [&](unsigned sa, const void* g) {
      if (PRED) cp_async16_zfill(sa, g, src_size);
      else cp_async16(sa, g);
    };
#pragma unroll
    for (int i = 0; i < A_PER; ++i)
      if ((parts & 1) && (i < A_PER - 1 || a_last))
        cp(stage_base + a_soff + i * A_ROWS_PER_PASS * BK * 2, ga + (size_t)i * A_ROWS_PER_PASS * lda);
#pragma unroll
    for (int i = 0; i < B_PER; ++i) {
      const int dr = B_SLAB ? (i * B_VR) % BK : i * B_ROWS_PER_PASS;    // rows added by pass i
      const int ds = B_SLAB ? (i * B_VR) / BK : 0;                      // 64-column slabs added
      if ((parts & 2) && (i < B_PER - 1 || b_last))
        cp(stage_base + b_soff + dr * BN * 2 + ds * 128, gb + (size_t)dr * ldb + 64 * ds);
    }
  };
  auto load_stage = [&](unsigned stage_base, int kt, unsigned src_size = 16, int parts = 3) {
    load_from(stage_base, gA + kt * BK, gB + (size_t)kt * BK * ldb, src_size, parts);
  };
  // the main loop's refill of tile `next` (none past the last tile; PRED: a zero-size copy instead)
  auto refill = [&](unsigned stage_base, int next) {
    if (PRED) load_stage(stage_base, min(next, KT - 1), next < KT ? 16u : 0u);
    else if (next < KT) load_stage(stage_base, next);
  };

  unsigned a_ld[KS], b_ld[NT / 2];   // ldmatrix byte offsets inside a stage
  frag_offsets(a_ld, b_ld, wm, wn, lane);

  float acc[MT][NT][4];
  zero_acc(acc);


#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (SPLIT) {                     // two groups a stage (A's, then B's), as the main loop commits them
      if (s < KT) load_stage(sbase + s * STAGE_BYTES, s, 16, 1);
      cp_commit();
      if (s < KT) load_stage(sbase + s * STAGE_BYTES, s, 16, 2);
      cp_commit();
      continue;
    }
    if (s < KT) load_stage(sbase + s * STAGE_BYTES, s);
    cp_commit();
  }
  unsigned rd = sbase, wr = sbase + (STAGES - 1) * STAGE_BYTES;
  const unsigned send = sbase + STAGES * STAGE_BYTES;

#if FRAG_DB == 1 && DRAIN
  // the steady state refills without a test, from running source pointers; the last STAGES-1 tiles
  // only multiply (their empty commits keep the group count the waits expect)
  unsigned af[2][MT][4], bf[2][NT][2];
  const unsigned short* ra = gA + (STAGES - 1) * BK;
  const unsigned short* rb = gB + (size_t)(STAGES - 1) * BK * ldb;
  const size_t rb_step = (size_t)BK * ldb;
  // groups that may still be in flight when a tile must have landed: STAGES - 2 (one group a stage);
  // SPLIT (two a stage, B's committed after the barrier that waits): 2·STAGES - 5, and 2·STAGES - 4
  // before the loop (tile 0)
  static_assert(!SPLIT || (STAGES >= 3 && KS >= 2), "SPLIT: A and B in different k16 steps");
  cp_wait<SPLIT ? 2 * STAGES - 4 : STAGES - 2>();
  __syncthreads();
  load_frags(af[0], bf[0], a_ld, b_ld, rd, 0);
  int kt = 0;
#define HG_KTILE(FILL)                                                              \
  _Pragma("unroll") for (int ks = 0; ks < KS; ++ks) {                              \
    if (ks == KS - 1) {                                                             \
      cp_wait<SPLIT ? 2 * STAGES - 5 : STAGES - 2>();                               \
      __syncthreads();                                                              \
      rd += STAGE_BYTES;                                                            \
      if (rd == send) rd = sbase;                                                   \
    }                                                                               \
    load_frags(af[(ks + 1) & 1], bf[(ks + 1) & 1], a_ld, b_ld, rd, (ks + 1) % KS);  \
    if (ks == 0) {                                                                  \
      if (FILL) load_from(wr, ra, rb, 16, SPLIT ? 1 : 3);                           \
      cp_commit();                                                                  \
    }                                                                               \
    if (ks == (SPLIT ? KS - 1 : 0)) {                                               \
      if (SPLIT) {                                                                  \
        if (FILL) load_from(wr, ra, rb, 16, 2);                                     \
        cp_commit();                                                                \
      }                                                                             \
      if (FILL) { ra += BK; rb += rb_step; }                                        \
      wr += STAGE_BYTES;                                                            \
      if (wr == send) wr = sbase;                                                   \
    }                                                                               \
    warp_mmas(acc, af[ks & 1], bf[ks & 1]);                                         \
  }
  for (; kt < KT - (STAGES - 1); ++kt) { HG_KTILE(true) }
  for (; kt < KT; ++kt) { HG_KTILE(false) }
#undef HG_KTILE
#elif FRAG_DB == 1
  unsigned af[2][MT][4], bf[2][NT][2];
  cp_wait<STAGES - 2>();
  __syncthreads();
  load_frags(af[0], bf[0], a_ld, b_ld, rd, 0);
  for (int kt = 0; kt < KT; ++kt) {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      if (ks == KS - 1) {          // next tile landed (everyone's copies); stage kt-1 is free to refill
        cp_wait<STAGES - 2>();
        __syncthreads();
        rd += STAGE_BYTES;
        if (rd == send) rd = sbase;
      }
      load_frags(af[(ks + 1) & 1], bf[(ks + 1) & 1], a_ld, b_ld, rd, (ks + 1) % KS);
      if (ks == 0) {
        refill(wr, kt + STAGES - 1);
        cp_commit();
        wr += STAGE_BYTES;
        if (wr == send) wr = sbase;
      }
      warp_mmas(acc, af[ks & 1], bf[ks & 1]);
    }
  }
#elif FRAG_DB == 2
  // B fragments double-buffered (step ks+1's are loaded before step ks's mmas, across the tile
  // boundary too), A fragments one m16 row at a time: MT·4 + 2·NT·2 fragment registers instead of
  // 2·(MT·4 + NT·2). A of a tile's last step is read after that step's barrier, so the stage of tile
  // kt-1 is refilled after barrier kt (every read of tile kt-1 came before it in every thread), not
  // at step 0: one tile less in flight. Committed groups at the wait in tile kt: STAGES-1 + kt (tiles
  // 0 .. kt+STAGES-2), so tile kt+1 is complete when at most STAGES-3 are pending.
  // The barrier sits in the last step before the mmas of row BAR_ROW (whose A fragment and row
  // BAR_ROW+1's are loaded before it): those mmas need nothing loaded after the barrier.
#ifndef BAR_ROW
#define BAR_ROW (MT / 2)
#endif
  static_assert(BAR_ROW >= 0 && BAR_ROW < MT, "BAR_ROW");
  unsigned bf[2][NT][2];
  auto load_b = [&](unsigned (&b)[NT][2], unsigned stage_base, int ks) {
#pragma unroll
    for (int jj = 0; jj < NT / 2; ++jj)
      ldsm_x4_t(b[2 * jj][0], b[2 * jj][1], b[2 * jj + 1][0], b[2 * jj + 1][1],
                stage_base + b_ld[jj] + ks * 16 * BN * 2);
  };
  // A rows are software-pipelined one ahead: row i+1's fragment (the next step's / next tile's row 0
  // at the end) is loaded before the mmas of row i, so no loop iteration starts on a bare ldmatrix.
  static_assert(KS % 2 == 0, "B fragment buffers alternate over the k16 steps of a tile");
  unsigned ab[2][4];
  cp_wait<STAGES - 2>();
  __syncthreads();
  load_b(bf[0], rd, 0);
  ldsm_x4(ab[0], rd + a_ld[0]);
  for (int kt = 0; kt < KT; ++kt) {
    const unsigned cur = rd;                       // the stage of tile kt (rd moves on in the last step)
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      if (ks < KS - 1) load_b(bf[(ks + 1) & 1], cur, ks + 1);
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const int p = (ks * MT + i) & 1;
        if (i < MT - 1) ldsm_x4(ab[p ^ 1], cur + a_ld[ks] + (i + 1) * 16 * BK * 2);
        else if (ks < KS - 1) ldsm_x4(ab[p ^ 1], cur + a_ld[ks + 1]);
        if (ks == KS - 1 && i == BAR_ROW) {
          cp_wait<STAGES - 3>();                   // tile kt+1 landed (everyone's copies, after the barrier)
          __syncthreads();                         // and every read of tile kt-1 is done: refill its stage
          refill(wr, kt + STAGES - 1);
          cp_commit();
          wr += STAGE_BYTES;
          if (wr == send) wr = sbase;
          rd += STAGE_BYTES;
          if (rd == send) rd = sbase;
          load_b(bf[(ks + 1) & 1], rd, 0);         // tile kt+1, step 0
        }
        if (ks == KS - 1 && i == MT - 1) ldsm_x4(ab[p ^ 1], rd + a_ld[0]);   // tile kt+1, step 0, row 0
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const int jj = (i & 1) ? NT - 1 - j : j;
          mma_bf16(acc[i][jj], ab[p], bf[ks & 1][jj]);
        }
      }
    }
  }
#else
  for (int kt = 0; kt < KT; ++kt) {
    cp_wait<STAGES - 2>();
    __syncthreads();
    refill(wr, kt + STAGES - 1);
    cp_commit();
    wr += STAGE_BYTES;
    if (wr == send) wr = sbase;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      unsigned a[MT][4], b[NT][2];
      load_frags(a, b, a_ld, b_ld, rd, ks);
      warp_mmas(acc, a, b);
    }
    rd += STAGE_BYTES;
    if (rd == send) rd = sbase;
  }
#endif
  cp_wait<0>();

  const int m0 = bm * BM, n0 = bn * BN;
#if EPI_SMEM
  __syncthreads();                                  // every warp is done reading the stages
  unsigned short* sc = reinterpret_cast<unsigned short*>(smem);
  stage_c(sc, acc, wm, wn, lane);
  __syncthreads();
  store_c<EPI_ITERS>(sc, C, M, N, m0, n0, tid);
#else
  const int g = lane >> 2, t = lane & 3;
  const bool pairs = (m0 + BM <= M) && (n0 + BN <= N) && (N % 2 == 0);
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + wm + 16 * i + g + 8 * h, n = n0 + wn + 8 * j + 2 * t;
        unsigned packed;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(acc[i][j][2 * h + 1]), "f"(acc[i][j][2 * h]));
        if (pairs) {
          *reinterpret_cast<unsigned*>(C + (size_t)m * N + n) = packed;
        } else if (m < M) {
          if (n < N) C[(size_t)m * N + n] = (unsigned short)(packed & 0xFFFF);
          if (n + 1 < N) C[(size_t)m * N + n + 1] = (unsigned short)(packed >> 16);
        }
      }
#endif
}

#if PERSIST
// Persistent variant: one block per SM walks tiles blockIdx.x, +gridDim.x, … and its cp.async pipeline
// runs straight across tile boundaries (the next tile's first stages load while this tile finishes and
// writes C). C is staged in its own shared-memory region after the stages. FRAG_DB path only.
static_assert(FRAG_DB == 1 && A_EVEN && B_EVEN && !B_SLAB && EPI_SMEM,
              "the persistent kernel: full fragment double buffering, whole load passes, staged C");

// its launch: the stages, then the staged C tile; launched with min(tiles, SMs) blocks
struct Persistent {
  static constexpr int THREADS = ::THREADS, TILE_M = BM, TILE_N = BN, TILE_K = BK;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + EPI_BYTES;
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
hgemm_persistent(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                 unsigned short* __restrict__ C, int M, int N, int K, int lda, int ldb, int tiles_m, int tiles_n) {
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
  unsigned short* sc = reinterpret_cast<unsigned short*>(smem + STAGES * STAGE_BYTES);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;
  const int KT = K / BK, ntiles = tiles_m * tiles_n;
  const int total = block_k_steps(ntiles, KT);



  const int a_r = tid / ACH, a_c = tid % ACH, b_r = tid / BCH, b_c = tid % BCH;
  const unsigned a_soff = a_r * (BK * 2) + swz_a(a_r, a_c) * 16;
  const unsigned b_soff = A_BYTES + b_r * (BN * 2) + swz_b(b_r, b_c) * 16;

  // the loader's position: tile ld_t, k-step ld_kt, and its thread's first source element of A and B
  int ld_t = blockIdx.x, ld_kt = 0, ld_left = total;
  const unsigned short *ga, *gb;
  auto ld_point = [&]() {
    int bm, bn;
    tile_coords(ld_t, tiles_m, tiles_n, bm, bn);
    ga = A + (size_t)(bm * BM + a_r) * lda + 8 * a_c;
    gb = B + (size_t)b_r * ldb + bn * BN + 8 * b_c;
  };
  ld_point();
  auto load_next = [&](unsigned stage_base) {     // one k-step into stage_base (if any left), then advance
    if (ld_left > 0) {
#pragma unroll
      for (int i = 0; i < A_PER; ++i)
        cp_async16(stage_base + a_soff + i * A_ROWS_PER_PASS * BK * 2, ga + (size_t)i * A_ROWS_PER_PASS * lda);
#pragma unroll
      for (int i = 0; i < B_PER; ++i)
        cp_async16(stage_base + b_soff + i * B_ROWS_PER_PASS * BN * 2, gb + (size_t)i * B_ROWS_PER_PASS * ldb);
      --ld_left;
      ga += BK;
      gb += (size_t)BK * ldb;
      if (++ld_kt == KT) {
        ld_kt = 0;
        ld_t += gridDim.x;
        if (ld_left > 0) ld_point();
      }
    }
    cp_commit();
  };

  unsigned a_ld[KS], b_ld[NT / 2];
  frag_offsets(a_ld, b_ld, wm, wn, lane);

  float acc[MT][NT][4];
  zero_acc(acc);


  auto epilogue = [&](int tile) {                 // acc → bf16 → staged C → 16-byte stores
    int bm, bn;
    tile_coords(tile, tiles_m, tiles_n, bm, bn);
    stage_c(sc, acc, wm, wn, lane);
    __syncthreads();        // (the previous tile's reads of sc ended before this tile's k-step barriers)
    store_c<4>(sc, C, M, N, bm * BM, bn * BN, tid);
  };


#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) load_next(sbase + s * STAGE_BYTES);
  unsigned rd = sbase, wr = sbase + (STAGES - 1) * STAGE_BYTES;
  const unsigned send = sbase + STAGES * STAGE_BYTES;

  unsigned af[2][MT][4], bf[2][NT][2];
  cp_wait<STAGES - 2>();
  __syncthreads();
  load_frags(af[0], bf[0], a_ld, b_ld, rd, 0);
  int kt = 0, tile = blockIdx.x;
  for (int step = 0; step < total; ++step) {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      if (ks == KS - 1) {
        cp_wait<STAGES - 2>();
        __syncthreads();
        rd += STAGE_BYTES;
        if (rd == send) rd = sbase;
      }
      load_frags(af[(ks + 1) & 1], bf[(ks + 1) & 1], a_ld, b_ld, rd, (ks + 1) % KS);   // may be the next tile's k 0
      if (ks == 0) {
        load_next(wr);
        wr += STAGE_BYTES;
        if (wr == send) wr = sbase;
      }
      warp_mmas(acc, af[ks & 1], bf[ks & 1]);
    }
    if (++kt == KT) {
      epilogue(tile);
      zero_acc(acc);
      kt = 0;
      tile += gridDim.x;
    }
  }
  cp_wait<0>();
}
#endif

#if WS
// Warp-specialized variant (sm_90a: setmaxnreg): warps 0 .. NCW-1 only multiply (ldmatrix + mma,
// fragment double buffering as in hgemm_tuned); warps NCW .. NCW+WS_COPIERS-1 only copy (every cp.async
// of the block). The copiers sit in a warpgroup of their own (warps NCW .. NCW+3) that
// gives its registers back (setmaxnreg.dec), so the multipliers can take WS_REGS (208) each (setmaxnreg.inc)
// although 12 warps were launched; a 9th warp alone would put 3 warps on one SM sub-partition and
// cap every thread at 168 registers. (One copier warp alone is too slow: its 48 cp.async per stage
// issue one after another; the H200 run of round 5 gave 36 % of cuBLAS.) The stages change hands through
// mbarriers instead of __syncthreads: full[s] completes when the WS_CT copier threads' copies into stage s have landed
// (cp.async.mbarrier.arrive.noinc), empty[s] when all NCW multiplier warps have read it. Tiles
// blockIdx.x, +gridDim.x, …: a grid of min(tiles, SMs) makes it persistent (the copier runs into the
// next tile while the multipliers write C, staged in its own region after the stages).
static_assert(EPI_SMEM && KS >= 2 && KS % 2 == 0 && !B_SLAB, "the warp-specialized kernel: staged C, BK >= 32, B in rows");
constexpr int NCW = WARPS_M * WARPS_N;                    // multiplier warps; the copier is warp NCW
static_assert(NCW % 4 == 0, "multipliers fill whole warpgroups");
constexpr int WS_THREADS = THREADS + 128;
#ifndef WS_CP_UNROLL
#define WS_CP_UNROLL 4   // unroll of the copier's copy loops (fewer live addresses)
#endif
constexpr int kCpUnroll = WS_CP_UNROLL;
#ifndef WS_REGS
#define WS_REGS 208
#endif
// the block's register pool is what it was launched with (65536 / WS_THREADS, in steps of 8, per
// thread); setmaxnreg.inc waits until the pool has the registers, so the copier warpgroup must free them
constexpr int WS_LAUNCH_REGS = 65536 / WS_THREADS / 8 * 8;
constexpr int WS_COPIER_REGS = (WS_LAUNCH_REGS * WS_THREADS / 32 - NCW * WS_REGS) / 4 / 8 * 8;
static_assert(WS_COPIER_REGS >= 24, "multiplier registers leave the copier too few");
constexpr int WS_COPIERS = WS;      // warps of the copier warpgroup that copy (the others leave at once)
constexpr int WS_CT = 32 * WS_COPIERS;                       // copier threads
constexpr int A_LANE = BM * ACH / WS_CT, B_LANE = BK * BCH / WS_CT;   // 16-byte chunks per copier thread per stage
static_assert(BM * ACH % WS_CT == 0 && BK * BCH % WS_CT == 0 && WS_CT % BCH == 0, "whole copier passes");

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
// waits for the phase of parity `parity` to complete. WATCHDOG (the copier's waits: every deadlock of
// this pipeline leaves the copier waiting for an empty stage): past 2^22 polls (seconds) it traps, so a broken
// pipeline fails its launch instead of hanging the sweep. (The multipliers' waits have no counter: at
// 208 registers one more live register spills.)
template <bool WATCHDOG = false>
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  if (!WATCHDOG) {
    asm volatile("{\n\t.reg .pred done;\n"
                 "WS_WAIT:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
                 "@!done bra WS_WAIT;\n}\n" :: "r"(bar), "r"(parity) : "memory");
    return;
  }
  for (unsigned polls = 0;; ++polls) {
    unsigned done;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    if (done) return;
    if (polls > (1u << 22)) __trap();
  }
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void cp_async_arrive(unsigned bar) {    // arrives once this thread's copies land
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void bar_consumers() {                 // named barrier 1: multiplier warps only
  asm volatile("bar.sync 1, %0;\n" :: "n"(THREADS) : "memory");
}

// its launch: 8 multiplier warps + the copier warpgroup; the stages, the staged C tile, then the full
// and empty mbarriers (8 bytes each per stage)
struct WarpSpecialized {
  static constexpr int THREADS = WS_THREADS, TILE_M = BM, TILE_N = BN, TILE_K = BK;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + EPI_BYTES + 16 * STAGES;
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
hgemm_ws(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
         unsigned short* __restrict__ C, int M, int N, int K, int lda, int ldb, int tiles_m, int tiles_n) {
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
  unsigned short* sc = reinterpret_cast<unsigned short*>(smem + STAGES * STAGE_BYTES);
  const unsigned full = sbase + STAGES * STAGE_BYTES + EPI_BYTES, empty = full + 8 * STAGES;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int KT = K / BK, ntiles = tiles_m * tiles_n;
  const int total = block_k_steps(ntiles, KT);

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full + 8 * s, WS_CT);
      mbar_init(empty + 8 * s, NCW);
    }
  }
  __syncthreads();

  if (warp >= NCW) {                 // ---- the copier warpgroup
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(WS_COPIER_REGS));
    if (warp >= NCW + WS_COPIERS) return;
    const int ct = tid - THREADS;     // copier thread 0 .. WS_CT-1
    int step = 0;
    for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
      int bm, bn;
      tile_coords(t, tiles_m, tiles_n, bm, bn);
      const unsigned short* ga = A + (size_t)bm * BM * lda;
      const unsigned short* gb = B + bn * BN;
      for (int kt = 0; kt < KT; ++kt, ++step) {
        const int s = step % STAGES;
        const unsigned st = sbase + s * STAGE_BYTES;
        if (step >= STAGES) mbar_wait<true>(empty + 8 * s, ((step / STAGES) - 1) & 1);
        {   // A: thread ct copies chunk ct % ACH of rows ct / ACH + i · WS_CT/ACH (running pointer: few registers)
          const unsigned short* pa = ga + (size_t)(ct / ACH) * lda + 8 * (ct % ACH);
#pragma unroll kCpUnroll
          for (int i = 0; i < A_LANE; ++i, pa += (size_t)(WS_CT / ACH) * lda) {
            const int r = ct / ACH + i * (WS_CT / ACH);
            cp_async16(st + r * (BK * 2) + swz_a(r, ct % ACH) * 16, pa);
          }
        }
        {   // B: rows ct / BCH + i · WS_CT/BCH, chunk ct % BCH
          const unsigned short* pb = gb + (size_t)(ct / BCH) * ldb + 8 * (ct % BCH);
#pragma unroll kCpUnroll
          for (int i = 0; i < B_LANE; ++i, pb += (size_t)(WS_CT / BCH) * ldb) {
            const int r = ct / BCH + i * (WS_CT / BCH);
            cp_async16(st + A_BYTES + r * (BN * 2) + swz_b(r, ct % BCH) * 16, pb);
          }
        }
        cp_async_arrive(full + 8 * s);
        ga += BK;
        gb += (size_t)BK * ldb;
      }
    }
    cp_wait<0>();
    return;
  }

  // ---- the multipliers
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(WS_REGS));
  const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;
  unsigned a_ld[KS], b_ld[NT / 2];
  frag_offsets(a_ld, b_ld, wm, wn, lane);
  float acc[MT][NT][4];
  unsigned af[2][MT][4], bf[2][NT][2];
  if (total == 0) return;
  mbar_wait(full, 0);
  load_frags(af[0], bf[0], a_ld, b_ld, sbase, 0);
  int step = 0;
  for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
    zero_acc(acc);
    for (int kt = 0; kt < KT; ++kt, ++step) {
      const int s = step % STAGES;
      const unsigned st = sbase + s * STAGE_BYTES;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        if (ks < KS - 1) {
          load_frags(af[(ks + 1) & 1], bf[(ks + 1) & 1], a_ld, b_ld, st, ks + 1);
        } else if (step + 1 < total) {          // the next stage's first k16 step (maybe the next tile's)
          const int s1 = (step + 1) % STAGES;
          mbar_wait(full + 8 * s1, ((step + 1) / STAGES) & 1);
          load_frags(af[(ks + 1) & 1], bf[(ks + 1) & 1], a_ld, b_ld, sbase + s1 * STAGE_BYTES, 0);
        }
        warp_mmas(acc, af[ks & 1], bf[ks & 1]);
      }
      __syncwarp();                             // every lane's reads of stage s are in registers
      if (lane == 0) mbar_arrive(empty + 8 * s);
    }
    int bm, bn;
    tile_coords(t, tiles_m, tiles_n, bm, bn);
    bar_consumers();                            // the previous tile's C is out of the staging region
    stage_c(sc, acc, wm, wn, lane);
    bar_consumers();
    store_c<4>(sc, C, M, N, bm * BM, bn * BN, tid);
  }
}
#endif
