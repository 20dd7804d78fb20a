// generated from grader/include/flash3_fp8.cuh by `python -m grader release`: read it here, edit it there
// flash3_fp8.cuh -- what lesson 05.08 (FP8 attention) adds to wgmma.cuh and flash3.cuh.
//
// Thin wrappers, one PTX instruction each, as in the other headers:
//   * pack_e4m3x2: two floats rounded (to nearest even, saturating at +-448) to e4m3, packed in 16 bits,
//     lo in the low byte (the order memory holds them in);
//   * wgmma m64n128k32 fp32 += e4m3 (A from REGISTERS) * e4m3 (B in shared memory, K-major): the RS form
//     of 05.06's FP8 wgmma. A thread's four A registers hold 16 e4m3 of the 64 x 32 A tile -- in warp w,
//     lane l (g = l / 4, q = l % 4):
//         a[0]: row 16w + g,     k = 4q .. 4q + 3        a[2]: row 16w + g,     k = 16 + 4q .. 16 + 4q + 3
//         a[1]: row 16w + g + 8, k = 4q .. 4q + 3        a[3]: row 16w + g + 8, k = 16 + 4q .. 16 + 4q + 3
//     (byte j of each register: k + j). NOT the places the fp32 accumulator of S = Q K^T gives the thread
//     (wgmma.cuh: columns 8c + 2q, 8c + 2q + 1) -- unless B's K index runs over the keys in a matching
//     order, the one lesson 05.08's Vt is stored in (grader/problems/flash3_fp8.py, KEY_ORDER): in every
//     group of 16 keys, column 4q + j (q, j = 0 … 3) holds key 8 (j / 2) + 2q + j % 2 -- the keys the
//     accumulator gives lane q, in the order of its A-fragment bytes. Then P packs in place and no byte
//     moves between lanes. FP8 wgmma has no transpose flag: B is (N, K) with K contiguous.
#pragma once
#include "course.cuh"

namespace course {

// lo, hi -> e4m3 pair (lo in bits 0-7, hi in bits 8-15). cvt writes its first source to the high byte.
__device__ __forceinline__ unsigned pack_e4m3x2(float lo, float hi) {
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

}  // namespace course

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)

namespace course {

// D (64 x 128, fp32) += A (64 x 32 e4m3, registers) * B (32 x 128 e4m3, shared memory, K-major).
__device__ __forceinline__ void wgmma_m64n128k32_rs_e4m3(float (&d)[64], const unsigned (&a)[4],
                                                        unsigned long long desc_b, int scale_d = 1) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

}  // namespace course

#endif  // sm_90a
