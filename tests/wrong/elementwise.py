"""Vector-add kernels: one right, the rest wrong in the ways learners get it wrong."""
import grader  # noqa: F401  (chooses GPU or simulator first)
import numpy as np
from numba import cuda

THREADS = 128


@cuda.jit
def add_right(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


@cuda.jit
def add_no_guard(a, b, c):
    i = cuda.grid(1)
    c[i] = a[i] + b[i]


@cuda.jit
def add_off_by_one(a, b, c):
    i = cuda.grid(1)
    if i < c.size - 1:
        c[i + 1] = a[i] + b[i]


@cuda.jit
def add_nan(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = (a[i] + b[i]) if i != c.size // 2 else np.float32(np.nan)


@cuda.jit
def add_half(a, b, c):
    i = cuda.grid(1)
    if i < c.size // 2:
        c[i] = a[i] + b[i]


@cuda.jit
def add_in_fp16(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = np.float32(np.float16(a[i]) + np.float16(b[i]))


@cuda.jit
def add_into_input(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        a[i] = a[i] + b[i]
        c[i] = a[i]


def launcher(kernel, round_up=True):
    def launch(a, b, c):
        n = c.size
        blocks = (n + THREADS - 1) // THREADS if round_up else n // THREADS
        kernel[blocks, THREADS](a, b, c)
    launch.__name__ = f"launch_{kernel.__name__}"
    return launch


def launch_returns_float64(a, b, c):
    """Computes on the host and returns a float64 array instead of writing c."""
    return (a.copy_to_host().astype(np.float64) + b.copy_to_host())


def launch_nothing(a, b, c):
    """Launches nothing: c stays as it was."""


@cuda.jit
def add_forever(a, b, c):
    i = cuda.grid(1)
    while i < c.size:       # forgot to advance i: never ends
        c[i] = a[i] + b[i]
