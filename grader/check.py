"""check: is the learner's kernel right?

A :class:`Problem` says how to make inputs, what the outputs are, and how to
compute them in float64. :func:`check` runs the learner's *launch function* on
fresh random inputs for several sizes and compares. Every run:

* draws a new seed (printed on failure, so a failure can be replayed);
* fills each output with a recognisable NaN ("poison") so an element the kernel
  never wrote cannot pass, and pads every array with a guard zone so a write
  past the end (a missing bounds guard) is caught on the GPU too, where it
  would not fault;
* refuses NaN and inf, and checks that inputs were left unchanged;
* on failure raises :class:`CheckFailed` listing the first mismatches with
  their indices and a one-line hint.

The launch function receives device arrays (inputs, then outputs, in the order
the problem lists them) plus any scalar inputs, and launches the kernel.
"""
from __future__ import annotations

import math
import os
import secrets
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ._mode import SIMULATOR

GPU_TIMEOUT_S = float(os.environ.get("GRADER_GPU_TIMEOUT", "60"))  # one checked launch on a GPU
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
GUARD_ELEMENTS = 256  # poisoned elements after every array: writes there are out of bounds
SHOW_MISMATCHES = 5

# Default (rtol, atol) by output dtype, for results computed once per element in
# that dtype from exact inputs. Reductions scale these with their length.
DEFAULT_TOLERANCE = {
    np.dtype(np.float64): (1e-12, 1e-12),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float16): (1e-3, 1e-4),   # 2^-11 relative rounding, plus fp32 math
}


@dataclass(frozen=True)
class Encoded:
    """A number format NumPy lacks, stored in an unsigned integer dtype of the same width.

    bf16 lives in uint16 (see grader.formats.BF16). An output declared with an Encoded
    dtype is allocated in ``storage``, poisoned with ``poison`` (a NaN bit pattern no
    arithmetic produces), and compared as ``decode(stored)`` in float64.
    """

    name: str
    storage: str                                  # NumPy dtype the bits live in, e.g. "uint16"
    decode: Callable[[np.ndarray], np.ndarray]    # stored bits -> float64 values
    poison: int
    tolerance: tuple = (0.0, 0.0)                 # default (rtol, atol)

    @property
    def itemsize(self) -> int:
        return np.dtype(self.storage).itemsize

    def __str__(self) -> str:
        return f"{self.name} (stored as {self.storage})"


def storage_dtype(dtype) -> np.dtype:
    """The NumPy dtype an output of ``dtype`` (a dtype or an Encoded) is stored in."""
    return np.dtype(dtype.storage) if isinstance(dtype, Encoded) else np.dtype(dtype)


class CheckFailed(AssertionError):
    """The kernel gave a wrong answer. The message says where and why."""

    def _render_traceback_(self):  # IPython shows this instead of a traceback wall
        return ["\x1b[31mCheckFailed\x1b[0m: " + str(self)]


@dataclass
class Problem:
    """A graded computation.

    make_inputs(rng, size) -> dict of named inputs: numpy arrays and scalars.
    outputs(size, inputs)  -> dict name -> (shape, dtype) of each output.
    reference(**inputs)    -> dict name -> float64 (or exact) expected outputs.
    """

    name: str
    make_inputs: Callable[[np.random.Generator, Any], dict]
    outputs: Callable[[Any, dict], dict]
    reference: Callable[..., dict]
    sizes: list                      # visible test sizes on a GPU
    sim_sizes: list                  # visible test sizes in the simulator (~10^4 threads)
    hidden_sizes: list = field(default_factory=list)
    hidden_sim_sizes: list = field(default_factory=list)
    tolerance: Callable[[Any, np.dtype], tuple] | None = None
    hint: str = ""                   # lesson-specific advice shown on a wrong value
    bytes_moved: Callable[[Any], int] | None = None   # the fewest bytes: each input read once, each output written once
    flops: Callable[[Any], int] | None = None
    bench_size: Any = None           # size timed by the speed cell
    peer: str | None = "copy"        # what speed is a fraction of (see bench.bench)
    target: float = 1.0              # fraction of the peer that earns full speed points
    floor: float = 0.0               # fraction at or below which speed earns nothing
    library_free: bool = False       # refuse host (numpy) and torch computation in the launch (library_guard)

    def __post_init__(self):
        from .integrity import register_problem

        register_problem(self)   # at the lesson's import, before any learner code runs

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        import sys

        from .integrity import is_registered, register_problem
        if is_registered(self) and sys._getframe(1).f_code.co_filename.startswith(_PACKAGE_DIR):
            register_problem(self)   # the course's own set-up (e.g. a peer set after creation)

    def tolerances(self, size, dtype) -> tuple:
        dtype = dtype if isinstance(dtype, Encoded) else np.dtype(dtype)
        if self.tolerance is not None:
            return self.tolerance(size, dtype)
        if isinstance(dtype, Encoded):
            return dtype.tolerance
        return DEFAULT_TOLERANCE.get(dtype, (0.0, 0.0))

    def visible_sizes(self) -> list:
        return self.sim_sizes if SIMULATOR else self.sizes

    def secret_sizes(self) -> list:
        return self.hidden_sim_sizes if SIMULATOR else self.hidden_sizes


