"""Where a graded notebook's runner spends its first seconds on a GPU (issue 36): the imports, the
first CUDA work of torch and Numba, the first Numba compile, the L2 flush buffer, a peer; then a
profile of one lesson's cells up to its first GPU cell, run as the judge's runner runs them
(GRADER_RUNNER=1).

    python dev/integrity/first_touch.py [--in-sandbox]
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "solutions" / "01_elementwise" / "04_vectors_half_precision_fusion.ipynb"
CELLS = ["l04_setup", "l04_formats", "l04_activations", "l04_data", "l04_v1"]

_t = time.perf_counter()


def step(label: str) -> None:
    global _t
    now = time.perf_counter()
    print(f"  {label:44s} {now - _t:7.3f} s", flush=True)
    _t = now


def main() -> None:
    os.environ.setdefault("GRADER_RUNNER", "1")
    sys.path.insert(0, str(ROOT))
    import numpy  # noqa: F401
    step("import numpy")
    import IPython  # noqa: F401
    step("import IPython")
    import matplotlib.pyplot  # noqa: F401
    step("import matplotlib.pyplot")
    import grader
    step("import grader (numba, its CUDA target)")
    import torch
    step("import torch")
    from numba import cuda
    cuda.current_context()
    step("numba: the CUDA context")
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    step("torch: first tensor on the GPU")

    @cuda.jit
    def first(a):
        a[cuda.grid(1)] += 1

    d = cuda.device_array(256, dtype=numpy.float32)
    first[1, 256](d)
    cuda.synchronize()
    step("numba: first kernel compiled and run")

    @cuda.jit
    def second(a, b):
        i = cuda.grid(1)
        b[i] = a[i] * 2.0

    second[1, 256](d, d)
    cuda.synchronize()
    step("numba: a second kernel")
    grader.device.info()
    step("grader.device.info()")
    from grader import timing
    timing.flush_l2()
    cuda.synchronize()
    step("the first L2 flush (512 MiB buffer)")
    m = grader.bench(lambda: None, label="nothing", bytes=1 << 20)
    step(f"grader.bench of nothing ({m.peer_name})")

    import cProfile
    import pstats
    from grader.notebooks import run_cells

    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    ns = run_cells(NOTEBOOK, CELLS[:-1])
    prof.disable()
    print(f"  {NOTEBOOK.name} cells {CELLS[:-1]}: {time.perf_counter() - t0:.2f} s")
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    run_cells(NOTEBOOK, CELLS[-1:], ns)
    prof.disable()
    print(f"  cell {CELLS[-1]}: {time.perf_counter() - t0:.2f} s")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(35)


def in_sandbox() -> int:
    """This script in the judge's sandbox, with the lesson it profiles, run as the runner runs."""
    import sandboxed

    return sandboxed.run(__file__, (NOTEBOOK,), {"GRADER_RUNNER": "1"}, limit_s=300)


if __name__ == "__main__":
    sys.exit(in_sandbox() if "--in-sandbox" in sys.argv else main())
