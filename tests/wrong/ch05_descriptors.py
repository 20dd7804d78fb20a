"""Chapter 05: descriptor and TMA-box mistakes the CPU replay must catch (tests/test_replay.py).

The replay (grader/cuda/wgmma_replay.py, grader/cuda/tma_replay.py) runs one block of a lesson's
compiled kernel from its PTX and checks what each wgmma and TMA copy reads. Which mistakes it must
catch, lesson by lesson (each a text edit of the solution's %%cuda cell, as tests/wrong/ch05_hopper.py):

* 05.01: every mistake of ``ch05_hopper.TMA_MISTAKES`` (hangs included: the replay finds them as
  waits that can never complete);
* 05.02: the descriptor mistakes of ``ch05_wgmma.WGMMA_MISTAKES`` (``ch05_wgmma.VALUES`` but the
  epilogue's, which no descriptor shows);
* 05.03 (its cluster-of-1 configuration): ``ch05_pipelines``'s consumer parity, producer overrun and
  missing epilogue fence (the cluster mistakes need two CTAs: a GPU's);
* 05.06 and 05.07: the ones below (their own wrong lists hold value and rubric mistakes only), plus
  05.06's ``promotion_skipped`` (scale-d of each k block's first wgmma) and 05.07's
  ``pingpong_turn_to_self`` (a hang).

``PHRASE``: mistake -> words the replay's message must contain.
"""
from __future__ import annotations

from tests.wrong.ch05_hopper import cpp_variant  # noqa: F401

_FP8_A = ("const unsigned long long da0 = opaque(course::make_smem_desc(course::smem_u32(a_slot(0)) + rows * 128, 16,\n"
          "                                                                 1024, course::DESC_SWIZZLE_128B));")
_FP8_B = ("const unsigned long long db0 = opaque(course::make_smem_desc(course::smem_u32(b_slot(0)), 16, 1024,\n"
          "                                                                 course::DESC_SWIZZLE_128B));")
_FP8_MMA = "course::wgmma_e4m3(part, course::desc_advance(da, 32 * k), course::desc_advance(db, 32 * k), k > 0 ? 1 : 0);"

FP8_DESCRIPTOR_MISTAKES = {
    # B's tiles said to be 64-byte swizzled: TMA wrote them with the 128-byte swizzle
    "b_swizzle_64b": [(_FP8_B, _FP8_B.replace("DESC_SWIZZLE_128B", "DESC_SWIZZLE_64B"))],
    # A's SBO as 512 B (8 rows of 64 B): the rows are 128 B of fp8
    "a_sbo_half": [(_FP8_A, _FP8_A.replace("16,\n                                                                 1024,",
                                           "16,\n                                                                 512,"))],
    # k steps of 16 bytes, as if K were bf16's 16 elements: fp8's k32 step is 32 bytes
    "k_step_16_bytes": [(_FP8_MMA, _FP8_MMA.replace("desc_advance(da, 32 * k)", "desc_advance(da, 16 * k)")
                         .replace("desc_advance(db, 32 * k)", "desc_advance(db, 16 * k)"))],
    # the warpgroup's rows forgotten: both consumers read rows 0–63 of A
    "a_rows_of_warpgroup_0": [(_FP8_A, _FP8_A.replace(" + rows * 128", ""))],
}

_QA = "const unsigned qa = course::smem_u32(q_tile) + (kk / 4) * C::CHUNK_Q + wg * 64 * 128 + 32 * (kk % 4);"
_KB = "const unsigned kb = course::smem_u32(k_slot(s)) + (kk / 4) * C::CHUNK_KV + 32 * (kk % 4);"
_PV = ("course::wgmma_rs_bf16<1>(o_acc, a, course::make_smem_desc(vb + 2048 * kk, C::CHUNK_KV, 1024,\n"
       "                                                                course::DESC_SWIZZLE_128B));")

FLASH3_DESCRIPTOR_MISTAKES = {
    # V's LBO as one 8-row group (1024 B) instead of the next 64-column box of the head dimension
    "v_lbo_one_atom": [(_PV, _PV.replace("C::CHUNK_KV, 1024", "1024, 1024"))],
    # V stepped along the keys by 32 B (as if K-major): V is N-major, a k16 step is 16 rows (2048 B)
    "v_step_like_k": [(_PV, _PV.replace("vb + 2048 * kk", "vb + 32 * kk"))],
    # the second 64 columns of the head dimension looked for right after the first (+128 B), not in the next box
    "k_box_not_chunk": [(_KB, _KB.replace("(kk / 4) * C::CHUNK_KV", "(kk / 4) * 128"))],
    # both consumer warpgroups read Q's rows 0–63
    "q_rows_of_warpgroup_0": [(_QA, _QA.replace(" + wg * 64 * 128", ""))],
}

PHRASE = {
    # 05.01 (ch05_hopper.TMA_MISTAKES)
    "wrong_parity": "before TMA's load landed",
    "expect_tx_bytes": "transaction bytes still due",
    "no_proxy_fence": "fence.proxy.async",
    "coords_swapped": "{column, row}",
    "unswizzled_read": "the swizzle",
    # 05.02 (ch05_wgmma.WGMMA_MISTAKES)
    "desc_swizzle_64b": "swizzle code 2 means 64B",
    "desc_swizzle_map_code": "CU_TENSOR_MAP_SWIZZLE_128B's value in the driver's enum",
    "a_sbo_one_row": "stride byte offset (SBO) is 128 B; this slice needs 1024 B",
    "b_lbo_sbo_swapped": "LBO and SBO are swapped",
    "b_step_like_a": "one k16 step is 16 rows",
    "a_step_in_elements": "A's start moves",
    "b_not_transposed": "with imm-trans-b = 1",
    # 05.03 (ch05_pipelines.PIPELINE_MISTAKES)
    "consumer_wrong_parity": "the bytes were not there when the wgmma read them",
    "producer_overruns_ring": "the block hangs",
    "epilogue_no_proxy_fence": "fence.proxy.async",
    # 05.06
    "b_swizzle_64b": "swizzle code 2 means 64B",
    "a_sbo_half": "stride byte offset (SBO) is 512 B",
    "k_step_16_bytes": "more than once",
    "a_rows_of_warpgroup_0": "all read rows 0–63",
    "promotion_skipped": "scale-d 0 on its first wgmma",
    # 05.07
    "v_lbo_one_atom": "leading byte offset (LBO) is 1024 B",
    "v_step_like_k": "one k16 step is 16 rows",
    "k_box_not_chunk": "start address",
    "q_rows_of_warpgroup_0": "all read rows 0–63",
    "pingpong_turn_to_self": "the block hangs",
}
