"""A shared-memory race check for Numba's CUDA simulator.

The simulator runs a block's threads as Python threads that the interpreter
switches between; a kernel with a missing ``cuda.syncthreads()`` often still
gives the right answer there, by luck of the schedule. This module makes the
mistake deterministic instead, the way ``compute-sanitizer --tool racecheck``
does on a GPU: every static ``cuda.shared.array`` remembers, per element, which
thread last wrote it and how many barriers that thread had passed. A thread
that reads (or overwrites) an element another thread wrote *since the last
barrier both have passed* raises :class:`SharedMemoryRace`, naming the threads,
the element and the fix.

Rules (B = block-wide barriers passed, W = barriers passed by the warp,
counting ``syncwarp`` and ``syncthreads``):

* thread T reading or writing an element last written by thread U != T is
  ordered if B(T) > B(U at the write), or if T and U are in the same warp and
  W(T) > W(U at the write); otherwise it is a race;
* reading an element no thread of *this* block wrote is reported too
  (on a GPU it would be garbage left by another block);
* ``cuda.atomic.*`` on shared memory is never a race (it bypasses the check).

Not checked: write-after-read hazards, dynamic shared memory (``shape=0``),
global memory. Numba's simulator shares one array per source line between all
blocks of a launch, which is what makes the cross-block check possible.
"""
from __future__ import annotations

import os
import sys
import threading

import numpy as np

_installed = False
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep   # grader/


class SharedMemoryRace(RuntimeError):
    """Two threads touched a shared-memory element with no barrier between them."""


def _me():
    t = threading.current_thread()
    bd = t._manager._block_dim if hasattr(t._manager, "_block_dim") else None
    return t, bd


def _linear(idx, bdim) -> int:
    return int(idx[0] + idx[1] * bdim[0] + idx[2] * bdim[0] * bdim[1])


class _Shadow:
    """Per-element history of one shared array: writer thread, its barrier counts, its block."""

    def __init__(self, shape):
        self.tid = np.full(shape, -1, dtype=np.int64)
        self.bar = np.zeros(shape, dtype=np.int64)
        self.wbar = np.zeros(shape, dtype=np.int64)
        self.block = np.full(shape, -1, dtype=np.int64)


