"""check: is the learner's kernel right?

:func:`check` runs the learner's *launch function* on fresh random inputs at several sizes and
compares with the problem's float64 reference. Every run draws a new seed (printed on failure, so
it can be replayed), fills each output with a recognisable NaN ("poison") inside a poisoned guard
zone (an element never written, or a write past the end, cannot pass), refuses NaN and inf,
checks that inputs were left unchanged and that a kernel was launched, and on failure raises
:class:`CheckFailed` listing the first mismatches and a one-line hint.

It is two halves, so that the judge (grader.judge) can run them in two processes:

* :func:`run_case` — the device side: inputs to the device, the launch function called (bounded),
  everything copied back into an :class:`Observation` of host arrays;
* :func:`verdict` — the comparison, pure NumPy, from the inputs and the reference.

The launch function receives device arrays (inputs, then outputs, in the order the problem lists
them; Numba arrays or torch tensors as the problem's ``arrays`` says) plus scalar inputs.
"""
from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import arrays, launches, memory
from .cases import Cases
from .compare import compare, describe_size, guard_violation
from .cuda.toolchain import compute_capability
from .errors import CheckFailed, KernelTimeout, LibraryCall
from .judged import RUNNER
from .backend import SIMULATOR
from .problem import Problem

GPU_TIMEOUT_S = float(os.environ.get("GRADER_GPU_TIMEOUT", "60"))   # one checked launch on a GPU


def fresh_seed() -> int:
    return secrets.randbits(31)


# ---------------------------------------------------------------- the learner's code failed
# CUDA errors after which the context is unusable until the process restarts
_CONTEXT_FATAL = ("ILLEGAL_ADDRESS", "LAUNCH_FAILED", "ILLEGAL_INSTRUCTION", "MISALIGNED_ADDRESS",
                  "HARDWARE_STACK_ERROR", "CUDA_ERROR_ASSERT", "INVALID_PC", "CONTEXT_IS_DESTROYED")
_context_lost: str | None = None      # why the CUDA context is unusable, once it is


def explain(exc: BaseException) -> str:
    """One message for an exception raised by the learner's launch function."""
    global _context_lost
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, LibraryCall):
        return f"refused: {exc}"
    if isinstance(exc, NotImplementedError):
        # Numba's simulator re-raises a kernel's exception as "tid=[…] ctaid=[…]: message": keep the message
        said = re.sub(r"^tid=\[[^\]]*\] ctaid=\[[^\]]*\](: )?", "", str(exc))
        if said:                        # e.g. grader.cuda.module.StubLaunch: it says which cell
            return f"not implemented yet: {said}"
        return "not implemented yet: replace `raise NotImplementedError()` with your code."
    if isinstance(exc, KernelTimeout):
        return str(exc)
    if isinstance(exc, IndexError) and SIMULATOR:
        return (text + "\nhint: a thread indexed outside an array. Threads past the end of the data "
                "must do nothing: guard with `if i < n:`.")
    if any(k in text.upper() for k in _CONTEXT_FATAL) or "illegal memory access" in text:
        _context_lost = _context_lost or text.splitlines()[0][:200]
        return (text + "\nhint: a thread read or wrote outside an array. The CUDA context is now "
                "unusable (every later GPU cell fails): restart the kernel after fixing the bounds guard.")
    if isinstance(exc, MemoryError) or "OUT_OF_MEMORY" in text.upper() or "out of memory" in text:
        return (text + "\nhint: out of memory: the launch function asked for more memory than the "
                "device has. The outputs are allocated for you; allocate only the scratch space the "
                "kernel needs, sized from the inputs.")
    return text


def refuse_if_context_lost() -> None:
    """Later graded cells fail at once, with the reason, instead of a CUDA traceback (or a hang)."""
    if _context_lost:
        raise CheckFailed(f"the GPU is unusable since an earlier kernel failed ({_context_lost}). "
                          "Restart the kernel (Kernel → Restart) after fixing it, then run all cells.")


