"""Where kernels run: a real CUDA GPU, or Numba's CUDA simulator on the CPU.

Decided once, at the first ``import grader``, *before* Numba's CUDA module is
imported: with no usable GPU (grader.cuda.toolchain asks the driver) we set
``NUMBA_ENABLE_CUDASIM=1`` so every ``@cuda.jit`` kernel in a lesson runs in the
simulator instead of failing.

Overrides (environment variables):
  GRADER_FORCE_SIM=1   use the simulator even on a GPU machine (tests, demos)
  GRADER_FORCE_GPU=1   never choose the simulator (grader.profile's and grader.cuda.sanitize's children)
  NUMBA_ENABLE_CUDASIM=1  respected as set by the user
"""
from __future__ import annotations

import os
import sys

from .cuda.toolchain import gpu_count


def _choose() -> bool:
    """Return True when kernels must run in the simulator (and arrange it)."""
    if os.environ.get("GRADER_FORCE_SIM") == "1":
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    elif os.environ.get("GRADER_FORCE_GPU") == "1":
        pass                      # a child of a GPU process run under ncu or compute-sanitizer, whose
                                  # injected driver may not answer the probe below before the tool is ready
    elif os.environ.get("NUMBA_ENABLE_CUDASIM") != "1" and gpu_count() == 0:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    sim = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    if sim and "numba" in sys.modules:
        # numba was imported before grader: its config already read the
        # environment, but numba.cuda (which acts on it) may not be loaded yet.
        from numba.core import config

        config.ENABLE_CUDASIM = True
    return sim


SIMULATOR: bool = _choose()


def _quiet_numba() -> None:
    """Numba's low-occupancy advice goes to stderr, and nbgrader scores 0 any graded cell that
    writes to stderr: a correct tiny launch (one block for a 1-element test) must not lose its
    points. The lessons teach occupancy themselves."""
    os.environ["NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"] = "0"
    if "numba.core.config" in sys.modules:
        sys.modules["numba.core.config"].CUDA_LOW_OCCUPANCY_WARNINGS = 0


_quiet_numba()


def numba_cuda_mismatch() -> str | None:
    """A message when numba.cuda was loaded in a mode other than the one chosen."""
    mod = sys.modules.get("numba.cuda")
    if mod is None:
        return None
    loaded_sim = "simulator" in getattr(getattr(mod, "to_device", None), "__module__", "")
    if SIMULATOR and not loaded_sim:
        return ("numba.cuda was imported before grader and there is no GPU: restart the "
                "kernel and run `import grader` before `from numba import cuda`.")
    return None
