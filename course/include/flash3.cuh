// generated from grader/include/flash3.cuh by `python -m grader release`: read it here, edit it there
// flash3.cuh -- what lessons 05.07-05.08 (FlashAttention-3 ideas) add to tma.cuh, wgmma.cuh and pipeline.cuh.
//
// Like the other headers: each helper is a thin, named wrapper around one PTX instruction.
//   * tma_load_3d: a bulk tensor copy of a 3-D box (the tensor map of a (heads, rows, d) tensor):
//     a box that runs past the end of one head's rows is zero-filled there, instead of reading the
//     next head's first rows as a 2-D (heads * rows, d) view would;
//   * wgmma with A from REGISTERS (the "RS" form): D (64 x N) += A (64 x 16, four bf16x2 registers a
//     thread) * B (16 x N, shared memory). A thread's four registers are the same places of the
//     64 x 16 tile that a 64 x N accumulator fragment gives it (wgmma.cuh: wgmma_acc_row/col), so
//     the scores of S = Q K^T, exponentiated and rounded to bf16 in registers, feed P V directly:
//     for k step kk, a = { pack(s[8kk], s[8kk+1]), pack(s[8kk+2], s[8kk+3]), pack(s[8kk+4], s[8kk+5]),
//     pack(s[8kk+6], s[8kk+7]) }. The A operand has no transpose flag in this form.
#pragma once
#include "course.cuh"
#include "tma.cuh"

namespace course {

// A persistent CTA's work unit u (u = blockIdx.x, + gridDim.x, ...) in 05.07's and 05.08's kernels (bf16 and FP8):
// BM query rows of one (batch, head). Heads are taken `group` at a time (the host picks a group whose
// K and V fit in L2), and inside a group the units go query block by query block, `group` heads each --
// causal: the last (longest) block first. A CTA's units then sample every block length evenly, and the
// CTAs running at once share the K and V of a few heads in L2. n_tiles: the key tiles of BN the unit
// visits (causal tiles wholly above the diagonal skipped); qh, kh: its Q head and K/V head (GQA).
struct Flash3Unit { int r0, qh, kh, n_tiles; };

template <int BM, int BN>
__device__ __forceinline__ Flash3Unit flash3_unit(int u, int mblocks, int Sk, int B, int H, int Hkv, int group,
                                                  int causal) {
  const int g = u / (group * mblocks), gs = min(group, H * B - g * group), idx = u - g * group * mblocks;
  const int lvl = idx / gs, hb = g * group + idx % gs, h = hb % H, b = hb / H;
  const int mb = causal ? mblocks - 1 - lvl : lvl;
  const int r0 = mb * BM, kv_end = causal ? min(Sk, r0 + BM) : Sk;
  return Flash3Unit{r0, b * H + h, b * Hkv + h / (H / Hkv), (kv_end + BN - 1) / BN};
}

}  // namespace course

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

namespace course {

// global -> shared: the box at (c0, c1, c2) (innermost first: column, row, head) lands in `smem_dst`;
// its bytes count down `bar`'s transaction count. Parts of the box outside the tensor are zeros.
__device__ __forceinline__ void tma_load_3d(void* smem_dst, const TensorMap* map, int c0, int c1, int c2,
                                           unsigned long long* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n"
      :: "r"(smem_u32(smem_dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2),
         "r"(smem_u32(bar))
      : "memory");
}

}  // namespace course

#endif  // sm_90

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)

namespace course {

// wgmma.mma_async m64nNk16 fp32 += bf16 (registers) * bf16 (shared memory), N = 64 or 128.
// TRANS_B as in wgmma.cuh: 0 = B is K-major, 1 = N-major (V (keys, d) row-major, for P V).
template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const unsigned (&a)[4], unsigned long long desc_b,
                                                  int scale_d = 1) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
}

template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const unsigned (&a)[4], unsigned long long desc_b,
                                                  int scale_d = 1) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
}

// The same, N taken from the accumulator's length: N = 64 or 128.
template <int TRANS_B, int R>
__device__ __forceinline__ void wgmma_rs_bf16(float (&d)[R], const unsigned (&a)[4], unsigned long long desc_b,
                                              int scale_d = 1) {
  static_assert(R == 32 || R == 64, "wgmma_rs_bf16: an accumulator of 32 or 64 floats (N = 64, 128)");
  if constexpr (R == 32) wgmma_m64n64k16_rs<TRANS_B>(d, a, desc_b, scale_d);
  else wgmma_m64n128k16_rs<TRANS_B>(d, a, desc_b, scale_d);
}

}  // namespace course

#endif  // sm_90a
