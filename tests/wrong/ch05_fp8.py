"""Lesson 05.06 (FP8 GEMM with block scaling): wrong kernels its checks must catch
(tests/test_ch05_fp8.py).

05.06's %%cuda cell with one mistake each (text replaced, as tests/wrong/ch05_hopper.py does). They
compile anywhere; the values catch them on a Hopper GPU (``VALUE_CATCHES``, each with the shapes
that show it), the rubric on any machine (``RUBRIC_CATCHES``):

* ``per_tensor_scales`` — one scale for every row and column of a tile (per k block: the tile's first
  row's and its first block's), as if per tensor, where the lesson asks for 1 × 128 and 128 × 128
  blocks: wrong on the outlier rows and on every block whose magnitude differs from the first;
* ``promotion_skipped`` — the wgmmas accumulate all of K in their own accumulator and the scales are
  applied once, at the end (the last k block's): wrong as soon as K spans blocks of different
  scales, by far over long K;
* ``b_scale_wrong_block`` — B's scales read from the ring slot before the k tile's own (a slot off by
  one): every block's contribution scaled by its neighbour's;
* ``b_scale_tile_block`` — every column of a 128 × 192 tile takes the B scale of the tile's first
  128-column block: wrong on the columns that lie in the next block (half or a third of them);
* ``setmaxnreg_without_launch_bounds`` — the rubric (ptxas drops setmaxnreg, C7508).
"""
from __future__ import annotations

from tests.wrong.ch05_hopper import cpp_variant  # noqa: F401  (one implementation of the text edit)

CHAPTER = "05_hopper_blackwell"
NOTEBOOK, CELL, RUBRIC, KERNEL = "06_fp8_gemm.ipynb", "v_fp8", "test_fp8_sass", "fp8_gemm<Fp8<128, 192, 4, 1, 8>>"

FP8_MISTAKES = {
    "per_tensor_scales": [("lo = sa_s[slot][r_lo];", "lo = sa_s[slot][0];"),
                          ("hi = sa_s[slot][r_hi];", "hi = sa_s[slot][0];"),
                          ("b[q] = sb_s[slot][jb[q]];", "b[q] = sb_s[slot][jb[0]];")],
    "promotion_skipped": [("course::desc_advance(db, 32 * k), k > 0 ? 1 : 0);",
                           "course::desc_advance(db, 32 * k), (kt > 0 || k > 0) ? 1 : 0);"),
                          ("acc[i] = fmaf(part[i], (i & 2) ? s_hi[i / 32] : s_lo[i / 32], acc[i]);",
                           "acc[i] = part[i] * ((i & 2) ? s_hi[i / 32] : s_lo[i / 32]);")],
    "b_scale_wrong_block": [("b[q] = sb_s[slot][jb[q]];", "b[q] = sb_s[(slot + S - 1) % S][jb[q]];")],
    "b_scale_tile_block": [("jb[q] = (n0 + 64 * q) / 128 - ((n0 / 128) & ~3);", "jb[q] = (n0 / 128) & 3;")],
    "setmaxnreg_without_launch_bounds": [("__global__ void __launch_bounds__(Cfg::THREADS, 1)", "__global__ void")],
}
# the shapes on which the values must catch each (a GPU run; tests/test_ch05_fp8.py, dev/ch05_hopper/fp8_gpu.py)
VALUE_CATCHES = {"per_tensor_scales": "(1000, 1032, 1024)", "promotion_skipped": "(200, 136, 8192)",
                 "b_scale_wrong_block": "(200, 136, 8192)", "b_scale_tile_block": "(1000, 1032, 1024)"}
RUBRIC_CATCHES = {"setmaxnreg_without_launch_bounds": "setmaxnreg"}
