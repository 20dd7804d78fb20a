"""Lesson 05.02 (WGMMA): wrong kernels its checks must catch (tests/test_ch05_wgmma.py).

05.02's %%cuda cell with one mistake each (text replaced, as tests/wrong/ch05_hopper.py does). They
compile anywhere. Which check catches each:

* the values, on a Hopper GPU (``VALUES``): descriptors that disagree with the layout TMA wrote
  (the swizzle mode, SBO, LBO, the k step, the transpose flag) and the epilogue's rows;
* the rubric, on any machine (``RUBRIC_CATCHES``: mistake -> what the rubric says): the missing
  ``wgmma.fence`` (the SASS is identical without it: ptxas inserts the arrive itself, nvcc 13.0),
  a wait that leaves two groups running, no wait before the refill, and reading the accumulators
  after a ``wait_group 1`` (ptxas serializes every wgmma then: right values, slow). Those that are
  races may or may not show in the values; the GPU tests record what they did.
"""
from __future__ import annotations

from tests.wrong.ch05_hopper import cpp_variant  # noqa: F401  (one implementation of the text edit)

CHAPTER = "05_hopper_blackwell"
NOTEBOOK, CELL, RUBRIC, KERNEL = "02_wgmma.ipynb", "v_wgmma", "test_wgmma_sass", "wgmma_gemm<Wg<128, 256, 4>>"

_DA = "const unsigned long long da = course::make_smem_desc(a_addr, 16, 1024, course::DESC_SWIZZLE_128B);"
_DB = "const unsigned long long db = course::make_smem_desc(b_addr, Cfg::B_BOX_BYTES, 1024, course::DESC_SWIZZLE_128B);"
_MMA = "course::wgmma_bf16<0, 1>(acc, course::desc_advance(da, 32 * k), course::desc_advance(db, 2048 * k));"

WGMMA_MISTAKES = {
    # the descriptors say 64-byte swizzle while the tensor maps wrote 128-byte swizzled tiles
    "desc_swizzle_64b": [(_DA, _DA.replace("DESC_SWIZZLE_128B", "DESC_SWIZZLE_64B")),
                         (_DB, _DB.replace("DESC_SWIZZLE_128B", "DESC_SWIZZLE_64B"))],
    # the tensor map's enum value (CU_TENSOR_MAP_SWIZZLE_128B = 3) written into the descriptor: 3 is 32 B there
    "desc_swizzle_map_code": [(_DA, _DA.replace("course::DESC_SWIZZLE_128B", "3")),
                              (_DB, _DB.replace("course::DESC_SWIZZLE_128B", "3"))],
    # A's SBO as one row (128 B) instead of one 8-row atom (1024 B)
    "a_sbo_one_row": [(_DA, _DA.replace("16, 1024", "16, 128"))],
    # B's LBO and SBO swapped: 8-row atoms of k 8 KiB apart, N blocks 1 KiB apart
    "b_lbo_sbo_swapped": [(_DB, "const unsigned long long db = course::make_smem_desc(b_addr, 1024, Cfg::B_BOX_BYTES, "
                                "course::DESC_SWIZZLE_128B);")],
    # B stepped along k like A (32 B) although B is N-major: a k16 step there is 16 rows, 2048 B
    "b_step_like_a": [(_MMA, _MMA.replace("desc_advance(db, 2048 * k)", "desc_advance(db, 32 * k)"))],
    # A stepped 16 B per k16 step (16 elements taken for 16 bytes)
    "a_step_in_elements": [(_MMA, _MMA.replace("desc_advance(da, 32 * k)", "desc_advance(da, 16 * k)"))],
    # imm-trans-b 0: B read as if K-major
    "b_not_transposed": [(_MMA, _MMA.replace("wgmma_bf16<0, 1>", "wgmma_bf16<0, 0>"))],
    # the epilogue forgets which warpgroup's 64 rows these are
    "epilogue_no_warpgroup_rows": [("const int row = m0 + wg * 64 + course::wgmma_acc_row(i)",
                                    "const int row = m0 + course::wgmma_acc_row(i)")],
    # no wgmma.fence before the wgmmas that read the zeroed accumulators
    "no_wgmma_fence": [("    course::wgmma_fence();\n", "")],
    # the main loop waits only for the group before last: TMA may refill a slot a wgmma still reads
    "wait_two_groups": [("course::wgmma_wait<1>();", "course::wgmma_wait<2>();")],
    # no wait in the main loop at all: the refill races every wgmma of the previous k tile
    "no_wait_before_refill": [("    course::wgmma_wait<1>();\n", "")],
    # the accumulators read after wait_group 1: ptxas waits after every wgmma (C7514)
    "final_wait_one": [("course::wgmma_wait<0>();", "course::wgmma_wait<1>();")],
}

VALUES = {"desc_swizzle_64b", "desc_swizzle_map_code", "a_sbo_one_row", "b_lbo_sbo_swapped", "b_step_like_a",
          "a_step_in_elements", "b_not_transposed", "epilogue_no_warpgroup_rows"}
RUBRIC_CATCHES = {
    "no_wgmma_fence": "no wgmma.fence",
    "wait_two_groups": "leaves 2 wgmma groups running",
    "no_wait_before_refill": "with no WARPGROUP.DEPBAR.LE between",
    "final_wait_one": "serialized",
}
assert VALUES | set(RUBRIC_CATCHES) == set(WGMMA_MISTAKES)
