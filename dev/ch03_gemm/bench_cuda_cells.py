"""GPU benchmark for compiled CUDA cells (run by hand on an H100 / H200 / B200).

    python dev/ch03_gemm/bench_cuda_cells.py [--mib 256] [--reps 50] [--launches 20000]
    python dev/ch03_gemm/bench_cuda_cells.py --compile-only     # anywhere: compile the cell, no GPU needed

1. Copy bandwidth: a grid-stride float4 copy kernel compiled from a CUDA cell
   versus torch's device-to-device copy (``dst.copy_(src)``), same process,
   CUDA events on the same stream, L2 flushed before every timed run, median
   (and min / max) over ``--reps``; the ratio is cell time / torch time.
2. Launch overhead: host wall time per launch of an empty kernel, launched
   ``--launches`` times back to back (then one synchronize), through
   ``module.kernel[grid, block](...)``, through ``cuda.core.launch`` with
   pre-converted arguments (the floor our wrapper sits on), and for torch's
   own near-empty kernels (``torch.cuda._sleep(0)`` and ``zero_()`` of a
   one-element tensor).

Needs torch with CUDA.  Prints two tables; exits non-zero when the copy result
is wrong.

What this measures is the launch path of compiled cells (grader.cuda.module) itself, so its timing
is its own and deliberately not grader.timing's: grader.timing queues a sleeping kernel before the
start event to hide the host's launch time, which here is part of what is compared.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # run as a script: the repository's grader

import grader  # noqa: E402,F401
from grader.cuda import compile_cuda  # noqa: E402
from grader.cuda.module import _stream_for  # noqa: E402  (the stream a cell's launch uses)

COPY_CELL = r"""
// Grid-stride copy of 16-byte vectors; n4 = number of float4 elements.
extern "C" __global__ void copy_f4(const float4* __restrict__ src, float4* __restrict__ dst, long long n4) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long step = (long long)gridDim.x * blockDim.x;
  for (; i < n4; i += step) dst[i] = src[i];
}

extern "C" __global__ void empty_kernel(int unused) {}
"""


def _events_ms(fn, flush, reps, torch):
    times = []
    for _ in range(reps):
        flush()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return times


def _per_launch_us(fn, n, torch):
    for _ in range(min(200, n)):  # warm up
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) / n * 1e6, (t2 - t0) / n * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, nargs="+", default=[16, 256, 1024], help="copy sizes in MiB")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--compile-only", action="store_true", help="compile the cell and report it (no GPU needed)")
    args = ap.parse_args(argv)
    if args.compile_only:
        mod = compile_cuda(COPY_CELL, name="bench_copy")
        print(mod)
        print(mod.summary())
        return 0

    try:
        import torch
    except ImportError:
        print("this benchmark needs torch (pip install torch) and a CUDA GPU")
        return 1
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to benchmark")
        return 1
    torch.cuda.init()
    props = torch.cuda.get_device_properties(0)
    t0 = time.perf_counter()
    mod = compile_cuda(COPY_CELL, name="bench_copy", use_cache=False)
    compile_s = time.perf_counter() - t0
    print(f"device: {props.name} ({props.multi_processor_count} SMs, cc {props.major}.{props.minor}), "
          f"arch {mod.arch}, {mod.compiler}, compile {compile_s * 1e3:.0f} ms, "
          f"copy_f4 uses {mod.copy_f4.resources.get('registers')} registers")

    l2 = getattr(props, "L2_cache_size", 50 * 2**20) or 50 * 2**20
    scrub = torch.empty(max(2 * l2, 64 * 2**20) // 4, dtype=torch.float32, device="cuda")

    def flush():
        scrub.zero_()

    blocks = props.multi_processor_count * 8
    ok = True
    rows = []
    for mib in args.mib:
        n = mib * 2**20 // 4
        src = torch.randn(n, device="cuda")
        dst_cell = torch.empty_like(src)
        dst_torch = torch.empty_like(src)
        n4 = n // 4
        mod.copy_f4[blocks, 256](src, dst_cell, n4)
        torch.cuda.synchronize()
        if not torch.equal(dst_cell, src):
            print(f"copy_f4 gave a wrong result at {mib} MiB")
            ok = False
        cell = _events_ms(lambda: mod.copy_f4[blocks, 256](src, dst_cell, n4), flush, args.reps, torch)
        ref = _events_ms(lambda: dst_torch.copy_(src), flush, args.reps, torch)
        mc, mr = statistics.median(cell), statistics.median(ref)
        gbs = lambda ms: 2 * n * 4 / (ms * 1e-3) / 1e9  # noqa: E731  (read + write)
        rows.append((mib, mc, min(cell), max(cell), gbs(mc), mr, min(ref), max(ref), gbs(mr), mc / mr))
        del src, dst_cell, dst_torch

    print("\nCopy, device to device (CUDA events, L2 flushed, median of %d)" % args.reps)
    hdr = f"{'MiB':>6} | {'cell ms':>8} {'min':>7} {'max':>7} {'GB/s':>7} | {'torch ms':>8} {'min':>7} {'max':>7} {'GB/s':>7} | {'cell/torch':>10}"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r[0]:>6} | {r[1]:8.4f} {r[2]:7.4f} {r[3]:7.4f} {r[4]:7.0f} | {r[5]:8.4f} {r[6]:7.4f} {r[7]:7.4f} {r[8]:7.0f} | {r[9]:10.3f}")

    # ---- launch overhead --------------------------------------------------
    from cuda.core import LaunchConfig, launch

    k = mod.empty_kernel
    k[1, 32](0)
    raw_kernel = k._get()
    raw_args = k.prepare_args([0])
    cfg = LaunchConfig(grid=1, block=32)
    stream = _stream_for(None, ())
    one = torch.zeros(1, device="cuda")
    cases = [
        ("cell: module.kernel[1, 32](0)", lambda: k[1, 32](0)),
        ("cell: kernel(0, grid=1, block=32)", lambda: k(0, grid=1, block=32)),
        ("cuda.core.launch, args pre-typed", lambda: launch(stream, cfg, raw_kernel, *raw_args)),
        ("torch.cuda._sleep(0)", lambda: torch.cuda._sleep(0)),
        ("torch: one-element zero_()", lambda: one.zero_()),
    ]
    print(f"\nLaunch overhead: {args.launches} back-to-back launches of an empty kernel (host wall time)")
    hdr = f"{'launch path':<36} | {'us/launch (enqueue)':>19} | {'us/launch (incl. sync)':>22}"
    print(hdr)
    print("-" * len(hdr))
    for label, fn in cases:
        try:
            enq, tot = _per_launch_us(fn, args.launches, torch)
            print(f"{label:<36} | {enq:19.2f} | {tot:22.2f}")
        except Exception as e:  # e.g. torch.cuda._sleep missing in some builds
            print(f"{label:<36} | {'n/a':>19} | {type(e).__name__}: {e}")
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
