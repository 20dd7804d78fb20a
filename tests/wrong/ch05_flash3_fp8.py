"""Lesson 05.08 (FP8 attention, 08_flash3_fp8): wrong kernels its checks must catch (tests/test_ch05_flash3_fp8.py).

The FP8 attention cell with one mistake each (text replaced, as tests/wrong/ch05_hopper.py does). They
compile anywhere and pass the SASS rubric (QGMMA is there either way); a Hopper GPU catches them, each
in a process of its own:

* ``v_descale_not_applied``: O left in V's e4m3 units (vd never multiplies it): off by a factor of
  max|v| / 448 per head — far outside the tolerance at every size with a key;
* ``qk_descale_not_applied``: the scores in the units of the e4m3 codes (qd · kd never joins the
  softmax's scale): softmax of scores hundreds of times too large, an argmax instead of an average;
* ``p_not_permuted``: P's e4m3 bytes packed in the accumulator's own order (elements 4h … 4h + 3 into
  a[h]) instead of Vt's key order (x[e], x[e + 1], x[e + 4], x[e + 5]): each probability multiplies
  another key's value and rows g and g + 8 trade halves; far off wherever one key dominates a row (the
  "peaked" sizes) and off by many times the tolerance on any non-uniform row.

A preparation without the Hadamard rotation is a mistake of the INPUTS, not of the kernel: the
accuracy check (grader.problems.flash3_fp8.accuracy against ACCURACY_BOUND) catches it on inputs with
outlier features; tests/test_ch05_flash3_fp8.py shows it on the CPU with the NumPy emulation.
"""
from __future__ import annotations

from tests.wrong.ch05_hopper import cpp_variant  # noqa: F401  (one implementation of the text edit)

CHAPTER = "05_hopper_blackwell"
NOTEBOOK, CELL, RUBRIC, KERNEL = "08_flash3_fp8.ipynb", "v_flash3_fp8", "test_flash3_fp8_sass", "flash3_fp8<F8<0, 1, 1>>"

FP8_MISTAKES = {
    "v_descale_not_applied": [("f[r] = lr > 0.f ? v_scale / lr : 0.f;", "f[r] = lr > 0.f ? 1.f / lr : 0.f;")],
    "qk_descale_not_applied": [("sc_log2 = scale_log2 * __ldg(qd + w.qh) * __ldg(kd + w.kh);", "sc_log2 = scale_log2;")],
    "p_not_permuted": [("p[4 * kk + h] = course::pack_e4m3x2(x[e], x[e + 1]) | (course::pack_e4m3x2(x[e + 4], x[e + 5]) << 16);",
                        "p[4 * kk + h] = course::pack_e4m3x2(x[4 * h], x[4 * h + 1]) | (course::pack_e4m3x2(x[4 * h + 2], x[4 * h + 3]) << 16);")],
}
ON_GPU = set(FP8_MISTAKES)

# Not a mistake but the slow form the cell had first: P V_{j-1} waited for right after S_j's softmax, in
# the same basic block -- ptxas then hoists the wait above most of the softmax (the SASS test counts 17
# exponentials of 96 under P V in this loop, 0 in the cell's first form; dev/ch05_hopper/fp8attn_gpu.py
# timed that one, run 3).
WAIT_AFTER_SOFTMAX = [
    ("      move = softmax(j, alpha);                          // under P V_{j-1}\n",
     "      move = softmax(j, alpha);\n      course::wgmma_wait<0>();\n      course::wgmma_fence_operand(o_acc);\n"),
]
