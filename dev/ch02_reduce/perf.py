"""Chapter 02's graded references on a GPU: why the graded path was slower, and candidate kernels.

    python dev/ch02_reduce/perf.py [--quick]

1. The timer: the sleep kernel's real length, the host time of each launch function, whether the
   output re-poisoning (a device-to-device copy) blocks the host, and the graded path for the sum:
   grader.speed itself (the adaptive head start), and its timed runs with the old fixed 50 µs head
   start (grader.speed.timed_checked: grader.timing.time_call with EventTimer(adaptive=False), outputs
   re-poisoned, the problem's peer on the same inputs). The fixed head start and the timer's
   internals (its sleep kernel, its step length) are looked at here on purpose: the grader only
   uses the adaptive head start.
2. Candidate kernels (variants.py) at the graded sizes, on the problems' own inputs (seed 0, uploaded
   as grader.speed uploads them), checked with grader.check's run_case + verdict (float64 reference;
   the sum against a relative 1e-4, tighter than the graded tolerance; softmax and RMSNorm with the
   graded tolerance), timed with grader.speed.timed (L2 flushed, the graded timer), each beside its
   peer measured on the same inputs in this run (grader.peers).
3. grader.speed on the notebooks' launch functions (the graded call).
"""
from __future__ import annotations

import statistics
import sys
import time
import traceback

import common   # first: puts the repository on sys.path and imports grader

import grader
from grader.speed import timed_checked
import numpy as np
from grader import arrays, timing
from grader.problems import reduce as P
from grader.speed import timed

import variants as V

T0 = time.time()
# the sum checked against a relative 1e-4 (the graded tolerance allows more: atomics in any order)
SUM_TIGHT = P.total_sum.variant(name="sum (perf.py: 1e-4)", tolerance=lambda n, dtype: (1e-4, 0.0))


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


def graded(launch, problem, adaptive=True) -> dict:
    """The graded path's measurement as a dict (value, fraction, runs, spread): grader.speed itself
    (adaptive head start), or its timed runs with the fixed 50 µs head start."""
    if adaptive:
        return common.graded(launch, problem, points=2)[1]
    return timed_checked(launch, problem, timer=timing.EventTimer(adaptive=False)).as_dict()


def host_us(fn, n=30):
    from numba import cuda

    out = []
    for _ in range(n):
        cuda.synchronize()
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    cuda.synchronize()
    return 1e6 * statistics.median(out[3:])


