"""Lesson 03.04's checkpoint (the one-stage mma.sync kernel, cell ``v_1stage``): wrong versions its
checks must catch, each the solution cell with one text edit (tests.wrong.ch05_hopper.cpp_variant).
They compile anywhere. Which check catches each (tests/test_ch03_mma.py):

* the SASS rubric, on any machine (``RUBRIC_CATCHES``: mistake -> what the rubric says);
* the CPU model of the cell's index arithmetic (``MODEL_CATCHES``): it runs the cell's own address and
  register expressions on small integer matrices, sequentially, and compares with numpy;
* a GPU only (``GPU_ONLY``): a missing barrier is a race between warps, which the sequential model
  cannot see and the values show only when the timing is unlucky (tests marked ``gpu`` record it).
"""
from __future__ import annotations

from tests.wrong.ch05_hopper import cpp_variant  # noqa: F401  (one implementation of the text edit)

CHAPTER = "03_gemm"
NOTEBOOK, CELL, RUBRIC, CHECK, KERNEL = ("04_mma_sync_pipeline.ipynb", "v_1stage", "test_1stage_sass",
                                         "test_1stage_check", "hgemm_1stage<One>")

_A_ADDR = "a_at(sA, wm + 16 * i + lane % 16, ks + 8 * (lane / 16))"
_B_REGS = "course::ldmatrix_x4_trans(b[j][0], b[j][1], b[j + 1][0], b[j + 1][1],"
_SYNC_AFTER_COPY = "    __syncthreads();                                        // …and everyone's\n"
_SYNC_BEFORE_NEXT = "    __syncthreads();                                        // everyone is done reading before the next copy\n"

MISTAKES = {
    # B read with the plain ldmatrix: each lane gets n pairs of one k row instead of k pairs of one n column
    "b_without_trans": [("course::ldmatrix_x4_trans(", "course::ldmatrix_x4(")],
    # A's row addresses repeat every 8 lanes: rows 8-15 of each m16 tile are never read
    "a_rows_lane_mod_8": [(_A_ADDR, _A_ADDR.replace("lane % 16", "lane % 8"))],
    # the x4.trans registers in matrix order taken as (tile j, tile j + 1) pairs: k halves of the tiles mixed
    "b_registers_swapped": [(_B_REGS, "course::ldmatrix_x4_trans(b[j][0], b[j + 1][0], b[j][1], b[j + 1][1],")],
    # the k16 steps both read the first 16 columns of the tile
    "second_k_step_rereads_the_first": [(_A_ADDR, _A_ADDR.replace("ks + 8 * (lane / 16)", "8 * (lane / 16)"))],
    # no barrier after the copies: a warp may read the tile before other threads' copies landed
    "no_barrier_after_copy": [(_SYNC_AFTER_COPY, "")],
    # no barrier after the mmas: the next copy may overwrite the tile while another warp reads it
    "no_barrier_before_next_copy": [(_SYNC_BEFORE_NEXT, "")],
}

RUBRIC_CATCHES = {"b_without_trans": "missing LDSM.16.MT88.4"}
MODEL_CATCHES = {"b_without_trans", "a_rows_lane_mod_8", "b_registers_swapped", "second_k_step_rereads_the_first"}
GPU_ONLY = {"no_barrier_after_copy", "no_barrier_before_next_copy"}
assert set(MISTAKES) == MODEL_CATCHES | GPU_ONLY
