// generated from grader/include/course.cuh by `python -m grader release`: read it here, edit it there
// course.cuh -- small device helpers used from chapter 03 on, and the launch contract.
//
// Every helper is a thin, named wrapper around one PTX instruction, so the
// SASS you get is the instruction you asked for and nothing else.  Read each
// one once; after that, use them freely in your kernels.
//
// The tensor-core and async-copy helpers need sm_80 or newer; they are only
// defined when compiling for such a target (or in a host pass).
#pragma once

// ---------------------------------------------------------------------------
// COURSE_CHECK(cond): a device-side assert that says where it fired.
// It prints the failing condition, file, line and the thread coordinates,
// then traps, which makes the launch fail with an "unspecified launch
// failure" / illegal-instruction error the grader reports.
// ---------------------------------------------------------------------------
#define COURSE_CHECK(cond)                                                     \
  do {                                                                         \
    if (!(cond)) {                                                             \
      printf("COURSE_CHECK failed: %s  (%s:%d, block %d,%d,%d thread %d,%d,%d)\n", \
             #cond, __FILE__, __LINE__, (int)blockIdx.x, (int)blockIdx.y,      \
             (int)blockIdx.z, (int)threadIdx.x, (int)threadIdx.y,             \
             (int)threadIdx.z);                                                \
      __trap();                                                                \
    }                                                                          \
  } while (0)

// ---------------------------------------------------------------------------
// The launch contract (grader/cuda/launch.py): a kernel configured by a type Cfg
// states what the host needs as static constexpr int members, each optional:
// THREADS, SMEM_BYTES, TILE_M, TILE_N, TILE_K, STAGES, CLUSTER.  Compiling the
// kernel as name<Cfg> also instantiates course::launch_shape<Cfg>, and the host
// reads block size, dynamic shared memory and tiles from the cubin: the
// configuration is written once, here in C++.
// ---------------------------------------------------------------------------
namespace course {
struct LaunchShape {
  int threads, smem_bytes, tile_m, tile_n, tile_k, stages, cluster;
};
namespace detail {
template <class...> using void_t = void;
#define COURSE_LAUNCH_FIELD(TRAIT, MEMBER)                                     \
  template <class C, class = void> struct TRAIT { static constexpr int value = 0; }; \
  template <class C> struct TRAIT<C, void_t<decltype(C::MEMBER)>> {           \
    static constexpr int value = static_cast<int>(C::MEMBER);                   \
  };
COURSE_LAUNCH_FIELD(threads_of, THREADS)
COURSE_LAUNCH_FIELD(smem_of, SMEM_BYTES)
COURSE_LAUNCH_FIELD(tile_m_of, TILE_M)
COURSE_LAUNCH_FIELD(tile_n_of, TILE_N)
COURSE_LAUNCH_FIELD(tile_k_of, TILE_K)
COURSE_LAUNCH_FIELD(stages_of, STAGES)
COURSE_LAUNCH_FIELD(cluster_of, CLUSTER)
#undef COURSE_LAUNCH_FIELD
}  // namespace detail
template <class Cfg>
__device__ const LaunchShape launch_shape = {
    detail::threads_of<Cfg>::value, detail::smem_of<Cfg>::value,   detail::tile_m_of<Cfg>::value,
    detail::tile_n_of<Cfg>::value,  detail::tile_k_of<Cfg>::value,  detail::stages_of<Cfg>::value,
    detail::cluster_of<Cfg>::value};
}  // namespace course

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800

namespace course {

// Generic pointer to a shared-memory address (the 32-bit offset the
// ldmatrix / cp.async / wgmma instructions expect).
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ---- ldmatrix: warp-wide loads of 8x8 tiles of 16-bit values ------------
// Lane i passes the address of one 16-byte row: lanes 0-7 give the rows of
// tile 0, lanes 8-15 of tile 1, and so on.  Each lane receives, per tile,
// one 32-bit register holding row (lane/4), columns 2*(lane%4) and +1.
// The .trans forms deliver the transposed tile.
__device__ __forceinline__ void ldmatrix_x1(unsigned& r0, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r0) : "r"(smem_u32(row)));
}
__device__ __forceinline__ void ldmatrix_x2(unsigned& r0, unsigned& r1, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r0), "=r"(r1) : "r"(smem_u32(row)));
}
__device__ __forceinline__ void ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2,
                                            unsigned& r3, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_u32(row)));
}
__device__ __forceinline__ void ldmatrix_x1_trans(unsigned& r0, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r0) : "r"(smem_u32(row)));
}
__device__ __forceinline__ void ldmatrix_x2_trans(unsigned& r0, unsigned& r1, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r0), "=r"(r1) : "r"(smem_u32(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned& r0, unsigned& r1, unsigned& r2,
                                                  unsigned& r3, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_u32(row)));
}

// ---- mma.sync m16n8k16: D = A * B + C on one warp -----------------------
// A: 16x16 (row-major fragment, 4 regs of 2 values), B: 16x8 ("col", i.e.
// stored N x K; 2 regs), C and D: 16x8 fp32 (4 floats per lane).
// With g = lane/4 and t = lane%4:  a[0] = A[g][2t..2t+1], a[1] = A[g+8][..],
// a[2] = A[g][2t+8..], a[3] = A[g+8][2t+8..];  b[0] = B[2t..2t+1][g],
// b[1] = B[2t+8..][g];  d[0..1] = D[g][2t..2t+1], d[2..3] = D[g+8][2t..2t+1].
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const unsigned (&a)[4],
                                                  const unsigned (&b)[2], const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const unsigned (&a)[4],
                                                 const unsigned (&b)[2], const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// ---- cp.async: 16-byte global -> shared copies that bypass registers ----
// Both addresses must be 16-byte aligned.  Copies issued since the last
// commit form one group; cp_async_wait<N>() waits until at most N groups
// are still in flight (N = 0: all done).  Follow with __syncthreads() before
// other threads read the data.
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
               :: "r"(smem_u32(smem_dst)), "l"(gmem_src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

// ---- the same on 32-bit shared-memory addresses ------------------------------
// Kernels that compute their shared-memory offsets once and only add constants
// in the main loop (lesson 03.04) pass the address (smem_u32 of a pointer).
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned saddr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(saddr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned& r0, unsigned& r1, unsigned& r2,
                                                  unsigned& r3, unsigned saddr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(saddr));
}
__device__ __forceinline__ void cp_async_16(unsigned saddr, const void* gmem_src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(saddr), "l"(gmem_src) : "memory");
}
// d += a * b in place (bf16 in, fp32 accumulate).  Not volatile: the compiler may
// schedule the mmas among the ldmatrix loads.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace course

#endif  // __CUDA_ARCH__ >= 800
