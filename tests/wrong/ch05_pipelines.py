"""Lesson 05.03 (pipelines and warp specialization): wrong kernels its checks must catch
(tests/test_ch05_pipelines.py).

05.03's %%cuda cell with one mistake each (text replaced, as tests/wrong/ch05_hopper.py does). They
compile anywhere. Which check catches each:

* the rubric, on any machine (``RUBRIC_CATCHES``): setmaxnreg without ``__launch_bounds__(THREADS,
  1)`` (ptxas drops it, saying only C7508), and the epilogue's TMA store with no async-proxy fence
  after the shared-memory stores it reads;
* a Hopper GPU (``HANGS``, each in a process of its own): the consumers waiting for the wrong
  parity, a producer that never waits on ``empty`` (it overruns the ring), a release that reaches
  only its own CTA (the peer's producer waits for arrivals that never come), a multicast that
  reaches only its own CTA (the peer's ``full`` waits for bytes that never come). Each either
  computes wrong values or stops at the bounded wait's trap (about two seconds, well inside the
  grader's GPU timeout): never a hung notebook.
"""
from __future__ import annotations

from tests.wrong.ch05_hopper import cpp_variant  # noqa: F401  (one implementation of the text edit)

CHAPTER = "05_hopper_blackwell"
NOTEBOOK, CELL, RUBRIC, KERNEL = "03_pipelines.ipynb", "v_ws", "test_ws_sass", "ws_gemm<Ws<128, 256, 4, 2, 8>>"

PIPELINE_MISTAKES = {
    # the consumers wait for the phase before: a fresh full[s] answers at once, before TMA has landed
    "consumer_wrong_parity": [("course::mbar_wait_or_trap(&full[s], (it / S) & 1);",
                               "course::mbar_wait_or_trap(&full[s], ((it / S) & 1) ^ 1);")],
    # the producer never waits on empty[s]: it re-arms and refills slots the wgmmas still read
    "producer_overruns_ring": [("          course::mbar_wait_or_trap(&empty[s], ((it / S) & 1) ^ 1);\n", "")],
    # each consumer releases the slot on its own CTA only: empty[s] expects 4 arrivals and gets 2
    "release_own_cta_only": [("for (int r = 0; r < CL; ++r) course::mbar_arrive_cluster(&empty[s], r);",
                              "course::mbar_arrive_cluster(&empty[s], rank);")],
    # B's boxes multicast to this CTA only: the peer's full[s] waits for half of B for ever
    "multicast_own_cta_only": [("&full[s], (1 << CL) - 1);", "&full[s], 1 << rank);")],
    # setmaxnreg with no launch bounds: ptxas cannot tell the register count at entry, drops it
    # (C7508, 161 registers everywhere instead of 40 / 232) and the rubric says so. (With
    # __launch_bounds__(384) alone ptxas capped this kernel at 168 and kept setmaxnreg, nvcc 13.0;
    # a small kernel lost it that way too: the ", 1" makes it certain.)
    "setmaxnreg_without_launch_bounds": [("__global__ void __launch_bounds__(Cfg::THREADS, 1)",
                                          "__global__ void")],
    # the epilogue's TMA store may read C's staging boxes before the threads' stores reach the async proxy
    "epilogue_no_proxy_fence": [("        course::fence_proxy_async();                 // the stores above, visible to TMA\n",
                                 "")],
}
# on a GPU, each in a process of its own (a wrong kernel may spin until the bounded wait traps)
HANGS = {"consumer_wrong_parity", "producer_overruns_ring", "release_own_cta_only", "multicast_own_cta_only"}
# stopped by the trap for certain: arrivals or bytes that never come
MUST_TRAP = {"release_own_cta_only", "multicast_own_cta_only"}
RUBRIC_CATCHES = {"setmaxnreg_without_launch_bounds": "setmaxnreg", "epilogue_no_proxy_fence": "FENCE.VIEW.ASYNC.S"}
