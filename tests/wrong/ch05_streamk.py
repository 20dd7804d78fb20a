"""Lesson 05.04 (schedules: Stream-K and a fused epilogue): wrong kernels its checks must catch
(tests/test_ch05_streamk.py, dev/ch05_hopper/streamk_gpu.py).

05.04's schedules cell with one mistake each (text replaced, as tests/wrong/ch05_hopper.py does). They
compile anywhere. Which check catches each:

* on a Hopper GPU, each in a process of its own (``VALUE_CATCHES``, with the shapes that show it):
  ``fixup_without_waiting`` — the owner of a split tile reads the tile's sum without waiting for
  its count: a race, it reads (and clears) a sum the other CTAs are still adding into;
  ``range_drops_last_partial`` — each CTA's range is c·⌊iters / gridDim.x⌋: the last
  iters mod gridDim.x k steps belong to nobody, so the last split tile misses its end (and with
  fewer iterations than CTAs, every split tile is left unwritten: NaN);
  ``owner_waits_for_empty_ranges`` — the owner also counts CTAs whose range is empty (fewer
  iterations than CTAs): a count never reached, so the bounded wait traps (must not hang);
  ``gelu_without_bias`` — the fused epilogue forgets the bias;
* the rubric, on any machine (``RUBRIC_CATCHES``): setmaxnreg without ``__launch_bounds__``.
"""
from __future__ import annotations

from tests.wrong.ch05_hopper import cpp_variant  # noqa: F401  (one implementation of the text edit)

CHAPTER = "05_hopper_blackwell"
NOTEBOOK, CELL, RUBRIC = "05_schedules.ipynb", "v_sk", "test_sk_sass"
KERNEL, FUSED = "sk_gemm<Sk<128, 256, 4, 8, Plain>>", "sk_gemm<Sk<128, 256, 4, 8, BiasGelu>>"

STREAMK_MISTAKES = {
    "fixup_without_waiting": [("        if (signaller) sm90::wait_flag_or_trap(&counts[t - dp_tiles], pieces);\n", "")],
    "range_drops_last_partial": [("return (int)(c * iters / gridDim.x);", "return (int)(c * (iters / gridDim.x));")],
    "owner_waits_for_empty_ranges": [("pieces += range_begin(c + 1) > range_begin(c);", "pieces += 1;")],
    "gelu_without_bias": [("const float x = acc + bias;", "const float x = acc;")],
    "setmaxnreg_without_launch_bounds": [("__global__ void __launch_bounds__(Cfg::THREADS, 1)", "__global__ void")],
}
# (problem, shape) on which the values must catch each, on a GPU; "fused" mistakes use the fused problem
VALUE_CATCHES = {"fixup_without_waiting": ("streamk", "(2304, 2048, 8192)"),
                 "range_drops_last_partial": ("streamk", "(2304, 2048, 8192)"),
                 "owner_waits_for_empty_ranges": ("streamk", "(120, 200, 8200)"),
                 "gelu_without_bias": ("fused", "(1000, 1032, 1016)")}
MUST_TRAP = {"owner_waits_for_empty_ranges"}
RUBRIC_CATCHES = {"setmaxnreg_without_launch_bounds": "setmaxnreg"}
