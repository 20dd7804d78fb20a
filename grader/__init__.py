"""The course's grader: the verbs every notebook imports.

    import grader                      # first: picks GPU or simulator before Numba loads
    from grader.problems import elementwise as P
    grader.check(launch_vector_add, P.vector_add)          # correct?
    grader.speed(launch_vector_add, P.vector_add, points=1)  # fast? (points for nbgrader)

check   correctness on fresh random inputs, poisoned outputs, edge sizes (check.py)
bench   CUDA-event timing, L2 flushed, median and spread, ratio to a peer (bench.py)
device  the GPU's name, measured ceilings, published peaks (device.py)
score   a measurement → nbgrader partial credit (score.py); speed() does a whole cell,
        measure() times a version without grading it
plot    roofline and perf-vs-size pictures (plot.py)
cuda_cells  %%cuda cells: CUDA C++ / CuTe compiled with NVRTC, launched on torch tensors
sass    machine-code rubric of compiled kernels (HMMA, LDSM, HGMMA, …) with no GPU needed
Command line: ``python -m grader doctor | grade NB | release | scoreboard``.
"""
from ._mode import SIMULATOR, gpu_count

if SIMULATOR:
    from . import sim as _sim

    _sim.install()

from . import cuda_cells, device, plot, sass  # noqa: E402
from .bench import Measurement, bench  # noqa: E402
from .check import CheckFailed, Problem, check  # noqa: E402
from .score import points_for, speed_points  # noqa: E402
from .speed import ladder_plot, measure, speed, sweep, sweep_plot  # noqa: E402


from . import integrity as _integrity  # noqa: E402

_integrity.snapshot()        # before any learner code: what checking and timing rely on
cuda_cells.register_magic()  # %%cuda NAME cells; does nothing outside IPython


def mode() -> str:
    """One line saying where kernels run, for the first cell of every lesson."""
    if SIMULATOR:
        return ("No GPU: kernels run in Numba's CUDA simulator (small sizes, correctness only; "
                "speed cells are not graded).")
    return f"GPU: {device.info().name}"


__all__ = ["SIMULATOR", "gpu_count", "check", "Problem", "CheckFailed", "bench", "Measurement",
           "speed", "measure", "sweep", "sweep_plot", "ladder_plot", "speed_points", "points_for", "device", "plot", "mode",
           "cuda_cells", "sass"]
