"""library_guard: a graded launch function must compute, not call a library.

For problems marked ``library_free`` (chapter 03's GEMMs), grader.check runs
the learner's launch function inside :func:`guard`, which refuses two ways of
getting the answer without writing the kernel:

* **the host**: numpy on the CPU needs the inputs there first. Every
  device→host copy Numba can make (``copy_to_host``, indexing a device array
  from the host; in the simulator ``copy_to_host``) is refused while the
  launch function runs. check hands the launch function device arrays and
  reads the result back from the output's own device buffer, so host results
  never reach it any other way than through a copy back, which is also
  refused (``copy_to_device`` into an output from the host).
* **torch** (cuBLAS behind torch.matmul, or any other torch operation on the
  learner's arrays): if torch is installed, a dispatch mode records
  every aten operation run during the launch; any one of them is refused.

It cannot stop a determined learner calling cuBLAS through ctypes; it stops
the one-liners. The refusal is a :class:`LibraryCall` whose message says what
was seen.
"""
from __future__ import annotations

import contextlib
import sys

from .errors import LibraryCall


def _refuse(what: str):
    raise LibraryCall(
        f"the launch function {what}. Graded GEMM cells must compute C with your own kernel on the "
        "device: no numpy on the host, no torch.matmul / cuBLAS.")


@contextlib.contextmanager
def _patched(obj, name, replacement):
    old = obj.__dict__.get(name)
    setattr(obj, name, replacement)
    try:
        yield
    finally:
        if old is None:
            delattr(obj, name)
        else:
            setattr(obj, name, old)


def _numba_patches(stack: contextlib.ExitStack, outputs: tuple):
    from .backend import SIMULATOR

    out_ids = {id(o) for o in outputs}

    def no_d2h(*args, **kwargs):
        _refuse("copied device data to the host (copy_to_host / indexing a device array)")

    if not SIMULATOR:
        from numba.cuda.cudadrv import devicearray, driver

        stack.enter_context(_patched_module(driver, "device_to_host", no_d2h))
        base = devicearray.DeviceNDArrayBase
    else:
        from numba.cuda.simulator.cudadrv import devicearray

        base = devicearray.FakeCUDAArray
        stack.enter_context(_patched(base, "copy_to_host", lambda self, *a, **k: no_d2h()))
    real_h2d = base.copy_to_device

    def guarded_h2d(self, ary, *a, **k):
        if id(self) in out_ids:
            _refuse("copied a result into the output from the host (copy_to_device)")
        return real_h2d(self, ary, *a, **k)

    stack.enter_context(_patched(base, "copy_to_device", guarded_h2d))


@contextlib.contextmanager
def _patched_module(mod, name, replacement):
    old = getattr(mod, name)
    setattr(mod, name, replacement)
    try:
        yield
    finally:
        setattr(mod, name, old)


def _torch_mode(stack: contextlib.ExitStack, seen: list):
    torch = sys.modules.get("torch")
    if torch is None:
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            return
        import torch  # installed but not yet imported: the launch function could import it itself
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:  # very old torch
        return

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    stack.enter_context(Record())


@contextlib.contextmanager
def guard(outputs: tuple = ()):
    """Refuse host computation and torch operations inside the block (see the module docstring)."""
    seen: list = []
    with contextlib.ExitStack() as stack:
        _numba_patches(stack, outputs)
        _torch_mode(stack, seen)
        yield
    if seen:
        _refuse(f"ran torch operations ({', '.join(sorted(set(seen))[:3])})")
