"""Chapter 01 reference candidates on a GPU, in one run: saxpy, transpose and bias+GELU variants
against the copy bandwidth, plus the bias+GELU speed() variance study (host time per launch call,
the 50 µs head start of grader.bench's EventTimer, a busy Python thread, L2 flush order).

    python tests/gpu/perf01_variants.py          # repository root, CUDA GPU
"""
from __future__ import annotations

import sys
import threading
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "gpu"))

import numpy as np  # noqa: E402

import grader  # noqa: E402
from grader.check import _device_output, _to_device_padded  # noqa: E402
from grader.problems import elementwise as P  # noqa: E402
from measure_ch01 import correct, device_inputs, load  # noqa: E402

import perf01_kernels as K  # noqa: E402

BENCH = sys.modules["grader.bench"]
SPEED = sys.modules["grader.speed"]


def main():
    from numba import cuda

    info = grader.device.info()
    sms = info.sm_count
    _, copy_bw = grader.device.peer("copy")
    print(f"{info.name} ({info.arch}, {sms} SMs): copy bandwidth {copy_bw:,.0f} GB/s", flush=True)
    l02, l03, l04 = load()
    rows = []

    def measure(label, launch, problem, sizes, budget=0.5):
        t0 = time.time()
        status = correct(launch, problem, sizes)
        _, dargs, outs = device_inputs(problem, problem.bench_size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = grader.bench(lambda: launch(*dargs, *outs), label=label, budget_s=budget, peer=None,
                             bytes=problem.bytes_moved(problem.bench_size))
        rows.append((label, m.value, 100 * m.value / copy_bw, m.spread, status))
        print(f"  {label:44s} {m.value:7,.0f} GB/s {100 * m.value / copy_bw:5.1f}%  spread {100 * m.spread:4.1f}%"
              f"  {status}  ({time.time() - t0:.1f}s)", flush=True)
        return m

    sx = [(1, 1000, 1_000_003, 65_537)]
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
        inputs = problem.make_inputs(np.random.default_rng(0), size)
        args = [(_to_device_padded(v)[1] if isinstance(v, np.ndarray) else v) for v in inputs.values()]
        outs = [_device_output(s, d)[1] for s, d in problem.outputs(size, inputs).values()]
        for _ in range(20):
            launch(*args, *outs)
        cuda.synchronize()
        ts = []
        for _ in range(300):
            t0 = time.perf_counter()
            launch(*args, *outs)
            ts.append(time.perf_counter() - t0)
        cuda.synchronize()
        ts = np.array(ts) * 1e6
        print(f"  {name:28s} median {np.median(ts):6.1f}  p90 {np.percentile(ts, 90):6.1f}  max {ts.max():7.1f}",
              flush=True)

    # ---- the graded path, grader.speed, under different conditions
    print("\ngrader.speed(launch, P.bias_gelu) / P.transpose / P.saxpy: the graded path")
    captured = []
    orig_bench = SPEED.bench

    def spy(*a, **k):
        m = orig_bench(*a, **k)
        captured.append(m)
        return m
    SPEED.bench = spy
    busy = {"on": False}

    def spinner():
        while busy["on"]:
            sum(range(2000))
    gelu_new = K.gelu_launcher(K.gelu_words4, sms, 256, 1)
    for label, launch, problem, sleep_us, spin in [
            ("gelu nb, head start 50us", l04["launch_bias_gelu"], P.bias_gelu, 50, False),
            ("gelu nb, head start 50us, busy thread", l04["launch_bias_gelu"], P.bias_gelu, 50, True),
            ("gelu nb, head start 1000us", l04["launch_bias_gelu"], P.bias_gelu, 1000, False),
            ("gelu nb, head start 1000us, busy thread", l04["launch_bias_gelu"], P.bias_gelu, 1000, True),
            ("gelu lean4, head start 50us", gelu_new, P.bias_gelu, 50, False),
            ("gelu lean4, head start 1000us", gelu_new, P.bias_gelu, 1000, False),
            ("transpose nb, 50us", l03["launch_transpose"], P.transpose, 50, False),
            ("transpose staged(64,4,1), 50us", K.make_transpose_staged(64, 4, 1), P.transpose, 50, False),
            ("saxpy chunk4 256 w1, 50us", K.saxpy_launcher(k4, 4, sms, 1), P.saxpy, 50, False)]:
        BENCH.keep_gpu_busy.__defaults__ = (sleep_us,)
        busy["on"] = spin
        th = threading.Thread(target=spinner, daemon=True)
        if spin:
            th.start()
        t0 = time.time()
        try:
            pts = grader.speed(launch, problem, points=2, budget_s=2.0)
        except Exception as exc:  # noqa: BLE001
            pts = f"ERROR {type(exc).__name__}: {str(exc)[:100]}"
        busy["on"] = False
        if spin:
            th.join()
        m = captured[-1]
        print(f"  {label:44s} {m.value:7,.0f} GB/s {100 * m.value / copy_bw:5.1f}%  median {m.median_s * 1e3:.3f} ms"
              f"  runs {len(m.times_s):4d} spread {100 * m.spread:5.1f}%  p90/min {np.percentile(m.times_s, 90) / min(m.times_s):.2f}"
              f"  points {pts}  ({time.time() - t0:.1f}s)", flush=True)
    BENCH.keep_gpu_busy.__defaults__ = (50,)

    print("\n| kernel | GB/s | % of copy | spread | check |\n|---|---|---|---|---|")
    for label, v, pct, spr, status in rows:
        print(f"| {label} | {v:,.0f} | {pct:.1f}% | {100 * spr:.1f}% | {status} |")


if __name__ == "__main__":
    main()
