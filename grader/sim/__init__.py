"""Numba's CUDA simulator, made safe to grade with.

* Every simulated launch is bounded in time: a kernel that never returns (an
  index that never advances, a spin-wait on another block) is stopped after
  ``GRADER_SIM_TIMEOUT`` seconds (default 60) and raises :class:`KernelTimeout`
  in the cell that launched it, so the rest of the notebook is still graded.
  The simulator's own threads cannot be interrupted by Jupyter's timeout, so
  we stop them ourselves: each simulated CUDA thread gets an exception raised
  inside it, and threads parked in ``syncthreads`` are released first.
* Shared memory starts as NaN (float arrays): a thread that reads an element no
  thread has written yet -- typically a missing ``cuda.syncthreads()`` -- gets
  NaN, which every check refuses. (The simulator's own arrays start with
  whatever ``np.empty`` returns, which could hide such a read.)
* The block manager sleeps between its polls instead of spinning on the GIL
  (:mod:`grader.sim.block`): without that, launches took seconds to minutes at random.
* Warp intrinsics (shuffles, votes: :mod:`grader.sim.warp`) and a shared-memory race check
  (:mod:`grader.sim.race`) are added; :mod:`grader.sim.trace` records who touched which element.

Nothing here does anything unless the simulator is active.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import threading

from ..errors import KernelTimeout
from ..launches import note_launch

DEFAULT_TIMEOUT_S = float(os.environ.get("GRADER_SIM_TIMEOUT", "60"))
_timeout_s = DEFAULT_TIMEOUT_S
_installed = False
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep   # grader/


class _Stop(Exception):
    """Raised asynchronously inside simulated threads to end them."""


def _async_raise(thread_id: int, exc_type) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc_type))


def _stop_simulated_threads() -> None:
    from numba.cuda.simulator.kernel import BlockThread

    for t in threading.enumerate():
        if isinstance(t, BlockThread) and t.is_alive():
            t.abort = True
            t.syncthreads_blocked = False
            t.syncthreads_event.set()
            _async_raise(t.ident, _Stop)


def _settle_after_failure(fn) -> None:
    """After a launch that raised, end its leftover simulated threads and undo their module swap.

    The simulator raises as soon as one thread fails and leaves the block's other threads
    running ("for debugging"). Such a straggler that calls a device function can leave the
    simulator's stand-in for ``cuda`` in the notebook's globals, so a later cell's
    ``@cuda.jit`` fails with an AttributeError. Stop them, wait briefly, put ``cuda`` back.
    """
    from numba import cuda as real_cuda
    from numba.cuda.simulator.kernel import BlockThread
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    _stop_simulated_threads()
    for t in threading.enumerate():
        if isinstance(t, BlockThread):
            t.join(timeout=1.0)
    for g in {id(fn.__globals__): fn.__globals__}.values():
        for name, value in list(g.items()):
            if isinstance(value, FakeCUDAModule):
                g[name] = real_cuda


@contextlib.contextmanager
def time_limit(seconds: float):
    """Temporarily change the bound on each simulated launch."""
    global _timeout_s
    old, _timeout_s = _timeout_s, float(seconds)
    try:
        yield
    finally:
        _timeout_s = old


def run_bounded(fn, name: str = "kernel", seconds: float | None = None):
    """Call ``fn()``; if it is still running after ``seconds``, stop it and raise KernelTimeout.

    Only the simulated CUDA threads are interrupted (an exception raised inside each); the
    simulator's block manager then re-raises it in the caller. Nothing is ever raised
    asynchronously in the caller itself, so a kernel that ends just as the bound expires
    cannot leave a stray exception to surface in a later cell.
    """
    seconds = _timeout_s if seconds is None else seconds
    done = threading.Event()
    fired = threading.Event()

    def watchdog():
        if done.wait(seconds):
            return
        fired.set()
        # keep stopping until the launch returns: blocks start one after another
        while not done.is_set():
            _stop_simulated_threads()
            done.wait(0.05)

    watcher = threading.Thread(target=watchdog, name="grader-sim-watchdog", daemon=True)
    watcher.start()
    try:
        return fn()
    except _Stop:
        if not fired.is_set():
            raise
    finally:
        done.set()
    raise KernelTimeout(
        f"`{name}` did not finish within {seconds:g} s in the simulator and was stopped. "
        "Look for a loop whose index never advances, or a wait on another block "
        "(the simulator runs blocks one after another). The simulator manages about "
        "10^4 threads in a few seconds: keep simulated sizes small."
    )


def _poison_shared_memory() -> None:
    """Fill each new float ``cuda.shared.array`` with NaN instead of leftover bytes."""
    import sys

    import numpy as np
    from numba.cuda.simulator import kernelapi
    from numba.cuda import types
    from numba.cuda.np import numpy_support

    original_array = kernelapi.FakeCUDAShared.array

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:          # dynamic shared memory, errors: unchanged
            return original_array(self, shape, dtype, alignment)
        # the simulator keys static allocations by the kernel's source line (file, line): so do we,
        # looking past any wrapper of this function inside the grader package (e.g. a tracer)
        caller = sys._getframe(1)
        while caller.f_back is not None and caller.f_code.co_filename.startswith(_PACKAGE_DIR):
            caller = caller.f_back
        key = (caller.f_code.co_filename, caller.f_lineno)
        arr = self._allocations.get(key)
        if arr is None:
            if isinstance(dtype, types.Type):
                dtype = numpy_support.as_dtype(dtype)
            fresh = np.empty(shape, dtype)
            if fresh.dtype.kind == "f":
                fresh.fill(np.nan)
            arr = self._allocations.setdefault(key, fresh)   # atomic: concurrent threads agree
        return arr

    kernelapi.FakeCUDAShared.array = array


def install() -> None:
    """Bound every top-level simulated launch and add warp intrinsics. Idempotent."""
    global _installed
    if _installed:
        return
    from numba.cuda.simulator import kernel as simkernel

    original_call = simkernel.FakeCUDAKernel.__call__

    def bounded_call(self, *args):
        # device functions and calls made from inside a kernel run unbounded
        if self._device or simkernel._kernel_context is not None:
            return original_call(self, *args)
        note_launch()
        try:
            return run_bounded(lambda: original_call(self, *args), name=self.fn.__name__)
        except BaseException:
            _settle_after_failure(self.fn)
            raise

    simkernel.FakeCUDAKernel.__call__ = bounded_call

    # A stop request can land in a simulated thread just outside the simulator's own
    # try/except (as the thread starts or ends); it must not print a traceback to stderr.
    previous_hook = threading.excepthook

    def quiet_stop(args):
        if args.exc_type is _Stop or isinstance(args.thread, simkernel.BlockThread):
            return
        previous_hook(args)

    threading.excepthook = quiet_stop
    _poison_shared_memory()
    from . import block, warp

    block.install()

    warp.install()
    if os.environ.get("GRADER_SIM_RACECHECK", "1") != "0":
        from . import race

        race.install()       # after warp: it wraps the syncwarp that warp adds
    _installed = True
