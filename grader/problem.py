"""A graded computation: its inputs, float64 reference, sizes, tolerances, peer and targets.

A :class:`Problem` is declared once, in ``grader/problems/<chapter>.py``, and everything checks
and times the same thing from it: the lesson's visible checks, the hidden tests, the speed cell,
the judge and the scoreboard. Problems are frozen; a related problem is built from another with
:meth:`Problem.variant` (the same sizes and inputs under another name, peer or target).

What a problem needs to run is stated, not repeated at every call:

* ``simulator`` — False for compiled CUDA C++ kernels, which Numba's simulator cannot run;
* ``arch`` — the GPU it needs: ``"sm_80"`` (compute capability 8.0 or newer: bf16 mma.sync,
  cp.async), ``"sm_90"`` (9.0 or newer: TMA), ``"sm_90a"`` (a Hopper GPU: wgmma, TMA), ``"sm_100a"`` (a Blackwell GPU: tcgen05).

Where it cannot run, ``check`` and ``speed`` say why (``Problem.unavailable``) and earn nothing,
without an error; the kernel is still compiled and its machine code graded by its SASS rubric.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .formats import Encoded

# Default (rtol, atol) by output dtype, for results computed once per element in that dtype from
# exact inputs. Reductions scale these with their length (a problem's ``tolerance``).
DEFAULT_TOLERANCE = {
    np.dtype(np.float64): (1e-12, 1e-12),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float16): (1e-3, 1e-4),   # 2^-11 relative rounding, plus fp32 math
}

#: What each architecture requirement means, for messages.
ARCH_NAMES = {"sm_80": "an Ampere GPU or newer (compute capability 8.0+)",
              "sm_89": "an Ada GPU or newer (compute capability 8.9+)",
              "sm_90": "a GPU with TMA, Hopper or newer (compute capability 9.0+: H100/H200, B200)",
              "sm_90a": "a Hopper GPU (H100/H200, sm_90a)",
              "sm_100a": "a Blackwell GPU (B200/GB200, sm_100a)"}


@dataclass(frozen=True)
class Problem:
    """make_inputs(rng, size) -> dict of named inputs (NumPy arrays and scalars), in the order the
    launch function takes them; outputs(size, inputs) -> name -> (shape, dtype); reference(**inputs)
    -> name -> float64 (or exact) expected outputs."""

    name: str
    make_inputs: Callable[[np.random.Generator, Any], dict]
    outputs: Callable[[Any, dict], dict]
    reference: Callable[..., dict]
    sizes: tuple                     # visible test sizes on a GPU
    sim_sizes: tuple = ()            # visible test sizes in the simulator (~10^4 threads)
    hidden_sizes: tuple = ()
    hidden_sim_sizes: tuple = ()
    tolerance: Callable[[Any, Any], tuple] | None = None
    hint: str = ""                   # lesson-specific advice shown on a wrong value
    bytes_moved: Callable[[Any], int] | None = None   # the fewest bytes: inputs read once, outputs written once
    flops: Callable[[Any], int] | None = None
    bench_size: Any = None           # the size the speed cell times
    peer: Any = None                 # a grader.peers.Peer: what speed is a fraction of
    target: float = 1.0              # fraction of the peer that earns full speed points
    floor: float = 0.0               # fraction at or below which speed earns nothing
    library_free: bool = False       # refuse host (numpy) and torch computation in the launch (advisory)
    simulator: bool = True           # can Numba's simulator run it (False: compiled CUDA C++)
    arch: str | None = None          # the GPU it needs ("sm_80", "sm_90a", "sm_100a"); None: any
    arrays: str = "numba"            # what the launch function receives: "numba" or "torch" device arrays
    # the most device memory the launch function may allocate beside its inputs and outputs, at a
    # size (bytes; grader.memory measures it); None: not bounded
    max_scratch_bytes: Callable[[Any], int] | None = None

    def __post_init__(self):
        for f in ("sizes", "sim_sizes", "hidden_sizes", "hidden_sim_sizes"):
            object.__setattr__(self, f, tuple(getattr(self, f)))
        if self.arrays not in ("numba", "torch"):
            raise ValueError(f"{self.name}: arrays must be 'numba' or 'torch', not {self.arrays!r}")
        if not 0 <= self.floor < self.target:
            raise ValueError(f"{self.name}: need 0 ≤ floor < target")

    def variant(self, **changes) -> "Problem":
        """The same problem with some fields changed (a new name, peer, target, …)."""
        return dataclasses.replace(self, **changes)

    # -- sizes and tolerances -------------------------------------------------------------
    def tolerances(self, size, dtype) -> tuple:
        dtype = dtype if isinstance(dtype, Encoded) else np.dtype(dtype)
        if self.tolerance is not None:
            return self.tolerance(size, dtype)
        if isinstance(dtype, Encoded):
            return dtype.tolerance
        return DEFAULT_TOLERANCE.get(dtype, (0.0, 0.0))

    def visible(self, simulator: bool) -> tuple:
        return self.sim_sizes if simulator else self.sizes

    def hidden(self, simulator: bool) -> tuple:
        return self.hidden_sim_sizes if simulator else self.hidden_sizes

    def work(self, size) -> dict:
        """The bytes and FLOPs one run at ``size`` must move and compute (None where not stated)."""
        return {"bytes": self.bytes_moved(size) if self.bytes_moved else None,
                "flops": self.flops(size) if self.flops else None}

    # -- where it runs --------------------------------------------------------------------
    def unavailable(self, simulator: bool, cc: tuple[int, int] | None) -> str | None:
        """Why the kernel cannot run here (None when it can): no GPU for a compiled kernel, or a
        GPU other than the one ``arch`` names."""
        if simulator and not self.simulator:
            need = ARCH_NAMES.get(self.arch, "a CUDA GPU") if self.arch else "a CUDA GPU"
            return f"compiled and inspected only: running it needs {need}"
        if self.arch and not simulator and not meets(self.arch, cc):
            have = f"compute capability {cc[0]}.{cc[1]}" if cc else "no GPU"
            return f"compiled and inspected only: running it needs {ARCH_NAMES.get(self.arch, self.arch)}; this GPU has {have}"
        return None


def meets(arch: str, cc: tuple[int, int] | None) -> bool:
    """Does a GPU of capability ``cc`` meet the requirement ``arch``? ``sm_XY``: XY or newer;
    ``sm_XYa``: exactly XY (architecture-specific instructions)."""
    if cc is None:
        return False
    digits = int("".join(ch for ch in arch if ch.isdigit()))
    mine = 10 * cc[0] + cc[1]
    return mine == digits if arch.endswith("a") else mine >= digits