# ---------------------------------------------------------------- poison
def _poison_bits(dtype):
    """A quiet NaN with a payload no arithmetic produces (ints: the most negative value)."""
    if isinstance(dtype, Encoded):
        return np.array(dtype.poison, dtype=dtype.storage)
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        uint = np.dtype(f"u{dtype.itemsize}")
        pattern = {2: 0x7E5A, 4: 0x7FC0DEAD, 8: 0x7FF8DEADBEEF0BAD}[dtype.itemsize]
        return np.array(pattern, dtype=uint)
    if dtype.kind in "iu":
        return np.array(np.iinfo(dtype).min, dtype=dtype)
    raise TypeError(f"cannot poison dtype {dtype}")


def poisoned(shape, dtype) -> np.ndarray:
    """A host array of ``shape`` + guard zone, every element poison. Returns the flat buffer."""
    n = int(np.prod(shape, dtype=np.int64))
    bits = _poison_bits(dtype)           # an Encoded format brings its own NaN pattern
    return np.full(n + GUARD_ELEMENTS, bits, dtype=bits.dtype).view(storage_dtype(dtype))


def _is_poison(a: np.ndarray, dtype=None) -> np.ndarray:
    bits = _poison_bits(a.dtype if dtype is None else dtype)
    return a.view(bits.dtype) == bits


# ---------------------------------------------------------------- device arrays
def _to_device_padded(host: np.ndarray):
    """Copy ``host`` to the device inside a larger poisoned buffer; return (buffer, view)."""
    from numba import cuda

    flat = poisoned(host.shape, host.dtype)
    flat[: host.size] = host.ravel()
    d_flat = cuda.to_device(flat)
    return d_flat, d_flat[: host.size].reshape(host.shape)


def _device_output(shape, dtype):
    from numba import cuda

    d_flat = cuda.to_device(poisoned(shape, dtype))
    n = int(np.prod(shape, dtype=np.int64))
    return d_flat, d_flat[:n].reshape(shape)


def _describe_size(size) -> str:
    if isinstance(size, tuple):
        return "shape=" + "×".join(str(s) for s in size)
    return f"n={size}"


def _fmt(x) -> str:
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.7g}"
    return str(x)


# ---------------------------------------------------------------- comparison
def compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float,
            dtype=None) -> list[str]:
    """Return failure lines (empty if ``got`` matches ``want``).

    dtype: an :class:`Encoded` format when ``got`` holds its stored bits (compared decoded).
    """
    if got.shape != want.shape:
        return [f"`{name}` has shape {got.shape}, expected {want.shape}"]
    unwritten = _is_poison(got, dtype)
    if isinstance(dtype, Encoded):
        got = dtype.decode(got)
    if got.dtype.kind == "f":
        g = got.astype(np.float64)
        bad = ~np.isfinite(g) | ~(np.abs(g - want) <= atol + rtol * np.abs(want))
    else:
        g = got
        bad = got != want
    if not bad.any():
        return []
    idx = np.argwhere(bad)
    n_bad, n = int(bad.sum()), bad.size
    lines = [f"`{name}`: {n_bad} of {n} elements wrong ({100.0 * n_bad / n:.3g}%)"]
    for i in idx[:SHOW_MISMATCHES]:
        i = tuple(int(k) for k in i)
        where = i[0] if len(i) == 1 else i
        got_s = "never written" if unwritten[i] else _fmt(got[i])
        lines.append(f"    at {where}: got {got_s}, expected {_fmt(want[i])}")
    if n_bad > SHOW_MISMATCHES:
        lines.append(f"    … and {n_bad - SHOW_MISMATCHES} more")
    lines.append("hint: " + _hint(bad, unwritten, got))
    return lines


