"""Lesson 05.07 (FlashAttention-3 ideas): wrong kernels its checks must catch (tests/test_ch05_flash3.py).

05.07's %%cuda cell with one mistake each (text replaced, as tests/wrong/ch05_hopper.py does). They
compile anywhere. Which check catches each:

* the rubric, on any machine (``RUBRIC_CATCHES``): setmaxnreg without ``__launch_bounds__(THREADS, 1)``
  (ptxas drops it, saying only C7508);
* a Hopper GPU, each in a process of its own (``ON_GPU``): the ping-pong turn handed to the consumer's
  own barrier instead of the other one's (the other consumer waits for a turn that never comes: the
  bounded wait traps within about two seconds — never a hung notebook); the softmax rescale skipped
  when a row's max changes (O and l keep terms scaled to an older max: wrong wherever the max grows
  along the keys, the "growing" sizes); the keys past Sk left unmasked (TMA reads them as zeros, and
  a score of 0 still takes its share of the softmax: far off at a short Sk such as 65 — 63 zero keys
  in its one tile — while over thousands of keys the few zeros hide inside the bf16 tolerance).
"""
from __future__ import annotations

from tests.wrong.ch05_hopper import cpp_variant  # noqa: F401  (one implementation of the text edit)

CHAPTER = "05_hopper_blackwell"
NOTEBOOK, CELL, RUBRIC, KERNEL = "07_flash3.ipynb", "v_flash3", "test_flash3_sass", "flash3<F3<128, 1, 1, 1>>"

FLASH3_MISTAKES = {
    # each consumer hands the turn to itself: consumer 1 waits on turn[1] for ever
    "pingpong_turn_to_self": [("if (lane == 0) course::mbar_arrive(&turn[wg ^ 1]);",
                               "if (lane == 0) course::mbar_arrive(&turn[wg]);")],
    # O and l are never rescaled when the max grows
    "no_rescale_on_max_change": [("alpha[r] = ex2(m[r] - ref[r]);", "alpha[r] = 1.f;")],
    # keys past the end of the sequence are not masked: TMA's zeros become scores of 0
    "ragged_keys_unmasked": [("if (col >= Sk || (causal && col > row)) s_acc[i] = -INFINITY;",
                              "if (causal && col > row) s_acc[i] = -INFINITY;")],
    # setmaxnreg with no launch bounds: ptxas cannot tell the register count at entry and drops it
    "setmaxnreg_without_launch_bounds": [("__global__ void __launch_bounds__(C::THREADS, 1)", "__global__ void")],
}
ON_GPU = {"pingpong_turn_to_self", "no_rescale_on_max_change", "ragged_keys_unmasked"}
MUST_TRAP = {"pingpong_turn_to_self"}          # stopped by the bounded wait's trap, not by the values
RUBRIC_CATCHES = {"setmaxnreg_without_launch_bounds": "setmaxnreg"}
