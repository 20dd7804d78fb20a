"""Host time of the course's launch functions against their kernels' GPU time (a GPU machine).

The judge bounds a reported time by launching the kernel back to back under its own clock
(grader.judge.verbs). That clock also counts the host: a launch function that takes longer in
Python than its kernels on the GPU runs host-bound back to back. For each compiled lesson's launch
at its problem's timed size this prints the event time (grader.timing, as graded), the
back-to-back time per launch, the host time per call, and where the host time goes.

    python dev/integrity/launch_overhead.py [--profile]
    python dev/integrity/launch_overhead.py --in-sandbox     # the same, inside the judge's sandbox
"""
from __future__ import annotations

import cProfile
import pstats
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import grader  # noqa: E402,F401
from grader import timing  # noqa: E402
from grader.check import wait_for_gpu  # noqa: E402
from grader.notebooks import cell_source, run_cells, run_source  # noqa: E402
from grader.problems import attention as P  # noqa: E402
from grader.speed import TimedCase  # noqa: E402

CH = ROOT / "solutions" / "04_attention"
NORMS = ROOT / "solutions" / "02_reduce" / "04_norms.ipynb"      # 02.04's RMSNorm (Numba), rmsnorm()
LESSONS = {  # notebook: (%%cuda cell, module name, [(launch, problem)])
    "04_decoding.ipynb": ("v_decode", "dec", [("launch_decode", P.decode), ("launch_paged", P.decode_paged)]),
    "05_mla_decode.ipynb": ("v_mla", "mla", [("launch_mla", P.mla)]),
    "03_fa2_tensor_cores.ipynb": ("v_fa2", "fa", [("launch_fa2", P.fa2)]),
}


def launches(notebook: str) -> dict:
    cell, name, _ = LESSONS[notebook]
    ns: dict = {}
    run_source(cell_source(CH / notebook, cell), cell, ns)
    module = next(v for v in ns.values())
    return run_cells(CH / notebook, ["setup", "launch"], {name: module})


def measure(launch, problem, profile: bool) -> None:
    args = TimedCase(problem, problem.bench_size, 1).args
    events = float(np.median(timing.time_call(lambda: launch(*args), budget_s=1.0)))
    for reps in (200, 1000):
        wait_for_gpu()
        t0 = time.perf_counter()
        for _ in range(reps):
            launch(*args)
        host = (time.perf_counter() - t0) / reps
        wait_for_gpu()
        wall = (time.perf_counter() - t0) / reps
    print(f"{problem.name:24s} events {events * 1e6:8.1f} us   back to back {wall * 1e6:8.1f} us   "
          f"host per call {host * 1e6:7.1f} us   ratio b2b/events {wall / events:5.2f}")
    if profile:
        wait_for_gpu()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(200):
            launch(*args)
        prof.disable()
        wait_for_gpu()
        pstats.Stats(prof).sort_stats("tottime").print_stats(14)


def decode_kernel_and_args(ns):
    """The decode lesson's kernel and the 17 arguments its launch function passes at the timed size."""
    case = TimedCase(P.decode, P.decode.bench_size, 1)
    captured = {}
    kernel = ns["kernels"][0]                     # the lesson's decode<Dec<128>>
    real = kernel.launch

    def spy(grid, *args, **kw):
        captured["args"] = args
        return real(grid, *args, **kw)
    kernel.launch = spy
    ns["launch_decode"](*case.args)
    kernel.launch = real
    return kernel, captured["args"]


def print_host_us(steps: dict, reps: int = 200) -> None:
    """Host microseconds per call of each step (the GPU drained before and after each)."""
    for name, step in steps.items():
        wait_for_gpu()
        t0 = time.perf_counter()
        for _ in range(reps):
            step()
        print(f"    {name:28s} {(time.perf_counter() - t0) / reps * 1e6:6.1f} us")
        wait_for_gpu()


def breakdown(kernel, args) -> None:
    """Host microseconds of each step of one ``kernel.launch`` (the decode kernel's arguments)."""
    from cuda.core import launch as core_launch

    from grader.cuda import module as M

    shape = kernel.launch_shape
    kargs = kernel.prepare_args(args)
    stream = M._stream_for(None, args)
    cfg = next(iter(kernel._configs.values()))
    steps = {"prepare_args": lambda: kernel.prepare_args(args), "stream": lambda: M._stream_for(None, args),
             "cuda.core launch": lambda: core_launch(stream, cfg, kernel._get(), *kargs),
             "kernel.launch (all)": lambda: kernel.launch(cfg.grid, *args)}
    print_host_us(steps)
    del shape


def in_sandbox() -> int:
    """Run this script (without --profile) in the sandbox the judge starts runners in, with the lessons it loads."""
    import sandboxed

    return sandboxed.run(__file__, (*(CH / n for n in LESSONS), NORMS))


def rmsnorm(profile: bool) -> None:
    """02.04's RMSNorm (a Numba kernel): the launch function, then its parts (the uint64 views, the
    dispatch of a Numba kernel on arrays it has seen)."""
    from grader.problems import reduce as R

    ns = run_cells(NORMS, ["setup", "given", "v2_rmsnorm", "v3_registers"])
    launch = ns["launch_rmsnorm_registers"]
    measure(launch, R.rmsnorm_bf16, profile)
    x, w, y = TimedCase(R.rmsnorm_bf16, R.rmsnorm_bf16.bench_size, 1).args
    x4, w4, y4 = x.view(np.uint64), w.view(np.uint64), y.view(np.uint64)
    kernel = ns["rmsnorm_registers"][x.shape[0], ns["THREADS3"]]
    steps = {"three .view(uint64)": lambda: (x.view(np.uint64), w.view(np.uint64), y.view(np.uint64)),
             "numba dispatch (views made)": lambda: kernel(x4, w4, y4),
             "launch function (all)": lambda: launch(x, w, y)}
    print_host_us(steps)


def main() -> None:
    if "--in-sandbox" in sys.argv:
        sys.exit(in_sandbox())
    profile = "--profile" in sys.argv
    import torch

    print(torch.cuda.get_device_name(), time.strftime("%Y-%m-%d"))
    rmsnorm(profile)
    for notebook, (_, _, pairs) in LESSONS.items():
        ns = launches(notebook)
        for name, problem in pairs:
            measure(ns[name], problem, profile)
        if notebook == "04_decoding.ipynb":
            print("  where one launch of the decode kernel spends its host time (its arguments at the timed size):")
            breakdown(*decode_kernel_and_args(ns))


if __name__ == "__main__":
    main()