def main(argv):
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    if grader.SIMULATOR:
        print("No GPU: this script times kernels on a CUDA GPU.")
        return 2
    import torch
    from numba import cuda

    quick = "--quick" in argv
    dev = grader.device.info().name
    copy_label, copy = grader.peers.ceiling("copy")
    log(f"device {dev}; {copy_label} {copy:,.0f} GB/s")

    ns2 = common.load("02_warps.ipynb", ["v1_warp", "v2_block", "v3_grid_stride"])
    ns3 = common.load("03_softmax.ipynb", ["given", "v1_naive", "online_state", "v3_online", "v4_registers"])
    ns4 = common.load("04_norms.ipynb", ["given", "v2_rmsnorm", "v3_registers"])

    # ---------------------------------------------------------------- 1. the timer
    timing.keep_gpu_busy(50)
    log(f"sleep step: {timing._sleep_ns_per_step:.0f} ns (nanosleep(1000) per step)")
    for us in (50, 200):
        a, b = cuda.event(), cuda.event()
        timing._sleep[1, 1](100)
        a.record()
        timing.keep_gpu_busy(us)
        b.record()
        b.synchronize()
        log(f"keep_gpu_busy({us}) lasted {cuda.event_elapsed_time(a, b) * 1e3:.0f} µs on the GPU")

    # the problems' own inputs at their bench sizes, on the device as grader.speed puts them
    n, rows3, rows4 = P.total_sum.bench_size, P.softmax_bf16.bench_size, P.rmsnorm_bf16.bench_size
    in_sum, dev_sum, out_sum = common.device_args(P.total_sum, n)
    in_sm, dev_sm, out_sm = common.device_args(P.softmax_bf16, rows3)
    in_rm, dev_rm, out_rm = common.device_args(P.rmsnorm_bf16, rows4)
    args_sum, args_sm = common.args_of(dev_sum, out_sum), common.args_of(dev_sm, out_sm)
    args_rm = common.args_of(dev_rm, out_rm)
    xs = arrays.as_torch(dev_sum["x"])

    log(f"host µs: launch_sum {host_us(lambda: ns2['launch_sum'](*args_sum)):.0f}, "
        f"softmax launch_registers {host_us(lambda: ns3['launch_registers'](*args_sm)):.0f}, "
        f"rms launch_rmsnorm_registers {host_us(lambda: ns4['launch_rmsnorm_registers'](*args_rm)):.0f}, "
        f"one view {host_us(lambda: args_sm[0].view(np.uint32)):.0f}, "
        f"torch.sum {host_us(lambda: torch.sum(xs)):.0f}")
    small, pristine = cuda.device_array(1024, np.float32), cuda.device_array(1024, np.float32)
    blocked = []
    for _ in range(5):
        cuda.synchronize()
        timing.flush_l2()
        e = cuda.event()
        e.record()
        t = time.perf_counter()
        small.copy_to_device(pristine)
        dt = time.perf_counter() - t
        blocked.append((1e6 * dt, e.query()))
    log(f"re-poison (DtoD copy) after a flush: host µs and whether the flush had finished: {blocked}")

    for adaptive in (False, True):
        for _ in range(2):
            d = graded(ns2["launch_sum"], P.total_sum, adaptive=adaptive)
            log(f"graded sum, notebook v3, {'adaptive' if adaptive else 'fixed 50 µs'} head start: "
                f"{d['value']:,.0f} GB/s = {d['fraction']:.3f} of {d['peer']}; runs {d['runs']}, spread {d['spread']:.3f}")
        m = grader.measure(ns2["launch_sum"], P.total_sum, "v3", peer="copy")
        log(f"   measure (no re-poison), adaptive head start: {m.value:,.0f} GB/s ({len(m.times_s)} runs)")
        if not adaptive:
            ts = timing.time_call(lambda: ns2["launch_sum"](*args_sum), timer=timing.EventTimer(adaptive=False))
            log(f"   measure with fixed 50 µs: {P.total_sum.bytes_moved(n) / np.median(ts) / 1e9:,.0f} GB/s "
                f"({len(ts)} runs)")

    def slow_host(launch, us=40.0):          # the launch function with more host time, as in a busy kernel
        def run(*a):
            t = time.perf_counter()
            while time.perf_counter() - t < us * 1e-6:
                pass
            launch(*a)
        return run

    for adaptive in (False, True):
        d = graded(slow_host(ns2["launch_sum"]), P.total_sum, adaptive=adaptive)
        log(f"graded sum, launch function +40 µs of host time, {'adaptive' if adaptive else 'fixed 50 µs'} "
            f"head start: {d['value']:,.0f} GB/s = {d['fraction']:.3f} of {d['peer']}; runs {d['runs']}, spread {d['spread']:.3f}")

    # ---------------------------------------------------------------- 2. candidates
    check = {"sum": common.checker(SUM_TIGHT, n, in_sum),
             "softmax": common.checker(P.softmax_bf16, rows3, in_sm),
             "rms": common.checker(P.rmsnorm_bf16, rows4, in_rm)}
    setup = {"sum": (P.total_sum, n, dev_sum, args_sum, P.torch_sum),
             "softmax": (P.softmax_bf16, rows3, dev_sm, args_sm, P.softmax_bf16.peer),
             "rms": (P.rmsnorm_bf16, rows4, dev_rm, args_rm, P.rmsnorm_bf16.peer)}
    cands = [
        ("sum", "notebook v3 (8 acc, zero kernel)", lambda: ns2["launch_sum"]),
        ("sum", "4 acc, zero kernel (previous v3)", lambda: V.make_sum(4)),
        ("sum", "8 acc, 16 blocks/SM", lambda: V.make_sum(8, blocks_per_sm=16)),
        ("sum", "8 acc, last block finishes", lambda: V.make_sum_lastblock(8)),
        ("sum", "8 acc, last block, 16 blocks/SM", lambda: V.make_sum_lastblock(8, blocks_per_sm=16)),
        ("softmax", "notebook v4 (u64×8, 256 thr, exp2)", lambda: ns3["launch_registers"]),
        ("softmax", "u64×8 256thr exp kept fastmath", lambda: V.make_softmax_w64(8, 256, True)),
        ("softmax", "u64×8 256thr exp2 kept", lambda: V.make_softmax_w64(8, 256, True, fast=False, exp2=True)),
        ("softmax", "u64×4 512thr exp2 kept", lambda: V.make_softmax_w64(4, 512, True, fast=False, exp2=True)),
        ("softmax", "u64×8 256thr exp2 twice", lambda: V.make_softmax_w64(8, 256, False, fast=False, exp2=True)),
        ("rms", "notebook v3 (u64×8, 128 thr)", lambda: ns4["launch_rmsnorm_registers"]),
        ("rms", "u32×8 256thr", lambda: V.make_rms_w32(8, 256)),
        ("rms", "u64×4 256thr", lambda: V.make_rms_w64(4, 256)),
        ("rms", "u64×16 64thr", lambda: V.make_rms_w64(16, 64)),
    ]
    if quick:
        cands = [c for c in cands if "notebook" in c[1]]
    table, best = [], {}
    for prob, label, make in cands:
        try:
            launch = make()
            problem, size, dev_in, args, peer = setup[prob]
            failures = check[prob](launch)
            bad = len(failures)
            m = timed(lambda: launch(*args), label=label, work=problem.work(size), peer=peer, peer_inputs=dev_in,
                      size=size, budget_s=1.5)
            ratio_copy = m.value / copy
            row = (prob, label, f"{m.value:,.0f}", f"{m.peer_name} {m.peer_value:,.0f}", f"{m.fraction:.2f}",
                   f"{ratio_copy:.2f}", "ok" if not bad else f"WRONG ({failures[0][:60]})", f"{m.spread:.3f}")
            if not bad and "notebook" in label:
                best[prob] = (label, m.value, launch)
        except Exception as exc:
            traceback.print_exc(limit=2)
            row = (prob, label, "", "", "", "", f"ERROR {type(exc).__name__}: {str(exc)[:50]}", "")
        table.append(row)
        log(" | ".join(row))
    head = ("problem", "kernel", "GB/s", "peer GB/s", "×peer", "×copy", "check", "spread")
    widths = [max(len(str(r[i])) for r in [head, *table]) for i in range(8)]
    print(f"\ndevice {dev}, {time.strftime('%Y-%m-%d')}; copy bandwidth {copy:,.0f} GB/s; "
          "timer: grader.speed.timed (L2 flushed, adaptive head start); peers measured on the same inputs")
    for r in [head, tuple("-" * w for w in widths), *table]:
        print(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)))

    # ---------------------------------------------------------------- 3. the graded path
    del check, setup, dev_sum, dev_sm, dev_rm, out_sum, out_sm, out_rm, args_sum, args_sm, args_rm, xs
    problems = {"sum": P.total_sum, "softmax": P.softmax_bf16, "rms": P.rmsnorm_bf16}
    print("\ngrader.speed (the graded cell's call), adaptive head start:")
    for prob, (label, _, launch) in best.items():
        try:
            d = graded(launch, problems[prob])
            print(f"  {prob:8s} {label:40s} {d['value']:,.0f} GB/s = {d['fraction']:.3f} × {d['peer']} "
                  f"({d['peer_value']:,.0f}); {d['value'] / copy:.3f} of copy; runs {d['runs']}, spread {d['spread']:.3f}")
        except Exception as exc:
            print(f"  {prob} {label}: ERROR {type(exc).__name__}: {str(exc)[:300]}")
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