def _hint(bad: np.ndarray, unwritten: np.ndarray, got: np.ndarray) -> str:
    flat_bad, flat_unw = bad.ravel(), unwritten.ravel()
    n = flat_bad.size
    if flat_unw.all():
        return ("no element was written. Did the launch function launch the kernel "
                "(kernel[blocks, threads](...)) and does the kernel store into the output?")
    if flat_unw.any() and np.array_equal(flat_bad, flat_unw):
        first = int(np.argmax(flat_unw))
        if flat_unw[first:].all():
            return (f"the last {n - first} elements were never written: the grid does not cover "
                    "the whole array. Round the block count up: (n + threads - 1) // threads.")
        return (f"{int(flat_unw.sum())} elements were never written (the first at flat index {first}): "
                "check how each thread computes its index and that every index is covered.")
    if got.dtype.kind == "f" and not np.isfinite(got.astype(np.float64)[bad & ~unwritten]).all():
        return "the kernel produced NaN or inf: look for a read of an element nothing wrote, or an overflow."
    return "values are wrong where written: check the formula, the index each thread uses, and the dtype of the math."


# ---------------------------------------------------------------- running
def _explain_exception(exc: BaseException) -> str:
    from .sim import KernelTimeout

    text = f"{type(exc).__name__}: {exc}"
    from .library_guard import LibraryCall

    if isinstance(exc, LibraryCall):
        return f"refused: {exc}"
    if isinstance(exc, NotImplementedError):
        return "not implemented yet: replace `raise NotImplementedError()` with your code."
    if isinstance(exc, KernelTimeout):
        return str(exc)
    if isinstance(exc, IndexError) and SIMULATOR:
        return (text + "\nhint: a thread indexed outside an array. Threads past the end of the data "
                "must do nothing: guard with `if i < n:`.")
    if any(k in text.upper() for k in _CONTEXT_FATAL) or "illegal memory access" in text:
        global _context_lost
        _context_lost = _context_lost or text.splitlines()[0][:200]
        return (text + "\nhint: a thread read or wrote outside an array. The CUDA context is now "
                "unusable (every later GPU cell fails): restart the kernel after fixing the bounds guard.")
    if isinstance(exc, MemoryError) or "OUT_OF_MEMORY" in text.upper() or "out of memory" in text:
        return (text + "\nhint: out of memory: the launch function asked for more memory than the "
                "device has. The outputs are allocated for you; allocate only the scratch space the "
                "kernel needs, sized from the inputs.")
    return text


# CUDA errors after which the context is unusable until the process restarts
_CONTEXT_FATAL = ("ILLEGAL_ADDRESS", "LAUNCH_FAILED", "ILLEGAL_INSTRUCTION", "MISALIGNED_ADDRESS",
                  "HARDWARE_STACK_ERROR", "CUDA_ERROR_ASSERT", "INVALID_PC", "CONTEXT_IS_DESTROYED")
_context_lost: str | None = None      # why the CUDA context is unusable, once it is


def refuse_if_context_lost() -> None:
    """Later graded cells fail at once, with the reason, instead of a CUDA traceback (or a hang)."""
    if _context_lost:
        raise CheckFailed(f"the GPU is unusable since an earlier kernel failed ({_context_lost}). "
                          "Restart the kernel (Kernel → Restart) after fixing it, then run all cells.")


def wait_for_gpu(name: str = "the launch function") -> None:
    """cuda.synchronize(), bounded on a GPU: a kernel that never returns raises KernelTimeout.

    The kernel cannot be stopped from the host (only ending the process does), so the context is
    then marked unusable and later graded cells fail at once with a message saying to restart.
    """
    from numba import cuda

    if SIMULATOR:                 # simulated launches are bounded by grader.sim
        cuda.synchronize()
        return
    from .sim import KernelTimeout

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


