"""On a GPU: the copy peers and vector-add variants, one table (for lesson 01.01's reference).

    python dev/ch01_elementwise/probe_vector_add.py

The two copies the copy peer chooses between (cudaMemcpy through Numba, torch's copy_) at 1 and
4 GiB each way, timed with grader.timing.time_call without the L2 flush (a copy of gigabytes
streams past the L2 anyway; the peer itself, grader.peers.copy, flushes), at least 20 runs; then
vector-add variants with grader.bench, each as a fraction of the copy ceiling
(grader.peers.ceiling("copy"), measured in the same run).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # run as a script: the repository's grader

import grader  # noqa: E402  (before numba: it picks GPU or simulator)
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from grader.timing import time_call  # noqa: E402

N = 1 << 27


@cuda.jit
def one_per_thread(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


@cuda.jit
def grid_stride(a, b, c):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < c.size:
        c[i] = a[i] + b[i]
        i += stride


@cuda.jit
def four_per_thread(a, b, c):
    # each block covers 4 × blockDim consecutive elements; all loads issued before the stores
    base = cuda.blockIdx.x * cuda.blockDim.x * 4 + cuda.threadIdx.x
    step = cuda.blockDim.x
    n = c.size
    if base + 3 * step < n:
        a0, a1, a2, a3 = a[base], a[base + step], a[base + 2 * step], a[base + 3 * step]
        b0, b1, b2, b3 = b[base], b[base + step], b[base + 2 * step], b[base + 3 * step]
        c[base] = a0 + b0
        c[base + step] = a1 + b1
        c[base + 2 * step] = a2 + b2
        c[base + 3 * step] = a3 + b3
    else:
        for k in range(4):
            j = base + k * step
            if j < n:
                c[j] = a[j] + b[j]


def main():
    print(grader.mode())
    if grader.SIMULATOR:
        print("No GPU: this probe times copies and kernels on a CUDA GPU.")
        return 2
    import torch

    sm = grader.device.info().sm_count
    rows = []
    for gib in (1, 4):
        n = gib * 2**30 // 4
        s, d = cuda.to_device(np.ones(n, np.float32)), cuda.device_array(n, np.float32)
        t = np.median(time_call(lambda: d.copy_to_device(s), flush=False, min_reps=20))
        rows.append((f"numba memcpy DtoD {gib} GiB", 2 * gib * 2**30 / t / 1e9))
        ts, td = torch.ones(n, device="cuda"), torch.empty(n, device="cuda")
        t = np.median(time_call(lambda: td.copy_(ts), flush=False, min_reps=20))
        rows.append((f"torch copy_ {gib} GiB", 2 * gib * 2**30 / t / 1e9))
        del s, d, ts, td
    label, peer = grader.peers.ceiling("copy")
    a, b = cuda.to_device(np.ones(N, np.float32)), cuda.to_device(np.ones(N, np.float32))
    c = cuda.device_array(N, np.float32)
    variants = {
        "one/thread 128": lambda: one_per_thread[(N + 127) // 128, 128](a, b, c),
        "one/thread 256": lambda: one_per_thread[(N + 255) // 256, 256](a, b, c),
        "one/thread 512": lambda: one_per_thread[(N + 511) // 512, 512](a, b, c),
        "grid-stride 8×SM×256": lambda: grid_stride[8 * sm, 256](a, b, c),
        "grid-stride 32×SM×256": lambda: grid_stride[32 * sm, 256](a, b, c),
        "grid-stride 64×SM×512": lambda: grid_stride[64 * sm, 512](a, b, c),
        "four/thread 256": lambda: four_per_thread[(N + 1023) // 1024, 256](a, b, c),
        "four/thread 128": lambda: four_per_thread[(N + 511) // 512, 128](a, b, c),
    }
    for name, fn in variants.items():
        m = grader.bench(fn, label=name, bytes=12 * N, peer=None)
        rows.append((name, m.value))
    print(f"\n{'variant':<28} {'GB/s':>8} {'% of ' + label:>22}")
    for name, v in rows:
        print(f"{name:<28} {v:8.0f} {100 * v / peer:21.1f}%")
    print(f"peer: {label} = {peer:.0f} GB/s on {grader.device.info().name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
