"""Chapter 02's graded references on a GPU: why the graded path was slower, and candidate kernels.

    python tests/gpu/perf_ch02.py [--quick]

1. The timer: the sleep kernel's real length, the host time of each launch function, whether the
   output re-poisoning (a device-to-device copy) blocks the host, and the graded path
   (grader.speed) for the sum with the old fixed 50 µs head start and the adaptive one.
2. Candidate kernels (tests/gpu/ch02_variants.py) at the graded sizes, on inputs made by torch on
   the GPU, checked against torch in float32, timed with grader.bench (L2 flushed, same timer as
   grader.speed), each beside its peer measured in this run.
3. grader.speed on the notebooks' launch functions (the graded call).
"""
from __future__ import annotations

import functools
import importlib
import statistics
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import grader  # noqa: E402  (before numba)
B = importlib.import_module("grader.bench")
from grader.problems import reduce as P  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from numba import cuda  # noqa: E402

import ch02_variants as V  # noqa: E402
from ch02_cells import load  # noqa: E402

S = importlib.import_module("grader.speed")
_captured: list = []
S.record = lambda kind, **kw: _captured.append(kw)
T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


def graded(launch, problem, adaptive=True):
    """grader.speed exactly, returning its measurement's dict (value, peer_value, fraction, runs, spread)."""
    orig = B.EventTimer
    if not adaptive:
        B.EventTimer = functools.partial(orig, adaptive=False)
    try:
        _captured.clear()
        grader.speed(launch, problem, points=2)
        return _captured[-1]
    finally:
        B.EventTimer = orig


def host_us(fn, n=30):
    out = []
    for _ in range(n):
        cuda.synchronize()
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    cuda.synchronize()
    return 1e6 * statistics.median(out[3:])


def nb(t):                      # torch tensor -> numba device array (same memory)
    return cuda.as_cuda_array(t)


