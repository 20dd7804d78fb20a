"""Chapter 01 reference candidates on a GPU, in one run: saxpy, transpose and bias+GELU variants
against the copy bandwidth, plus the bias+GELU speed() variance study (host time per launch call,
the head start of grader.timing's EventTimer, a busy Python thread).

    python dev/ch01_elementwise/perf01_variants.py          # repository root, CUDA GPU

Candidates (perf01_kernels.py) are checked with grader.check and timed with grader.measure at the
problem's bench size, against the copy ceiling of this run (grader.peers.ceiling("copy")). The
variance study times the graded path twice: grader.speed itself (its adaptive head start: the
recorded measurement, common.graded), and the same timed runs with a fixed head start of 50 or
1000 µs (grader.speed.timed_checked: grader.timing.time_call with another timer, the outputs
re-poisoned before each run, the problem's peer on the same inputs). The fixed head start is kept
outside the grader on purpose: the grader only uses the adaptive one.
"""
from __future__ import annotations

import sys
import threading
import time

import common   # first: puts the repository on sys.path and imports grader

import numpy as np

import grader
from grader.speed import timed_checked
from grader.problems import elementwise as P

import perf01_kernels as K


def main():
    from numba import cuda

    if grader.SIMULATOR:
        print("No GPU: this script times kernels on a CUDA GPU.")
        return 2
    info = grader.device.info()
    sms = info.sm_count
    _, copy_bw = grader.peers.ceiling("copy")
    print(f"{info.name} ({info.arch}, {sms} SMs): copy bandwidth {copy_bw:,.0f} GB/s", flush=True)
    l02, l03, l04 = common.load()
    rows = []

    def measure(label, launch, problem, sizes, budget=0.5):
        t0 = time.time()
        status = common.correct(launch, problem, sizes)
        m = grader.measure(launch, problem, label, peer=None, budget_s=budget)
        rows.append((label, m.value, 100 * m.value / copy_bw, m.spread, status))
        print(f"  {label:44s} {m.value:7,.0f} GB/s {100 * m.value / copy_bw:5.1f}%  spread {100 * m.spread:4.1f}%"
              f"  {status}  ({time.time() - t0:.1f}s)", flush=True)
        return m

    sx = [1, 1000, 1_000_003, 65_537]
    print("saxpy n=2^27")
    measure("nb: strided 4/thread, 256", l02["launch_saxpy"], P.saxpy, sx)
    measure("nb: strided 4/thread, 1024", lambda *a: l02["launch_saxpy"](*a, threads=1024), P.saxpy, sx)
    k4, k8 = K.make_saxpy_chunk(4), K.make_saxpy_chunk(8)
    for K_, kern in [(4, k4), (8, k8)]:
        for threads, waves in [(256, 1), (256, 2), (256, 4), (256, 0), (512, 1), (1024, 1), (128, 1)]:
            if K_ == 8 and (threads, waves) in [(256, 4), (128, 1)]:
                continue
            launch = K.saxpy_launcher(kern, K_, sms, waves)
            measure(f"chunk{K_}, {threads} thr, waves={waves or 'all'}",
                    lambda *a, _l=launch, _t=threads: _l(*a, threads=_t), P.saxpy, sx)

    st = [(1023, 517), (67, 45), (1, 1000), (1000, 1), (4096, 4096)]
    print("transpose 8192^2 fp32")
    measure("nb: make_transpose(64,4,1)", l03["launch_transpose"], P.transpose, st)
    measure("fast path (64,4,1)", K.make_transpose_fast(64, 4, 1), P.transpose, st)
    for cfg in [(32, 8, 1), (32, 4, 1), (64, 4, 1), (64, 8, 1), (64, 16, 1)]:
        measure(f"staged {cfg}", K.make_transpose_staged(*cfg), P.transpose, st)
    for cfg in [(64, 4, 1), (64, 8, 1), (64, 16, 1)]:
        measure(f"words {cfg}", K.make_transpose_words(*cfg), P.transpose, st)

    sg = [(333, 1000), (2048, 4096), (7, 4), (1, 4096)]
    print("bias+GELU bf16 32768x4096")
    measure("nb: words, 2 rows", l04["launch_bias_gelu"], P.bias_gelu, sg)
    for label, kern, threads, waves in [("lean words, 2 rows, 256", K.gelu_words2, 256, 1),
                                        ("lean words, 4 rows, 256", K.gelu_words4, 256, 1),
                                        ("lean words, 4 rows, 512", K.gelu_words4, 512, 1),
                                        ("lean words, 4 rows, 1024", K.gelu_words4, 1024, 1),
                                        ("lean words, 4 rows, 256, 2 waves", K.gelu_words4, 256, 2)]:
        measure(label, K.gelu_launcher(kern, sms, threads, waves), P.bias_gelu, sg)

    # ---- host time of one launch call (small problem: the GPU is never the bottleneck)
    print("\nhost time per launch call (µs), padded-view arguments as grader.speed passes them")
    cands = {"saxpy nb": (l02["launch_saxpy"], P.saxpy, 4096),
             "transpose nb": (l03["launch_transpose"], P.transpose, (64, 64)),
             "transpose words(64,4,1)": (K.make_transpose_words(64, 4, 1), P.transpose, (64, 64)),
             "transpose staged(64,4,1)": (K.make_transpose_staged(64, 4, 1), P.transpose, (64, 64)),
             "gelu nb": (l04["launch_bias_gelu"], P.bias_gelu, (4, 4096)),
             "gelu lean4 launcher": (K.gelu_launcher(K.gelu_words4, sms), P.bias_gelu, (4, 4096))}
    for name, (launch, problem, size) in cands.items():
        _, dev_in, outs = common.device_args(problem, size)
        args = common.args_of(dev_in, outs)
        for _ in range(20):
            launch(*args)
        cuda.synchronize()
        ts = []
        for _ in range(300):
            t0 = time.perf_counter()
            launch(*args)
            ts.append(time.perf_counter() - t0)
        cuda.synchronize()
        ts = np.array(ts) * 1e6
        print(f"  {name:28s} median {np.median(ts):6.1f}  p90 {np.percentile(ts, 90):6.1f}  max {ts.max():7.1f}",
              flush=True)

    # ---- the graded path under different conditions: grader.speed itself (adaptive head start), and
    # its timed runs with a fixed head start (grader.speed.timed_checked), with or without a busy thread
    print("\ngrader.speed(launch, P.bias_gelu) / P.transpose / P.saxpy: the graded path")
    busy = {"on": False}

    def spinner():
        while busy["on"]:
            sum(range(2000))
    gelu_new = K.gelu_launcher(K.gelu_words4, sms, 256, 1)
    for label, launch, problem, sleep_us, spin in [
            ("gelu nb, graded (adaptive head start)", l04["launch_bias_gelu"], P.bias_gelu, None, False),
            ("gelu nb, graded, busy thread", l04["launch_bias_gelu"], P.bias_gelu, None, True),
            ("gelu nb, head start 50us", l04["launch_bias_gelu"], P.bias_gelu, 50, False),
            ("gelu nb, head start 50us, busy thread", l04["launch_bias_gelu"], P.bias_gelu, 50, True),
            ("gelu nb, head start 1000us", l04["launch_bias_gelu"], P.bias_gelu, 1000, False),
            ("gelu nb, head start 1000us, busy thread", l04["launch_bias_gelu"], P.bias_gelu, 1000, True),
            ("gelu lean4, graded", gelu_new, P.bias_gelu, None, False),
            ("gelu lean4, head start 50us", gelu_new, P.bias_gelu, 50, False),
            ("gelu lean4, head start 1000us", gelu_new, P.bias_gelu, 1000, False),
            ("transpose nb, 50us", l03["launch_transpose"], P.transpose, 50, False),
            ("transpose staged(64,4,1), 50us", K.make_transpose_staged(64, 4, 1), P.transpose, 50, False),
            ("saxpy chunk4 256 w1, 50us", K.saxpy_launcher(k4, 4, sms, 1), P.saxpy, 50, False)]:
        busy["on"] = spin
        th = threading.Thread(target=spinner, daemon=True)
        if spin:
            th.start()
        t0 = time.time()
        try:
            if sleep_us is None:          # the graded cell itself, and the measurement it recorded
                pts, rec = common.graded(launch, problem, points=2, budget_s=2.0)
                value, median_s, runs, spread, tail = rec["value"], rec["median_ms"] / 1e3, rec["runs"], rec["spread"], ""
            else:                         # its timed runs with a fixed head start
                pts, m = "-", timed_checked(launch, problem, timer=common.FixedHeadStart(sleep_us), budget_s=2.0)
                value, median_s, runs, spread = m.value, m.median_s, len(m.times_s), m.spread
                tail = f"  p90/min {np.percentile(m.times_s, 90) / min(m.times_s):.2f}"
            line = (f"  {label:44s} {value:7,.0f} GB/s {100 * value / copy_bw:5.1f}%  median {median_s * 1e3:.3f} ms"
                    f"  runs {runs:4d} spread {100 * spread:5.1f}%{tail}  points {pts}  ({time.time() - t0:.1f}s)")
        except Exception as exc:  # noqa: BLE001
            line = f"  {label:44s} ERROR {type(exc).__name__}: {str(exc)[:100]}"
        busy["on"] = False
        if spin:
            th.join()
        print(line, flush=True)

    print("\n| kernel | GB/s | % of copy | spread | check |\n|---|---|---|---|---|")
    for label, v, pct, spr, status in rows:
        print(f"| {label} | {v:,.0f} | {pct:.1f}% | {100 * spr:.1f}% | {status} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
