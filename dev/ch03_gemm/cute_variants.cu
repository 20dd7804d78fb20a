// Tuning variants of lesson 03.05's CuTe bf16 GEMM (dev/ch03_gemm/tune_cute.py appends one
// CUTE_TUNED(name, BM, BN, BK, WARPS_M, WARPS_N, STAGES, KPIPE, EPI_SMEM, MINB, ROWA, HOIST) line per
// candidate, which names a configuration type; the kernel is compiled as cute_tuned<name>).
//   ROWA:  issue a k16 step's mmas A-stationary (m outer, n serpentine inner), as lesson 04 and CUTLASS
//          2.x's sm80 warp mma do. cute::gemm on (V,M)x(V,N) fragments only special-cases 4- and 8-byte
//          fragments; bf16 m16n8k16 has a 16-byte A and an 8-byte B, so it falls back to n outer, m
//          inner: B (2 registers) is the operand kept in the reuse cache and every HMMA reads A's 4.
//   HOIST: (KPIPE only) the thread's global source tensors are sliced at k tile 0 once and their
//          pointers advanced by one k tile per iteration; the main loop runs the KT - (STAGES - 1)
//          iterations that refill a stage without a bounds test, the last STAGES - 1 in a second loop
//          that only multiplies (same group accounting: one commit per iteration).
// C (M, N) bf16 = A (M, K) bf16 · B (K, N) bf16, fp32 accumulation, all row-major; A and B zero-padded
// to tile multiples by the launcher, C not (stores are guarded).
// The launch contract (grader/cuda/launch.py): each candidate's type states THREADS, SMEM_BYTES and
// TILE_M/N/K, the host reads them from the cubin (course::launch_shape<name>) and launches the kernel
// with grader.problems.gemm.tiled_launch, as lesson 05 launches cute_gemm<V2>.
#include <cute/tensor.hpp>
#include "course.cuh"
using namespace cute;
using T = bfloat16_t;

template <int BM, int BN, int BK, int WM, int WN, int STAGES>
struct Cfg {
  static constexpr int THREADS = 32 * WM * WN;
  using bM = Int<BM>;
  using bN = Int<BN>;
  using bK = Int<BK>;
  // A (BM, BK) k-contiguous: 16-byte chunks XOR-ed with the row (BK = 32: row / 2, two rows per 128 B)
  using AtomA = decltype(composition(Swizzle<(BK == 32 ? 2 : 3), 3, 3>{}, Layout<Shape<_8, bK>, Stride<bK, _1>>{}));
  // B (BN, BK) n-contiguous: 64 n × 8 k atoms, 128-byte rows of n, chunk ^= k % 8
  using AtomB = decltype(composition(Swizzle<3, 3, 3>{}, Layout<Shape<_64, _8>, Stride<_1, _64>>{}));
  using SmemA = decltype(tile_to_shape(AtomA{}, Shape<bM, bK, Int<STAGES>>{}));
  using SmemB = decltype(tile_to_shape(AtomB{}, Shape<bN, bK, Int<STAGES>>{}));
  // C (BM, BN) n-contiguous staging tile for the epilogue: 8 × 64 atoms, chunk ^= m % 8
  using SmemC = decltype(tile_to_shape(composition(Swizzle<3, 3, 3>{}, Layout<Shape<_8, _64>, Stride<_64, _1>>{}),
                                       Shape<bM, bN>{}));
  using G2SAtom = Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, T>;
  static constexpr int AK = BK / 8, BNT = BN / 8;   // threads along k for A, along n for B
  using G2SA = decltype(make_tiled_copy(G2SAtom{}, Layout<Shape<Int<THREADS / AK>, Int<AK>>, Stride<Int<AK>, _1>>{},
                                       Layout<Shape<_1, _8>>{}));
  using G2SB = decltype(make_tiled_copy(G2SAtom{}, Layout<Shape<Int<BNT>, Int<THREADS / BNT>>, Stride<_1, Int<BNT>>>{},
                                       Layout<Shape<_8, _1>>{}));
  // WM × WN warps; the permutation tile (16 WM, 16 WN, 16) gives each warp two n8 atoms per step,
  // which one ldmatrix.x4.trans of B fills
  using MMA = decltype(make_tiled_mma(SM80_16x8x16_F32BF16BF16F32_TN{}, Layout<Shape<Int<WM>, Int<WN>, _1>>{},
                                      Tile<Int<16 * WM>, Int<16 * WN>, _16>{}));
  using S2RAtomA = Copy_Atom<SM75_U32x4_LDSM_N, T>;
  using S2RAtomB = Copy_Atom<SM75_U16x8_LDSM_T, T>;
  // 16-byte vectors of C: shared → global
  using EpiCopy = decltype(make_tiled_copy(Copy_Atom<UniversalCopy<uint128_t>, T>{},
                                           Layout<Shape<Int<THREADS / BNT>, Int<BNT>>, Stride<Int<BNT>, _1>>{},
                                           Layout<Shape<_1, _8>>{}));
  static constexpr int PIPE_BYTES = 2 * (cosize_v<SmemA> + cosize_v<SmemB>);   // bf16 stages of A and B
};

