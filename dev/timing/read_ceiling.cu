// Read-only streams of one buffer, for flush_study.py: how fast can the bytes of a memory-bound
// kernel be *read* at all, under each L2 flush? No kernel that must read them can beat this.
//
//   ld_stream    16-byte ld.global.nc.L1::no_allocate.L2::256B, UNROLL loads in flight per thread
//   bulk_stream  1-D bulk copies (cp.async.bulk, sm_90: what TMA does for a contiguous run) of CHUNK
//                bytes into a ring of STAGES shared-memory slots, one mbarrier per slot, one thread
//                of each block issuing; every byte lands in shared memory, nothing else is done
//
// A running xor is stored only if it equals a value no input makes, so no load is dropped.
#include "tma.cuh"

template <int UNROLL>
__device__ __forceinline__ void ld_stream_body(const uint4* __restrict__ x, unsigned long long n16,
                                               unsigned* __restrict__ sink) {
  unsigned acc = 0;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (UNROLL - 1) * stride < n16; i += UNROLL * stride) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(x + i + u * stride));
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += stride) { uint4 a = x[i]; acc ^= a.x ^ a.y ^ a.z ^ a.w; }
  if (acc == 0x9E3779B9u) sink[0] = acc;
}

extern "C" __global__ void ld_stream4(const uint4* __restrict__ x, unsigned long long n16, unsigned* sink) {
  ld_stream_body<4>(x, n16, sink);
}
extern "C" __global__ void ld_stream8(const uint4* __restrict__ x, unsigned long long n16, unsigned* sink) {
  ld_stream_body<8>(x, n16, sink);
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// chunks (of `chunk` bytes, a multiple of 16) b, b + grid, b + 2·grid, ... of block b; `stages` slots.
extern "C" __global__ void bulk_stream(const unsigned char* __restrict__ x, unsigned long long nchunks,
                                       unsigned chunk, int stages, unsigned* __restrict__ sink) {
  extern __shared__ __align__(128) unsigned char slots[];
  __shared__ __align__(8) unsigned long long bar[16];
  if (threadIdx.x != 0) return;
  for (int s = 0; s < stages; ++s) course::mbar_init(&bar[s], 1);
  course::fence_mbarrier_init();
  const unsigned long long first = blockIdx.x, step = gridDim.x;
  auto issue = [&](int s, unsigned long long c) {
    course::mbar_arrive_expect_tx(&bar[s], chunk);
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(course::smem_u32(slots + (size_t)s * chunk)), "l"(x + c * chunk), "r"(chunk),
                    "r"(course::smem_u32(&bar[s])) : "memory");
  };
  for (int s = 0; s < stages; ++s)
    if (first + s * step < nchunks) issue(s, first + s * step);
  unsigned acc = 0;
  int i = 0;
  for (unsigned long long c = first; c < nchunks; c += step, ++i) {
    const int s = i % stages;
    course::mbar_wait(&bar[s], (i / stages) & 1);
    acc ^= *reinterpret_cast<volatile unsigned*>(slots + (size_t)s * chunk);   // the slot has landed
    const unsigned long long next = c + (unsigned long long)stages * step;
    if (next < nchunks) issue(s, next);
  }
  if (acc == 0x9E3779B9u) sink[0] = acc;
}
#endif
