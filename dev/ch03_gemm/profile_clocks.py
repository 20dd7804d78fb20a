"""Where chapter 03's graded tensor-core GEMMs lose to cuBLAS, on a GPU: SM clock and power while
each runs (NVML), and, under Nsight Compute, the tensor and shared-memory pipes' utilization.

    python dev/ch03_gemm/profile_clocks.py            # clocks: ~3 s of back-to-back launches each, 4096³
    ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section WarpStateStats -k regex:'hgemm|cute_gemm|nvjet|gemm' --launch-skip 3 \
        --launch-count 3 python dev/ch03_gemm/profile_clocks.py --ncu   # 2 launches of each, nothing else

The kernels are the solution notebooks' cells (lesson 04 `v_hgemm`: hgemm<V3>, lesson 05 `v_cute`:
cute_gemm<V2>) with the lessons' launch functions, loaded as measure.py loads them; the operands are
P.hgemm_bf16's inputs at 4096³ on the device (gemm_harness.operands) and the peer is cuBLAS bf16 on the
same A and B (grader.peers.matmul's call). What this measures is outside the grader on purpose: clocks,
power and temperature (NVML) under sustained back-to-back launches, which no graded figure reports.
(Named profile_clocks.py, not profile.py: a script's folder comes first on sys.path, and a profile.py
there would stand in for the standard library's profile module, which cProfile imports.)
"""
from __future__ import annotations

import statistics
import sys
import threading
import time

import gemm_harness as H   # first: puts the repository on sys.path and imports grader
import measure as M

import grader
from grader.problems import gemm as P

N = 4096


def kernels():
    ops = H.operands(P.Shape(N, N, N))
    a, b, c = ops["a"], ops["b"], ops["c"]
    l04, l05 = M.lesson04(), M.lesson05()
    return {"cuBLAS": H.cublas(ops),
            "04 hgemm (mma.sync)": lambda: l04["launch_hgemm"](a, b, c),
            "05 cute": lambda: l05["launch_cute"](a, b, c)}


def sample_nvml(stop, out):
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    while not stop.is_set():
        out.append((pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                    pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
                    pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)))
        time.sleep(0.02)


def clocks(ks):
    import torch

    flop = 2 * N ** 3
    print(f"{'kernel':24s} {'TFLOP/s':>8s} {'SM MHz':>7s} {'W':>6s} {'°C':>4s} {'TFLOP/s per GHz':>16s}")
    for rnd in range(2):
        for name, fn in ks.items():
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
            samples, stop = [], threading.Event()
            th = threading.Thread(target=sample_nvml, args=(stop, samples))
            th.start()
            t0, n = time.perf_counter(), 0
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            while time.perf_counter() - t0 < 3.0:
                for _ in range(20):
                    fn()
                n += 20
                torch.cuda.synchronize()
            e1.record()
            torch.cuda.synchronize()
            stop.set()
            th.join()
            tf = flop * n / (e0.elapsed_time(e1) / 1e3) / 1e12
            late = samples[len(samples) // 3:]          # after the clocks settled
            mhz = statistics.median(s[0] for s in late)
            w = statistics.median(s[1] for s in late)
            temp = statistics.median(s[2] for s in late)
            print(f"{name:24s} {tf:8.1f} {mhz:7.0f} {w:6.0f} {temp:4.0f} {tf / (mhz / 1e3):16.1f}   (round {rnd})",
                  flush=True)


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ncu", action="store_true", help="two launches of each kernel, nothing else (under ncu)")
    args = ap.parse_args(argv)
    if not grader.cuda.gpu_available():
        print("No GPU: this script reads clocks and power while kernels run on a CUDA GPU.")
        return 2
    ks = kernels()
    if args.ncu:
        import torch

        for fn in ks.values():
            fn()
            fn()
        torch.cuda.synchronize()
        return 0
    clocks(ks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