// One k16 step: acc (V, M, N) += a (V, M) · b (V, N)
template <bool ROWA, class MMA, class TA, class TB, class TC>
__device__ __forceinline__ void mma_step(MMA const& mma, TA const& a, TB const& b, TC& acc) {
  if constexpr (ROWA) {
    constexpr int M = decltype(size<1>(a))::value, N = decltype(size<1>(b))::value;
    CUTE_UNROLL
    for (int m = 0; m < M; ++m) {
      CUTE_UNROLL
      for (int n = 0; n < N; ++n) {
        const int ns = (m & 1) ? N - 1 - n : n;   // serpentine: neighbours share a and b
        gemm(mma, acc(_, m, ns), a(_, m), b(_, ns), acc(_, m, ns));
      }
    }
  } else {
    gemm(mma, a, b, acc);
  }
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool KPIPE, bool EPI, bool ROWA, bool HOIST>
__device__ __forceinline__ void gemm_tile(const T* A, const T* B, T* C, int M, int N, int K, int lda, int ldb,
                                          int tiles_m, int tiles_n) {
  using C_ = Cfg<BM, BN, BK, WM, WN, STAGES>;
  using bM = typename C_::bM;
  using bN = typename C_::bN;
  using bK = typename C_::bK;
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  const int tid = threadIdx.x;

  constexpr int GROUP = 8;   // block swizzle: strips of 8 tiles of m for L2 reuse
  int pid = blockIdx.x, per_group = GROUP * tiles_n;
  int first_m = (pid / per_group) * GROUP;
  int group_m = min(tiles_m - first_m, GROUP);
  int bm = first_m + (pid % per_group) % group_m;
  int bn = (pid % per_group) / group_m;

  Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(tiles_m * BM, K), make_stride(lda, _1{}));
  Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(tiles_n * BN, K), make_stride(_1{}, ldb));
  Tensor gA = local_tile(mA, Shape<bM, bK>{}, make_coord(bm, _));   // (BM, BK, KT)
  Tensor gB = local_tile(mB, Shape<bN, bK>{}, make_coord(bn, _));   // (BN, BK, KT)
  Tensor gC = make_tensor(make_gmem_ptr(C + (size_t)bm * BM * N + (size_t)bn * BN),
                          make_layout(Shape<bM, bN>{}, make_stride(N, _1{})));   // (BM, BN)

  T* smem = reinterpret_cast<T*>(smem_bytes);
  Tensor sA = make_tensor(make_smem_ptr(smem), typename C_::SmemA{});
  Tensor sB = make_tensor(make_smem_ptr(smem + cosize_v<typename C_::SmemA>), typename C_::SmemB{});

  typename C_::G2SA g2s_a;
  typename C_::G2SB g2s_b;
  auto g2s_thr_a = g2s_a.get_slice(tid);
  auto g2s_thr_b = g2s_b.get_slice(tid);
  Tensor tAgA = g2s_thr_a.partition_S(gA);
  Tensor tAsA = g2s_thr_a.partition_D(sA);
  Tensor tBgB = g2s_thr_b.partition_S(gB);
  Tensor tBsB = g2s_thr_b.partition_D(sB);

  typename C_::MMA mma;
  auto thr = mma.get_slice(tid);
  Tensor tCrA = thr.partition_fragment_A(sA(_, _, 0));
  Tensor tCrB = thr.partition_fragment_B(sB(_, _, 0));
  Tensor acc = partition_fragment_C(mma, Shape<bM, bN>{});
  clear(acc);

  auto s2r_a = make_tiled_copy_A(typename C_::S2RAtomA{}, mma);
  auto s2r_b = make_tiled_copy_B(typename C_::S2RAtomB{}, mma);
  auto s2r_thr_a = s2r_a.get_slice(tid);
  auto s2r_thr_b = s2r_b.get_slice(tid);
  Tensor tXsA = s2r_thr_a.partition_S(sA);
  Tensor tXrA = s2r_thr_a.retile_D(tCrA);
  Tensor tXsB = s2r_thr_b.partition_S(sB);
  Tensor tXrB = s2r_thr_b.retile_D(tCrB);

  const int KT = size<3>(tAgA);
  constexpr int KB = size<2>(tCrA);
  CUTE_UNROLL
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) {
      copy(g2s_a, tAgA(_, _, _, s), tAsA(_, _, _, s));
      copy(g2s_b, tBgB(_, _, _, s), tBsB(_, _, _, s));
    }
    cp_async_fence();
  }
  if constexpr (KPIPE) {
    // registers double-buffered over k16 steps: the fragments of step kb + 1 are loaded before the
    // mma of step kb; the last step's load reads the next tile, after the wait + barrier. refill()
    // issues one stage's copies in step 0, before the commit.
    int read = 0;
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    copy(s2r_a, tXsA(_, _, 0, 0), tXrA(_, _, 0));
    copy(s2r_b, tXsB(_, _, 0, 0), tXrB(_, _, 0));
    auto k_tile = [&](auto&& refill) {
      CUTE_UNROLL
      for (int kb = 0; kb < KB; ++kb) {
        if (kb == KB - 1) {
          cp_async_wait<STAGES - 2>();
          __syncthreads();
          read = read + 1 == STAGES ? 0 : read + 1;
        }
        const int kn = (kb + 1) % KB;
        copy(s2r_a, tXsA(_, _, kn, read), tXrA(_, _, kn));
        copy(s2r_b, tXsB(_, _, kn, read), tXrB(_, _, kn));
        if (kb == 0) {
          refill();
          cp_async_fence();
        }
        mma_step<ROWA>(mma, tCrA(_, _, kb), tCrB(_, _, kb), acc);
      }
    };
    if constexpr (HOIST) {
      // The thread's copy sources at k tile STAGES - 1 (the first the loop loads); one k tile further
      // per refill: a 64-bit pointer add instead of recomputing base + k · stride per copy.
      Tensor tAgAk = tAgA(_, _, _, STAGES - 1);
      Tensor tBgBk = tBgB(_, _, _, STAGES - 1);
      const auto a_step = stride<3>(tAgA);   // BK (static)
      const auto b_step = stride<3>(tBgB);   // BK · ldb
      int write = STAGES - 1;
      auto load_next = [&]() {
        copy(g2s_a, tAgAk, tAsA(_, _, _, write));
        copy(g2s_b, tBgBk, tBsB(_, _, _, write));
        tAgAk.data() = tAgAk.data() + a_step;
        tBgBk.data() = tBgBk.data() + b_step;
        write = write + 1 == STAGES ? 0 : write + 1;
      };
      int kt = 0;
      for (; kt < KT - (STAGES - 1); ++kt) k_tile(load_next);     // refills a stage: no bounds test
      for (; kt < KT; ++kt) k_tile([] {});                        // the last STAGES - 1 tiles
    } else {
      for (int kt = 0; kt < KT; ++kt)
        k_tile([&] {
          const int next = kt + STAGES - 1;
          if (next < KT) {
            const int w = next % STAGES;
            copy(g2s_a, tAgA(_, _, _, next), tAsA(_, _, _, w));
            copy(g2s_b, tBgB(_, _, _, next), tBsB(_, _, _, w));
          }
        });
    }
  } else {
    for (int kt = 0; kt < KT; ++kt) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      int next = kt + STAGES - 1;
      if (next < KT) {
        copy(g2s_a, tAgA(_, _, _, next), tAsA(_, _, _, next % STAGES));
        copy(g2s_b, tBgB(_, _, _, next), tBsB(_, _, _, next % STAGES));
      }
      cp_async_fence();
      const int s = kt % STAGES;
      CUTE_UNROLL
      for (int kb = 0; kb < KB; ++kb) {
        copy(s2r_a, tXsA(_, _, kb, s), tXrA(_, _, kb));
        copy(s2r_b, tXsB(_, _, kb, s), tXrB(_, _, kb));
        mma_step<ROWA>(mma, tCrA(_, _, kb), tCrB(_, _, kb), acc);
      }
    }
  }
  cp_async_wait<0>();

  const int m_left = M - bm * BM, n_left = N - bn * BN;
  if constexpr (EPI) {
    __syncthreads();   // every warp is done with the pipeline's shared memory: reuse it for C
    Tensor sC = make_tensor(make_smem_ptr(smem), typename C_::SmemC{});   // (BM, BN) bf16
    Tensor tCsC = thr.partition_C(sC);                                   // like acc
    CUTE_UNROLL
    for (int i = 0; i < size(acc); i += 2) {   // (v0, v1) are neighbours in n: one 4-byte store
      uint32_t lo = T(acc(i)).raw(), hi = T(acc(i + 1)).raw();
      *reinterpret_cast<uint32_t*>(&tCsC(i)) = lo | (hi << 16);
    }
    __syncthreads();
    typename C_::EpiCopy epi;
    auto et = epi.get_slice(tid);
    Tensor tEsC = et.partition_S(sC);                                    // (8, PASSES, 1)
    Tensor tEgC = et.partition_D(gC);
    Tensor tEcC = et.partition_D(make_identity_tensor(Shape<bM, bN>{}));
    const bool vec = (N % 8) == 0;   // 16-byte aligned rows
    CUTE_UNROLL
    for (int p = 0; p < size<1>(tEsC); ++p) {
      const int m = get<0>(tEcC(0, p, 0)), n = get<1>(tEcC(0, p, 0));
      if (m < m_left) {
        if (vec && n + 8 <= n_left) {
          copy(epi, tEsC(_, p, _), tEgC(_, p, _));
        } else {
          CUTE_UNROLL
          for (int j = 0; j < 8; ++j)
            if (n + j < n_left) tEgC(j, p, 0) = tEsC(j, p, 0);
        }
      }
    }
  } else {
    Tensor tCgC = thr.partition_C(gC);
    Tensor tCcC = thr.partition_C(make_identity_tensor(Shape<bM, bN>{}));
    CUTE_UNROLL
    for (int i = 0; i < size(acc); ++i)
      if (get<0>(tCcC(i)) < m_left && get<1>(tCcC(i)) < n_left) tCgC(i) = T(acc(i));
  }
}

