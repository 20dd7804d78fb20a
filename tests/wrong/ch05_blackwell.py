"""Chapter 05, lesson 09 (05.09, Blackwell): wrong descriptors, kernels and exponentials the lesson's checks
must catch (tests/test_ch05_blackwell.py).

* Descriptor encoders with one mistake each (Python, like the learner's exercise 1): the CPU checker
  (grader.cuda.umma) catches them on every machine — among them B's LBO set to the distance between
  8-row groups instead of between 64-column boxes.
* 05.09's %%cuda cells with one mistake each (text replaced, as tests/wrong/ch05_hopper.py does):
  tensor memory never freed or never relinquished (the SASS rubric), the pair kernel's type without
  CLUSTER (the launch function refuses it before any GPU call), exp2 through the special-function
  unit (the rubric). Mistakes only the values can show (a wrong K step, accumulating into
  uninitialised tensor memory) compile everywhere and are checked on a Blackwell GPU.
* exp2 in NumPy done wrong: np.exp2 itself, the coefficients in the wrong order, Horner in float64.
"""
from __future__ import annotations

import numpy as np

from tests.wrong.ch05_hopper import cpp_variant  # noqa: F401  (the same text-replacement helper)

CHAPTER = "05_hopper_blackwell"
NOTEBOOK = "09_blackwell.ipynb"
GEMM_CELL, SCALED_CELL, EXP2_CELL = "v_umma", "v_scaled", "v_exp2_cu"


def smem_desc(start, lbo, sbo, swizzle_code=2, version=1):
    return ((start >> 4) & 0x3FFF) | ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | version << 46 | \
        (swizzle_code & 7) << 61


def offsets(n_cta=256):
    return 16, 1024, 64 * 128, 1024


# (what the learner's encoder returns for the B tile's K slice k) -> the checker must fail it
DESCRIPTOR_MISTAKES = {
    # LBO as the distance between groups of 8 K-rows, not between 64-column boxes
    "b_lbo_wrong": lambda addr, k: smem_desc(addr + 2048 * k, 1024, 1024),
    # LBO and SBO swapped
    "b_lbo_sbo_swapped": lambda addr, k: smem_desc(addr + 2048 * k, 1024, 64 * 128),
    # byte values not shifted right by 4
    "not_shifted": lambda addr, k: ((addr + 2048 * k) & 0x3FFF) | (8192 & 0x3FFF) << 16 | (1024 & 0x3FFF) << 32 | 1 << 46 | 2 << 61,
    # Hopper's wgmma descriptor: no version bits (and the 2-bit swizzle code of wgmma: 1 = 128B)
    "hopper_descriptor": lambda addr, k: smem_desc(addr + 2048 * k, 8192, 1024, swizzle_code=1, version=0),
    # the K step taken as 32 bytes (A's rule) for the MN-major B
    "b_k_step_32_bytes": lambda addr, k: smem_desc(addr + 32 * k, 8192, 1024),
    # the 64B swizzle code for a tile TMA wrote with the 128B swizzle
    "swizzle_64B": lambda addr, k: smem_desc(addr + 2048 * k, 8192, 1024, swizzle_code=4),
}

UMMA_MISTAKES = {
    # tensor memory never given back: the next CTA on that SM waits for columns forever
    "no_dealloc": [("    course::tmem_dealloc<PAIR>(tmem, Cfg::TMEM_COLS);\n", "")],
    # no relinquish: other CTAs on the SM may not allocate while this one lives
    "no_relinquish": [("    course::tmem_relinquish<PAIR>();\n", "")],
    # A's start moved by 16 bytes a K step (8 values), not 32 (16 values): wrong values on a GPU
    "a_k_step_16_bytes": [("a_desc | ((a_addr + k * 32) >> 4)", "a_desc | ((a_addr + k * 16) >> 4)")],
    # accumulate from the first MMA on: adds to whatever tensor memory held
    "accumulate_always": [("course::umma_f16<PAIR>(tmem, ad, bd, idesc, kt > 0 || k > 0);",
                           "course::umma_f16<PAIR>(tmem, ad, bd, idesc, true);")],
}
RUBRIC_CATCHES = {"no_dealloc": "UTCATOMSWS.AND", "no_relinquish": "UVIRTCOUNT.DEALLOC.SMPOOL"}

# the CTA-pair kernel's type without CLUSTER: its launch must be refused before the GPU sees it
NO_CLUSTER = [("static constexpr int CTA_GROUP = CTA_GROUP_, CLUSTER = CTA_GROUP_;",
               "static constexpr int CTA_GROUP = CTA_GROUP_;")]

# exp2 through the special-function unit after all
EXP2_MUFU = [("  const float p = fmaf(fmaf(fmaf(C3, f, C2), f, C1), f, C0);        // Horner: one FMA a step\n"
              "  return __int_as_float(__float_as_int(p) + (static_cast<int>(n) << 23));   // × 2^n: add n to the exponent\n",
              "  return exp2f(x);\n")]


def exp2_numpy(xs, coeffs):
    return np.exp2(np.asarray(xs, dtype=np.float64)).tolist()


def exp2_reversed_coefficients(xs, coeffs):
    from grader.problems.blackwell import exp2_fma

    return exp2_fma(np.asarray(xs, dtype=np.float32), list(coeffs)[::-1]).tolist()


def exp2_exponent_multiplied(xs, coeffs):
    # 2^n applied as p·n instead of an exponent add
    from grader.problems.blackwell import exp2_fma

    x = np.asarray(xs, dtype=np.float32)
    p = exp2_fma(x - np.floor(x), coeffs)
    return (p * np.floor(x)).tolist()


EXP2_MISTAKES = {"numpy_exp2": exp2_numpy, "coefficients_reversed": exp2_reversed_coefficients,
                 "exponent_multiplied": exp2_exponent_multiplied}
