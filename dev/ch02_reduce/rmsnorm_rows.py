"""Issue 35 on a GPU: 02.04's RMSNorm with several rows per block, the next row's loads issued before
the current row is reduced, against the lesson's one-row-per-block kernel (v3), each checked and
timed beside torch's rms_norm and the copy bandwidth in the same run.

    python dev/ch02_reduce/rmsnorm_rows.py

Prints one row per variant: figure, % of torch, % of copy, and the launch function's host time.
"""
from __future__ import annotations

import math
import time

from common import load   # first: the repository on sys.path, grader imported

import grader
import numpy as np
from grader.check import wait_for_gpu
from grader.problems import reduce as P
from grader.speed import TimedCase
from numba import cuda, float32, uint64


def rows_kernel(ns: dict, words: int, threads: int, weight_in_registers: bool):
    """Blocks walk rows with a grid stride; each thread holds ``words`` uint64 of its row and, while
    that row is reduced and written, the next row's words are already loading."""
    unpack4, pack4, allreduce = ns["unpack4"], ns["pack4"], ns["block_allreduce_sum"]
    eps = float32(P.RMS_EPS)

    @cuda.jit
    def kernel(x4, w4, y4):
        t, nw, rows = cuda.threadIdx.x, x4.shape[1], x4.shape[0]
        cur = cuda.local.array(words, uint64)
        nxt = cuda.local.array(words, uint64)
        wr = cuda.local.array(words, uint64)
        if weight_in_registers:
            for k in range(words):
                j = t + k * threads
                wr[k] = w4[j] if j < nw else uint64(0)
        row = cuda.blockIdx.x
        if row < rows:
            for k in range(words):
                j = t + k * threads
                cur[k] = x4[row, j] if j < nw else uint64(0)
        while row < rows:
            nrow = row + cuda.gridDim.x
            if nrow < rows:                          # the next row in flight during this row's math
                for k in range(words):
                    j = t + k * threads
                    nxt[k] = x4[nrow, j] if j < nw else uint64(0)
            acc = float32(0.0)
            for k in range(words):
                a, b, p, q = unpack4(cur[k])
                acc += (a * a + b * b) + (p * p + q * q)
            r = float32(1.0) / math.sqrt(allreduce(acc) / float32(4 * nw) + eps)
            for k in range(words):
                j = t + k * threads
                if j < nw:
                    a, b, p, q = unpack4(cur[k])
                    g0, g1, g2, g3 = unpack4(wr[k] if weight_in_registers else w4[j])
                    y4[row, j] = pack4(a * r * g0, b * r * g1, p * r * g2, q * r * g3)
            for k in range(words):
                cur[k] = nxt[k]
            row = nrow
    return kernel


def make_launch(ns, kernel, words, threads, per_sm):
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    fallback = ns["launch_rmsnorm_simple"]

    def launch(x, w, y):
        rows, cols = x.shape
        if cols % 4 == 0 and cols // 4 <= words * threads:
            kernel[min(rows, sms * per_sm), threads](x.view(np.uint64), w.view(np.uint64), y.view(np.uint64))
        else:
            fallback(x, w, y)
    return launch


def host_us(launch) -> float:
    args = TimedCase(P.rmsnorm_bf16, P.rmsnorm_bf16.bench_size, 1).args
    launch(*args)
    wait_for_gpu()
    t0 = time.perf_counter()
    for _ in range(300):
        launch(*args)
    host = (time.perf_counter() - t0) / 300
    wait_for_gpu()
    return host * 1e6


def main() -> None:
    ns = load("04_norms.ipynb", ["welford", "v1_layernorm", "given", "v2_rmsnorm", "v3_registers"])
    print(grader.device.info().name, time.strftime("%Y-%m-%d %H:%M"), "bench", P.rmsnorm_bf16.bench_size)
    variants = [("v3 lesson: one row per block", ns["launch_rmsnorm_registers"])]
    for words, threads, per_sms, wregs in ((8, 128, (2, 4, 8), (False, True)), (4, 256, (2, 4), (True,))):
        for per_sm in per_sms:
            for wreg in wregs:
                k = rows_kernel(ns, words, threads, wreg)
                variants.append((f"rows: {threads} thr x {words} words, {per_sm}/SM{', w in regs' if wreg else ''}",
                                 make_launch(ns, k, words, threads, per_sm)))
    for label, launch in variants:
        try:
            grader.check(launch, P.rmsnorm_bf16, quiet=True)
            grader.check(launch, P.rmsnorm_bf16, hidden=True, quiet=True)
        except grader.CheckFailed as exc:
            print(f"{label:48s} WRONG: {str(exc).splitlines()[0][:120]}")
            continue
        torch_m = grader.measure(launch, P.rmsnorm_bf16, label)
        copy_m = grader.measure(launch, P.rmsnorm_bf16, label, peer="copy")
        print(f"{label:48s} {torch_m.value:7.0f} GB/s  {100 * torch_m.fraction:6.1f}% of torch  "
              f"{100 * copy_m.fraction:6.1f}% of copy   host {host_us(launch):6.1f} us  (median {torch_m.median_s * 1e6:.1f} us)",
              flush=True)


if __name__ == "__main__":
    main()