def main(argv):
    quick = "--quick" in argv
    dev = grader.device.info().name
    copy_label, copy = grader.device.peer("copy")
    log(f"device {dev}; {copy_label} {copy:,.0f} GB/s")

    ns2 = load("02_warps.ipynb", ["v1_warp", "v2_block", "v3_grid_stride"])
    ns3 = load("03_softmax.ipynb", ["given", "online_state", "v3_online", "v4_registers"])
    ns4 = load("04_norms.ipynb", ["given", "v2_rmsnorm", "v3_registers"])

    # ---------------------------------------------------------------- 1. the timer
    B.keep_gpu_busy(50)
    log(f"sleep step: {B._sleep_ns_per_step:.0f} ns (nanosleep(1000) per step)")
    for us in (50, 200):
        a, b = cuda.event(), cuda.event()
        B._sleep[1, 1](100)
        a.record()
        B.keep_gpu_busy(us)
        b.record()
        b.synchronize()
        log(f"keep_gpu_busy({us}) lasted {cuda.event_elapsed_time(a, b) * 1e3:.0f} µs on the GPU")

    n = P.total_sum.bench_size
    xs = torch.rand(n, device="cuda", dtype=torch.float32)
    x_sum, out_sum = nb(xs), cuda.device_array(1, np.float32)
    rows3, rows4 = P.softmax_bf16.bench_size, P.rmsnorm_bf16.bench_size
    xsm = torch.randn(*rows3, device="cuda", dtype=torch.bfloat16)
    ysm = torch.empty_like(xsm)
    xrm = torch.randn(*rows4, device="cuda", dtype=torch.bfloat16)
    wrm = (1 + 0.1 * torch.randn(rows4[1], device="cuda")).to(torch.bfloat16)
    yrm = torch.empty_like(xrm)
    u16 = lambda t: nb(t.view(torch.int16)).view(np.uint16)   # noqa: E731
    a_xsm, a_ysm, a_xrm, a_wrm, a_yrm = u16(xsm), u16(ysm), u16(xrm), u16(wrm), u16(yrm)

    log(f"host µs: launch_sum {host_us(lambda: ns2['launch_sum'](x_sum, out_sum)):.0f}, "
        f"softmax launch_registers {host_us(lambda: ns3['launch_registers'](a_xsm, a_ysm)):.0f}, "
        f"rms launch_rmsnorm_registers {host_us(lambda: ns4['launch_rmsnorm_registers'](a_xrm, a_wrm, a_yrm)):.0f}, "
        f"one view {host_us(lambda: a_xsm.view(np.uint32)):.0f}, "
        f"torch.sum {host_us(lambda: torch.sum(xs)):.0f}")
    small, pristine = cuda.device_array(1024, np.float32), cuda.device_array(1024, np.float32)
    blocked = []
    for _ in range(5):
        cuda.synchronize()
        B.flush_l2()
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
                f"{d['value']:,.0f} GB/s = {d['fraction']:.3f} of copy; runs {d['runs']}, spread {d['spread']:.3f}")
        m = grader.measure(ns2["launch_sum"], P.total_sum, "v3", peer="copy")
        log(f"   measure (no re-poison), timer as above: {m.value:,.0f} GB/s ({len(m.times_s)} runs)")
        if not adaptive:
            B.EventTimer = functools.partial(B.EventTimer, adaptive=False)
            m = grader.measure(ns2["launch_sum"], P.total_sum, "v3", peer="copy")
            B.EventTimer = B.EventTimer.func
            log(f"   measure with fixed 50 µs: {m.value:,.0f} GB/s ({len(m.times_s)} runs)")

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
            f"head start: {d['value']:,.0f} GB/s = {d['fraction']:.3f} of copy; runs {d['runs']}, spread {d['spread']:.3f}")

    # ---------------------------------------------------------------- 2. candidates
    want_sum = float(xs.double().sum())
    want_sm = torch.softmax(xsm.float(), dim=-1)
    xr = xrm.float()
    want_rm = xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + P.RMS_EPS) * wrm.float()
    tol_sm = P.softmax_bf16.tolerances(rows3, P.BF16)
    tol_rm = P.rmsnorm_bf16.tolerances(rows4, P.BF16)

    def ok_rows(y, want, tol):
        got = y.float()
        bad = (got - want).abs() > tol[1] + tol[0] * want.abs()
        return int(bad.sum())

    sm_peer, rm_peer = P.softmax_bf16.peer, P.rmsnorm_bf16.peer
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
            if prob == "sum":
                run = lambda: launch(x_sum, out_sum)   # noqa: E731
                run()
                cuda.synchronize()
                got = float(out_sum.copy_to_host()[0])
                bad = 0 if ("NO zero" in label or abs(got - want_sum) <= 1e-4 * want_sum) else 1
                m = B.bench(run, label=label, bytes=P.total_sum.bytes_moved(n), peer=P.torch_sum, budget_s=1.5)
                ratio_copy = m.value / copy
            elif prob == "softmax":
                run = lambda: launch(a_xsm, a_ysm)   # noqa: E731
                ysm.zero_()
                run()
                cuda.synchronize()
                bad = ok_rows(ysm, want_sm, tol_sm)
                m = B.bench(run, label=label, bytes=P.softmax_bf16.bytes_moved(rows3), peer=sm_peer, budget_s=1.5)
                ratio_copy = m.value / copy
            else:
                run = lambda: launch(a_xrm, a_wrm, a_yrm)   # noqa: E731
                yrm.zero_()
                run()
                cuda.synchronize()
                bad = ok_rows(yrm, want_rm, tol_rm)
                m = B.bench(run, label=label, bytes=P.rmsnorm_bf16.bytes_moved(rows4), peer=rm_peer, budget_s=1.5)
                ratio_copy = m.value / copy
            row = (prob, label, f"{m.value:,.0f}", f"{m.peer_name} {m.peer_value:,.0f}", f"{m.fraction:.2f}",
                   f"{ratio_copy:.2f}", "ok" if not bad else f"WRONG ({bad})", f"{m.spread:.3f}")
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
          "timer: grader.bench (L2 flushed, adaptive head start); peers measured beside each row")
    for r in [head, tuple("-" * w for w in widths), *table]:
        print(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)))

    # ---------------------------------------------------------------- 3. the graded path
    del xsm, ysm, xrm, yrm, want_sm, want_rm, xr
    torch.cuda.empty_cache()
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