def wait_for_gpu(name: str = "the launch function") -> None:
    """Synchronize, bounded on a GPU: a kernel that never returns raises KernelTimeout.

    The kernel cannot be stopped from the host (only ending the process does), so the context is
    then marked unusable and later checks fail at once saying to restart."""
    from numba import cuda

    if SIMULATOR:                 # simulated launches are bounded by grader.sim
        cuda.synchronize()
        return
    global _context_lost
    done = cuda.event(timing=False)
    done.record()
    start = time.monotonic()
    while not done.query():
        if time.monotonic() - start > GPU_TIMEOUT_S:
            _context_lost = f"a kernel of {name} did not finish within {GPU_TIMEOUT_S:g} s"
            raise KernelTimeout(
                f"{name} did not finish within {GPU_TIMEOUT_S:g} s on the GPU (GRADER_GPU_TIMEOUT). "
                "Look for a loop whose index never advances or a wait on another block. The GPU is "
                "still running it: restart the kernel (Kernel → Restart).")
        time.sleep(0.0005)
    cuda.synchronize()


# ---------------------------------------------------------------- one run
@dataclass
class Observation:
    """What one run of a launch function left behind, as host arrays (all the judge needs)."""
    outputs: dict = field(default_factory=dict)    # name -> flat buffer with its guard zone (storage dtype)
    inputs_changed: list = field(default_factory=list)
    launched: bool = False
    returned: bool = False                        # the launch function returned a value
    error: str | None = None                      # its exception, explained
    scratch_bytes: int | None = None              # device memory it allocated (grader.memory)


def run_case(launch: Callable, problem: Problem, size, inputs: dict) -> Observation:
    """Run ``launch`` once on ``inputs`` (made at ``size``) on the device; copy everything back."""
    from . import integrity

    kind = problem.arrays
    padded_in, dev_in = {}, {}
    for k, v in inputs.items():
        if isinstance(v, np.ndarray):
            padded_in[k], dev_in[k] = arrays.upload(v, kind)
        else:
            dev_in[k] = v
    out_spec = problem.outputs(size, inputs)
    padded_out, dev_out = {}, {}
    for k, (shape, dtype) in out_spec.items():
        padded_out[k], dev_out[k] = arrays.output(shape, dtype, kind)
    if problem.library_free:
        from .library_guard import guard

        guarded = guard(tuple(dev_out.values()))
    else:
        guarded = contextlib.nullcontext()
    integrity.count_launches()
    before = launches.launch_count()
    obs = Observation()
    try:
        with warnings.catch_warnings(), guarded, memory.track() as used:
            warnings.simplefilter("ignore")       # performance advice must not reach stderr
            returned = launch(*dev_in.values(), *dev_out.values())
            wait_for_gpu(getattr(launch, "__name__", "the launch function"))
    except Exception as exc:                      # the learner's code failed: say how, in one place
        obs.error = explain(exc)
        return obs
    obs.scratch_bytes = used.bytes
    obs.launched = launches.launch_count() > before
    obs.returned = returned is not None
    for k, (shape, dtype) in out_spec.items():
        obs.outputs[k] = arrays.to_host(padded_out[k], dtype)
    for k, v in inputs.items():
        if isinstance(v, np.ndarray):
            after = arrays.to_host(padded_in[k], v.dtype)[: v.size]
            if not np.array_equal(after.view(np.uint8), v.ravel().view(np.uint8)):
                obs.inputs_changed.append(k)
    return obs


