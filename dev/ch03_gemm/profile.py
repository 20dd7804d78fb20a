"""Where chapter 03's graded tensor-core GEMMs lose to cuBLAS, on a GPU: SM clock and power while
each runs (NVML), and, under Nsight Compute, the tensor and shared-memory pipes' utilization.

    python tests/gpu/profile_ch03.py                 # clocks: ~3 s of back-to-back launches each, 4096³
    ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section WarpStateStats -k regex:'hgemm_bf16|cute_gemm_bf16|nvjet|gemm' --launch-skip 3 \
        --launch-count 3 python tests/gpu/profile_ch03.py --ncu   # 2 launches of each, nothing else

The kernels are the solution notebooks' cells (lesson 04 `v_hgemm`, lesson 05 `v_cute`), compiled as
measure_ch03.py does; the peer is torch.matmul bf16 (cuBLAS) on the same inputs.
"""
from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_ch03 as M  # noqa: E402  (puts the repo and tests/ on sys.path, imports grader)

N = 4096


def kernels():
    import numpy as np
    import torch
    from numba import cuda

    torch.backends.cuda.matmul.allow_tf32 = False
    ta = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    tb = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    tc = torch.empty(N, N, device="cuda", dtype=torch.bfloat16)
    # the same bf16 values as uint16 bits for the lessons' launchers
    a, b = (cuda.as_cuda_array(t.view(torch.int16)).view(np.uint16) for t in (ta, tb))
    c = cuda.device_array((N, N), np.uint16)
    l04, l05 = M.lesson04(), M.lesson05()
    return {"cuBLAS": lambda: torch.matmul(ta, tb, out=tc),
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


def main():
    ks = kernels()
    if "--ncu" in sys.argv:
        import torch

        for fn in ks.values():
            fn()
            fn()
        torch.cuda.synchronize()
        return
    clocks(ks)


if __name__ == "__main__":
    main()
