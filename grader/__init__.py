"""The course's grader: the verbs every notebook imports.

    import grader                      # first: picks GPU or simulator before Numba loads
    from grader.problems import elementwise as P
    grader.check(launch_vector_add, P.vector_add)            # correct?
    grader.speed(launch_vector_add, P.vector_add, points=1)  # fast, beside its peer? (points)

check    correctness on fresh random inputs, poisoned outputs, edge sizes      (check.py)
speed    the graded speed cell; measure / bench / ladder_plot / sweep_plot      (speed.py)
peers    what a speed is a fraction of, measured in the same run               (peers.py)
problem  a graded computation: inputs, reference, sizes, peer, targets         (problem.py)
device   the GPU's name and published peaks                                    (device.py)
plot     rooflines, ladders, perf-vs-size pictures                             (plot.py)
profile  Nsight Compute's figures that explain a kernel's speed, from a notebook (profiling.py)
cuda     compiled CUDA C++ / CuTe cells: toolchain, %%cuda, launch, SASS       (cuda/)
sim      Numba's CUDA simulator made safe to grade with                        (sim/)
judge    grading a submission from outside the learner's process               (judge/)

In a notebook these checks give instant feedback; points come from the judge, which runs none
of the learner's code in its own process. Command line: ``python -m grader --help``.
"""
from .backend import SIMULATOR, gpu_count

if SIMULATOR:
    from . import sim as _sim

    _sim.install()

from . import cuda, device, peers, plot  # noqa: E402
from .timing import Measurement  # noqa: E402
from .check import check  # noqa: E402
from .errors import CheckFailed  # noqa: E402
from .problem import Problem  # noqa: E402
from .score import points_for, speed_points  # noqa: E402
from .speed import bench, ladder_plot, measure, speed, sweep, sweep_plot  # noqa: E402
from .profiling import profile  # noqa: E402

from . import integrity as _integrity  # noqa: E402

_integrity.refuse_numba_stubs()   # on a GPU: a kernel that still raises NotImplementedError is never launched
_integrity.snapshot()        # before any learner code: what checking and timing rely on
cuda.register_magic()        # %%cuda NAME cells; does nothing outside IPython


def mode(compiled: bool = False) -> str:
    """One line saying where kernels run, for the first cell of every lesson (``compiled``: a lesson
    whose kernels are ``%%cuda`` cells, which the simulator cannot run)."""
    if SIMULATOR and compiled:
        from .cuda.toolchain import default_arch

        return (f"No GPU: the %%cuda cells compile for {default_arch()} and their machine code (SASS) is "
                "graded; their correctness and speed cells need a GPU and say so.")
    if SIMULATOR:
        return ("No GPU: kernels run in Numba's CUDA simulator (small sizes, correctness only; "
                "speed cells are not graded).")
    return f"GPU: {device.info().name}"


__all__ = ["SIMULATOR", "gpu_count", "check", "Problem", "CheckFailed", "bench", "Measurement", "speed",
           "measure", "sweep", "sweep_plot", "ladder_plot", "speed_points", "points_for", "device", "plot",
           "peers", "mode", "cuda", "profile"]
