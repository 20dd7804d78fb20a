"""On a GPU: the copy peers and vector-add variants, one table (for lesson 01.01's reference).

    python tests/gpu/probe_vector_add.py
"""
import numpy as np
from numba import cuda

import grader
from grader.bench import EventTimer, bench, repeat

N = 1 << 27
sm = cuda.get_current_device().MULTIPROCESSOR_COUNT


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
    import torch

    rows = []
    timer = EventTimer()
    for gib in (1, 4):
        n = gib * 2**30 // 4
        s, d = cuda.to_device(np.ones(n, np.float32)), cuda.device_array(n, np.float32)
        t = np.median(repeat(lambda: timer(lambda: d.copy_to_device(s)), min_reps=20))
        rows.append((f"numba memcpy DtoD {gib} GiB", 2 * gib * 2**30 / t / 1e9))
        ts, td = torch.ones(n, device="cuda"), torch.empty(n, device="cuda")
        t = np.median(repeat(lambda: timer(lambda: td.copy_(ts)), min_reps=20))
        rows.append((f"torch copy_ {gib} GiB", 2 * gib * 2**30 / t / 1e9))
        del s, d, ts, td
    label, peer = grader.device.peer("copy")
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
        m = bench(fn, label=name, bytes=12 * N, peer="copy")
        rows.append((name, m.value))
    print(f"\n{'variant':<28} {'GB/s':>8} {'% of ' + label:>22}")
    for name, v in rows:
        print(f"{name:<28} {v:8.0f} {100 * v / peer:21.1f}%")
    print(f"peer: {label} = {peer:.0f} GB/s on {grader.device.info().name}")


if __name__ == "__main__":
    main()
