// combine.cuh -- merging split-KV partial results (flash decoding), shared by decode.cu and
// mla_decode.cu.
//
// A split s of one query head leaves O_s (normalized, fp32) and lse_s = log Σ_{j in s} exp(score_j).
// The whole row is O = Σ_s w_s O_s / Σ_s w_s with w_s = exp(lse_s - max_s lse_s), and
// lse = max + log Σ_s w_s. Two ways to run it:
//   * a combine kernel after the split kernel (dec_combine_*), one block per (head, sequence);
//   * fused: every block of a (sequence, head group) bumps a counter after writing its partials;
//     the block that arrives last merges them (last_arrival), so no second launch is needed.
#pragma once
#include "attn.cuh"

namespace attn {

// Columns c4 .. c4 + 3 of one head's output from its ns partials. o_part_row: (n_splits, DV) fp32,
// lse_row: (n_splits) fp32, both for this head; read through L2 (__ldcg): other blocks wrote them.
// lse_out (may be null) is written by the thread with c4 == 0.
__device__ __forceinline__ void merge_partials(const float* o_part_row, const float* lse_row, int ns, int DV,
                                               int c4, bf16_t* o_row, float* lse_out) {
  float M = -INFINITY;
  for (int s = 0; s < ns; ++s) M = fmaxf(M, __ldcg(lse_row + s));
  const float ref = M == -INFINITY ? 0.f : M;
  float W = 0.f;
  float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int s = 0; s < ns; ++s) {
#ifdef WRONG_COMBINE_NO_LSE
    const float w = 1.f;                                   // wrong: chunks averaged, LSE ignored
#else
    const float w = __expf(__ldcg(lse_row + s) - ref);
#endif
    const float4 v = __ldcg(reinterpret_cast<const float4*>(o_part_row + (size_t)s * DV + c4));
    W += w;
    a.x += w * v.x, a.y += w * v.y, a.z += w * v.z, a.w += w * v.w;
  }
  const float inv = W > 0.f ? 1.f / W : 0.f;
  *reinterpret_cast<uint2*>(o_row + c4) = make_uint2(pack_bf16(a.x * inv, a.y * inv), pack_bf16(a.z * inv, a.w * inv));
  if (lse_out != nullptr && c4 == 0) *lse_out = W > 0.f ? ref + __logf(W) : -INFINITY;
}

// Called by all threads of every block of a group once its partials are written. True in the
// block that arrives last (expected arrivals in all); that block resets the counter for the next
// launch. ticket: one int of this block's shared memory.
__device__ __forceinline__ bool last_arrival(int* counter, int expected, int* ticket) {
  __threadfence();                                         // this thread's partials are visible GPU-wide
  __syncthreads();                                         // ... for every thread of the block
  if (threadIdx.x == 0) *ticket = atomicAdd(counter, 1);
  __syncthreads();
  const bool last = *ticket == expected - 1;
  if (last) {
    __threadfence();                                       // order the reads after the other blocks' writes
    if (threadIdx.x == 0) *counter = 0;
  }
  return last;
}

}  // namespace attn