// One candidate: its configuration, and what the host needs to launch it (the launch contract): the
// threads, the dynamic shared memory (the stages, reused by the epilogue's (BM, BN) bf16 tile of C) and
// the tile.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_, bool KPIPE_, bool EPI_, int MINB_, bool ROWA_,
          bool HOIST_>
struct Tuned {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, STAGES = STAGES_, MINB = MINB_;
  static constexpr bool KPIPE = KPIPE_, EPI = EPI_, ROWA = ROWA_, HOIST = HOIST_;
  static constexpr int THREADS = Cfg<BM, BN, BK, WM, WN, STAGES>::THREADS, TILE_M = BM, TILE_N = BN, TILE_K = BK;
  static constexpr int PIPE_BYTES = Cfg<BM, BN, BK, WM, WN, STAGES>::PIPE_BYTES, EPI_BYTES = BM * BN * 2;
  static constexpr int SMEM_BYTES = EPI && EPI_BYTES > PIPE_BYTES ? EPI_BYTES : PIPE_BYTES;
};

template <class V>
__global__ void __launch_bounds__(V::THREADS, V::MINB)
cute_tuned(const unsigned short* A, const unsigned short* B, unsigned short* C, int M, int N, int K, int lda,
           int ldb, int tiles_m, int tiles_n) {
  gemm_tile<V::BM, V::BN, V::BK, V::WM, V::WN, V::STAGES, V::KPIPE, V::EPI, V::ROWA, V::HOIST>(
      reinterpret_cast<const T*>(A), reinterpret_cast<const T*>(B), reinterpret_cast<T*>(C), M, N, K, lda, ldb,
      tiles_m, tiles_n);
}

#define CUTE_TUNED(NAME, BM, BN, BK, WM, WN, STAGES, KPIPE, EPI, MINB, ROWA, HOIST) \
  using NAME = Tuned<BM, BN, BK, WM, WN, STAGES, KPIPE, EPI, MINB, ROWA, HOIST>;