def run_once(launch: Callable, problem: Problem, size, seed: int) -> list[str]:
    """Run ``launch`` once at ``size``; return failure lines (empty on success)."""
    from numba import cuda

    rng = np.random.default_rng(seed)
    inputs = problem.make_inputs(rng, size)
    out_spec = problem.outputs(size, inputs)
    want = problem.reference(**inputs)

    dev_in, padded_in = {}, {}
    for k, v in inputs.items():
        if isinstance(v, np.ndarray):
            padded_in[k], dev_in[k] = _to_device_padded(v)
        else:
            dev_in[k] = v
    dev_out, padded_out = {}, {}
    for k, (shape, dtype) in out_spec.items():
        padded_out[k], dev_out[k] = _device_output(shape, dtype)

    if problem.library_free:
        from .library_guard import guard
        guarded = guard(tuple(dev_out.values()))
    else:
        import contextlib
        guarded = contextlib.nullcontext()
    from . import integrity

    integrity.count_launches()
    launches = integrity.launch_count()
    try:
        with warnings.catch_warnings(), guarded:
            warnings.simplefilter("ignore")   # performance advice must not reach stderr
            returned = launch(*dev_in.values(), *dev_out.values())
            wait_for_gpu(getattr(launch, "__name__", "the launch function"))
    except Exception as exc:  # the learner's code failed: say how, in one place
        return [_explain_exception(exc)]
    integrity.verify(problem)      # the launch function may have patched the checks it is about to meet
    launched = integrity.launch_count() > launches
    if returned is not None:
        return ["the launch function returned a value: it should write into the output "
                "array(s) it is given and return nothing."]

    failures = []
    for k, (shape, dtype) in out_spec.items():
        flat = padded_out[k].copy_to_host()
        n = int(np.prod(shape, dtype=np.int64))
        got = flat[:n].reshape(shape)
        if not _is_poison(flat[n:], dtype).all():
            first = n + int(np.argmin(_is_poison(flat[n:], dtype)))
            failures.append(
                f"`{k}`: the kernel wrote past the end of the array (flat index {first}, size {n}). "
                "Threads beyond the data must do nothing: guard with `if i < n:`.")
            continue
        rtol, atol = problem.tolerances(size, dtype)
        failures += compare(k, got, np.asarray(want[k]), rtol, atol, dtype=dtype)
    for k, v in inputs.items():
        if isinstance(v, np.ndarray):
            after = padded_in[k].copy_to_host()[: v.size].reshape(v.shape)
            if not np.array_equal(after.view(np.uint8), v.view(np.uint8)):
                failures.append(f"input `{k}` was modified: kernels here must only write their outputs.")
    if not failures and not launched:     # right, but not computed by a kernel of the learner's
        failures.append("no kernel was launched: the launch function must launch your kernel "
                        "(kernel[blocks, threads](...)). An answer computed on the host (NumPy, torch, "
                        "copy_to_device) earns no points.")
    return failures


def fresh_seed() -> int:
    return secrets.randbits(31)


def check(launch: Callable, problem: Problem, sizes: list | None = None, seed: int | None = None,
          hidden: bool = False, quiet: bool = False, gpu_only: bool = False) -> float | None:
    """Check ``launch`` on ``problem`` at each size; raise CheckFailed on the first wrong size.

    sizes   defaults to the problem's visible sizes (simulator sizes without a GPU);
            ``hidden=True`` uses its hidden sizes instead.
    seed    defaults to a fresh random seed per size.
    gpu_only  for kernels the simulator cannot run (compiled CUDA C++ cells): without a
            GPU print "not graded: no GPU" and return 0.0 (nbgrader's partial credit: the
            cell earns nothing, without an error). With a GPU it checks as usual and
            returns None (a cell that does not fail earns its points).
    """
    __tracebackhide__ = True
    if gpu_only and SIMULATOR:
        print(f"{problem.name}: correctness not graded: no GPU (a compiled CUDA kernel needs one to run). "
              "Run this notebook on a CUDA GPU for these points.")
        return 0.0
    from .integrity import GraderModified, verify

    refuse_if_context_lost()
    verify(problem)
    if sizes is None:
        sizes = problem.secret_sizes() if hidden else problem.visible_sizes()
    for size in sizes:
        s = fresh_seed() if seed is None else seed
        try:
            failures = run_once(launch, problem, size, s)
        except GraderModified:
            raise
        except Exception as exc:   # e.g. a CUDA error surfacing in a copy after the launch
            failures = [_explain_exception(exc)]
        if failures:
            where = "a hidden test" if hidden else problem.name
            raise CheckFailed(
                f"{where} failed at {_describe_size(size)} (seed {s}):\n" + "\n".join(failures)
                + (f"\n{problem.hint}" if problem.hint and not failures[0].startswith("not implemented") else ""))
    if not quiet:
        mode = " (simulator)" if SIMULATOR else ""
        label = "hidden sizes" if hidden else ", ".join(_describe_size(s) for s in sizes)
        print(f"✓ {problem.name} correct{mode}: {label}")