class SharedArray(np.ndarray):
    """A NumPy array whose element reads and writes are checked for races."""

    _shadow: _Shadow | None = None
    _name: str = "shared array"

    def _who(self):
        t = threading.current_thread()
        if not hasattr(t, "threadIdx"):
            return None  # host code (a debugger, a print): not a simulated thread
        tid = getattr(t, "_race_tid", None)
        if tid is None:
            bd = t._manager._block_dim
            tid = t._race_tid = int(t.threadIdx.x + t.threadIdx.y * bd[0] + t.threadIdx.z * bd[0] * bd[1])
            gd = t._manager._grid_dim
            b = t.blockIdx
            t._race_block = int(b.x + b.y * gd[0] + b.z * gd[0] * gd[1])
        return t, tid

    def _check(self, idx, writing: bool):
        who = self._who()
        sh = self._shadow
        if who is None or sh is None:
            return
        t, tid = who
        bar, wbar, block = getattr(t, "_race_bar", 0), getattr(t, "_race_wbar", 0), t._race_block
        w_tid = np.asarray(sh.tid[idx])
        w_bar, w_wbar, w_block = (np.asarray(a[idx]) for a in (sh.bar, sh.wbar, sh.block))
        same_block = w_block == block
        if not writing:
            uninit = ~same_block
            if uninit.any():
                where = _first(idx, uninit)
                if (np.asarray(w_block)[uninit] == -1).all():
                    raise SharedMemoryRace(
                        f"shared-memory race or uninitialised read: thread {_tid3(t)} of block {block} "
                        f"read {self._name}{where} before any thread had written it. If another thread "
                        "writes it, put a cuda.syncthreads() between that write and this read.")
                raise SharedMemoryRace(
                    f"thread {_tid3(t)} of block {block} read {self._name}{where}, which no thread of "
                    "this block wrote (an earlier block did): on a GPU that is leftover garbage. Write "
                    "every shared element before reading it, with cuda.syncthreads() in between.")
        other = same_block & (w_tid != tid) & (w_tid >= 0)
        ordered = (bar > w_bar) | (((w_tid // 32) == tid // 32) & (wbar > w_wbar))
        bad = other & ~ordered
        if bad.any():
            where = _first(idx, bad)
            writer = int(np.asarray(w_tid)[np.unravel_index(np.argmax(bad), bad.shape)] if bad.shape else w_tid)
            verb = "overwrote" if writing else "read"
            raise SharedMemoryRace(
                f"shared-memory race: thread {_tid3(t)} {verb} {self._name}{where}, which thread "
                f"{writer} (linear id) wrote with no cuda.syncthreads() between the two. "
                "Put a cuda.syncthreads() (or cuda.syncwarp() within one warp) between the write "
                "and the access, reached by every thread of the block.")
        if writing:
            sh.tid[idx], sh.bar[idx], sh.wbar[idx], sh.block[idx] = tid, bar, wbar, block

    def __getitem__(self, idx):
        if self._shadow is not None:
            self._check(idx, writing=False)
            return np.ndarray.__getitem__(self.view(np.ndarray), idx)
        return np.ndarray.__getitem__(self, idx)

    def __setitem__(self, idx, value):
        if self._shadow is not None:
            self._check(idx, writing=True)
            np.ndarray.__setitem__(self.view(np.ndarray), idx, value)
        else:
            np.ndarray.__setitem__(self, idx, value)


def _first(idx, mask) -> str:
    if mask.shape == ():
        return f"[{idx}]" if not isinstance(idx, tuple) else "[" + ", ".join(str(int(i)) for i in idx) + "]"
    return f"[{idx}] (element {int(np.argmax(mask))} of that selection)"


def _tid3(t) -> str:
    i = t.threadIdx
    return f"({i.x}, {i.y}, {i.z})"


def checked(arr: np.ndarray, name: str = "shared array") -> SharedArray:
    s = arr.view(SharedArray)
    s._shadow = _Shadow(arr.shape)
    s._name = name
    return s


def _raw(a):
    return a.view(np.ndarray) if isinstance(a, SharedArray) else a


def install() -> None:
    """Check static shared arrays for races in every simulated launch. Idempotent."""
    global _installed
    if _installed:
        return
    from numba.cuda.simulator import kernel, kernelapi
    from numba.cuda.simulator.kernelapi import numpy_support, types

    original_array = kernelapi.FakeCUDAShared.array
    lock = threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:
            return original_array(self, shape, dtype, alignment)
        # like the simulator, one array per source line of the kernel (the caller's
        # file and line), but created under a lock: threads of a block arrive together
        caller = sys._getframe(1)
        while caller.f_back is not None and caller.f_code.co_filename.startswith(_PACKAGE_DIR):
            caller = caller.f_back                   # past other wrappers of this function in grader/
        key = (caller.f_code.co_filename, caller.f_lineno)
        with lock:
            allocations = self.__dict__.setdefault("_race_checked", {})
            a = allocations.get(key)
            if a is None:
                if isinstance(dtype, types.Type):
                    dtype = numpy_support.as_dtype(dtype)
                a = allocations[key] = checked(np.empty(shape, dtype), f"shared array (line {key[1]})")
        return a

    kernelapi.FakeCUDAShared.array = array

    # atomics operate on the raw array: concurrent atomics are not races
    for name in ("add", "sub", "and_", "or_", "xor", "max", "min", "nanmax", "nanmin", "exch",
                 "inc", "dec", "cas", "compare_and_swap"):
        fn = getattr(kernelapi.FakeCUDAAtomic, name, None)
        if fn is not None:
            def make(fn):
                def atomic(self, array, *args):
                    return fn(self, _raw(array), *args)
                return atomic
            setattr(kernelapi.FakeCUDAAtomic, name, make(fn))

    original_sync = kernel.BlockThread.syncthreads

    def syncthreads(self):
        original_sync(self)
        self._race_bar = getattr(self, "_race_bar", 0) + 1
        self._race_wbar = getattr(self, "_race_wbar", 0) + 1

    kernel.BlockThread.syncthreads = syncthreads

    original_syncwarp = getattr(kernelapi.FakeCUDAModule, "syncwarp", None)
    if original_syncwarp is not None:
        def syncwarp(self, *args, **kwargs):
            r = original_syncwarp(self, *args, **kwargs)
            t = threading.current_thread()
            t._race_wbar = getattr(t, "_race_wbar", 0) + 1
            return r

        kernelapi.FakeCUDAModule.syncwarp = syncwarp
    _installed = True