def verdict(problem: Problem, size, inputs: dict, obs: Observation, want: dict | None = None) -> list[str]:
    """Failure lines for one run (empty: right). ``want`` is the reference, computed if not given."""
    if obs.error:
        return [obs.error]
    if obs.returned:
        return ["the launch function returned a value: it should write into the output "
                "array(s) it is given and return nothing."]
    want = problem.reference(**inputs) if want is None else want
    failures = []
    for k, (shape, dtype) in problem.outputs(size, inputs).items():
        n = int(np.prod(shape, dtype=np.int64))
        flat = obs.outputs.get(k)
        if flat is None or flat.size < n:
            failures.append(f"`{k}`: no output came back")
            continue
        past_end = guard_violation(k, flat, n, dtype)
        if past_end:
            failures.append(past_end)
            continue
        rtol, atol = problem.tolerances(size, dtype)
        failures += compare(k, flat[:n].reshape(shape), np.asarray(want[k]), rtol, atol, dtype=dtype)
    failures += [f"input `{k}` was modified: kernels here must only write their outputs."
                 for k in obs.inputs_changed]
    if problem.max_scratch_bytes is not None and obs.scratch_bytes is not None:
        failures += memory.over_bound(obs.scratch_bytes, problem.max_scratch_bytes(size))
    if not failures and not obs.launched:        # right, but not computed by a kernel of the learner's
        failures.append("no kernel was launched: the launch function must launch your kernel "
                        "(kernel[blocks, threads](...)). An answer computed on the host (NumPy, torch, "
                        "copy_to_device) earns no points.")
    return failures


def failure_message(problem: Problem, size, seed: int, failures: list[str], hidden: bool) -> str:
    where = "a hidden test" if hidden else problem.name
    hint = f"\n{problem.hint}" if problem.hint and not failures[0].startswith("not implemented") else ""
    return f"{where} failed at {describe_size(size)} (seed {seed}):\n" + "\n".join(failures) + hint


def sizes_for(problem: Problem, sizes=None, hidden: bool = False) -> tuple:
    if sizes is not None:
        return tuple(sizes)
    return problem.hidden(SIMULATOR) if hidden else problem.visible(SIMULATOR)


def not_here(problem: Problem) -> str | None:
    """Why this machine cannot run the problem's kernel (None: it can)."""
    return problem.unavailable(SIMULATOR, None if SIMULATOR else compute_capability())


# Inside the judge's runner (the notebook executed for its feedback; the grade is the judge's, on its own
# inputs) a notebook's checks of its several versions share one case per (problem, size): its inputs
# and reference are made once. The learner's own lab always draws fresh ones.
_FEEDBACK_SEED = fresh_seed()
_feedback_cases = Cases(2 * 2**30)                   # at most ~2 GiB of cases


def check(launch: Callable, problem: Problem, sizes: list | None = None, seed: int | None = None,
          hidden: bool = False, quiet: bool = False) -> None:
    """Check ``launch`` on ``problem`` at each size; raise CheckFailed on the first wrong size.

    sizes   defaults to the problem's visible sizes (simulator sizes without a GPU); ``hidden=True``
            uses its hidden sizes instead. seed: defaults to a fresh random seed per size.
    Where the kernel cannot run (a compiled kernel without a GPU, a Hopper kernel elsewhere) it
    prints why and returns (no error: the judge gives such a cell 0 points, saying the same).
    """
    __tracebackhide__ = True
    why = not_here(problem)
    if why:
        print(f"{problem.name}: correctness not graded: {why}.")
        return None
    from .integrity import GraderModified, verify

    refuse_if_context_lost()
    verify(problem)
    for size in sizes_for(problem, sizes, hidden):
        if seed is None and RUNNER:        # feedback while graded: every version on one set of inputs
            s = _FEEDBACK_SEED
            inputs, want = _feedback_cases.get(problem, size, s)
        else:
            s = fresh_seed() if seed is None else seed
            inputs, want = problem.make_inputs(np.random.default_rng(s), size), None
        try:
            obs = run_case(launch, problem, size, inputs)
            verify(problem)                      # the launch function may have patched the checks
            failures = verdict(problem, size, inputs, obs, want)
        except GraderModified:
            raise
        except Exception as exc:                 # e.g. a CUDA error surfacing in a copy after the launch
            failures = [explain(exc)]
        if failures:
            raise CheckFailed(failure_message(problem, size, s, failures, hidden))
    if not quiet:
        label = "hidden sizes" if hidden else ", ".join(describe_size(s) for s in sizes_for(problem, sizes))
        print(f"✓ {problem.name} correct{' (simulator)' if SIMULATOR else ''}: {label}")
    return None
