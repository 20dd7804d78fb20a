"""Record and draw which simulated thread touched which array element.

For small launches (a few thousand threads at most), :func:`trace` runs a
``@cuda.jit`` kernel under Numba's CUDA simulator and records every element
access made through the kernel's array arguments ("global" memory) and
through ``cuda.shared.array`` ("shared" memory)::

    t = trace(vector_add, 1, 16, a, b, out)
    t.thread_counts()[(0, 0, 0), (3, 0, 0)]   # Counts(global_reads=2, ...)
    t.writers("out")                          # {(3,): [((0,0,0), (3,0,0))], ...}
    t.written_by_many(), t.never_written("out"), t.out_of_bounds
    t.plot_writes("out"); t.plot_counts()     # matplotlib Figures

The kernel itself is not changed: its array arguments are handed to it as
recording versions of the simulator's own in-kernel array objects, and the
simulator's shared-array factory and atomics are wrapped while it runs.
Arrays are named after the kernel's parameters; shared arrays after the
variable they are assigned to (``tile = cuda.shared.array(...)`` is "tile").

Indices are recorded after Numba's wrap-around of negative indices (``a[-1]``
is the last element on the GPU too).  An index outside the array is
recorded in ``Trace.out_of_bounds``; by default the kernel then goes on (a
read returns 0, a write is dropped) so the picture shows every access, and
``out_of_bounds="raise"`` stops it with an IndexError instead.  Writes of
the same element by several threads are a race hint, not a proof: they may
be ordered by ``syncthreads`` (common for shared memory).  Accesses made by
``cuda.atomic`` functions are counted as atomics and never flagged.
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
import re
import sys
import threading
from collections import Counter, namedtuple

import numpy as np

__all__ = ["trace", "Trace", "Access", "Counts", "ArrayInfo"]

#: One element access. block and thread are (x, y, z); index is a tuple of
#: ints (for an out-of-bounds access, the index as the kernel wrote it);
#: kind is "read", "write" or "atomic"; space is "global" or "shared".
Access = namedtuple("Access", "block thread array space index kind")

#: Per-thread access counts.
Counts = namedtuple(
    "Counts", "global_reads global_writes shared_reads shared_writes atomics"
)

#: An array the trace saw: its name, space ("global"/"shared"), shape, dtype.
ArrayInfo = namedtuple("ArrayInfo", "name space shape dtype")

_SHARED_NAME = re.compile(r"(\w+)\s*(?::[^=]*)?=\s*[\w.]*shared\.array\s*\(")
_OUT_OF_BOUNDS = object()


# --------------------------------------------------------------------------
# Recording


class _Recorder:
    def __init__(self, out_of_bounds):
        self.accesses = []
        self.out_of_bounds = []
        self.arrays = {}
        self.mode = out_of_bounds
        self.local = threading.local()  # .atomic while a cuda.atomic call runs

    def add_array(self, name, space, data):
        base, k = name, 2
        while name in self.arrays and self.arrays[name].space != space:
            name, k = f"{base}_{k}", k + 1
        self.arrays.setdefault(name, ArrayInfo(name, space, data.shape, data.dtype))
        return name

    def record(self, name, space, index, kind):
        thread = threading.current_thread()
        block = tuple(thread.blockIdx)
        tid = tuple(thread.threadIdx)
        atomic = getattr(self.local, "atomic", None)
        if atomic is not None:
            if atomic["recorded"]:
                return  # one access per atomic call, however it indexes
            atomic["recorded"] = True
            kind = "atomic"
        self.accesses.append(Access(block, tid, name, space, index, kind))

    def record_out_of_bounds(self, name, space, index, kind, shape):
        thread = threading.current_thread()
        access = Access(tuple(thread.blockIdx), tuple(thread.threadIdx), name,
                        space, index, kind)
        self.out_of_bounds.append(access)
        if self.mode == "raise":
            raise IndexError(
                f"{kind} of {name}[{', '.join(map(str, index))}] is out of bounds "
                f"for shape {tuple(shape)} (thread {access.thread}, block {access.block})"
            )


def _as_index_tuple(idx):
    return tuple(int(i) for i in idx) if isinstance(idx, tuple) else (int(idx),)


def _make_traced_class():
    from numba.cuda.simulator.cudadrv.devicearray import (
        FakeCUDAArray,
        FakeWithinKernelCUDAArray,
    )

    class TracedArray(FakeWithinKernelCUDAArray):
        """The simulator's in-kernel array, recording each element access."""

        def __init__(self, fake, positions, name, space, recorder):
            super().__init__(fake)
            # plain attribute writes would be forwarded to the array itself
            self.__dict__.update(
                _positions=positions, _name=name, _space=space, _recorder=recorder
            )

        def _locate(self, idx, kind):
            """Index tuple(s) in the traced array, a view, or _OUT_OF_BOUNDS."""
            try:
                where = self._positions[idx]
            except IndexError:
                self._recorder.record_out_of_bounds(
                    self._name, self._space, _as_index_tuple(idx), kind,
                    self._positions.shape[:-1],
                )
                return _OUT_OF_BOUNDS
            return where

        def __getitem__(self, idx):
            if isinstance(idx, str):  # record field
                return super().__getitem__(idx)
            where = self._locate(idx, "read")
            if where is _OUT_OF_BOUNDS:
                return self._item._ary.dtype.type(0)
            value = self._item[idx]
            if isinstance(value, FakeCUDAArray):  # a slice: no access yet
                return TracedArray(value, where, self._name, self._space, self._recorder)
            self._recorder.record(self._name, self._space, tuple(where.tolist()), "read")
            return value

        def __setitem__(self, idx, value):
            if isinstance(idx, str):
                return super().__setitem__(idx, value)
            where = self._locate(idx, "write")
            if where is _OUT_OF_BOUNDS:
                return None
            for position in where.reshape(-1, where.shape[-1]):
                self._recorder.record(self._name, self._space, tuple(position.tolist()), "write")
            self._item[idx] = value
            return None

    def wrap(data, name, space, recorder):
        """TracedArray over data (ndarray or FakeCUDAArray)."""
        fake = data if isinstance(data, FakeCUDAArray) else FakeCUDAArray(data)
        shape = fake._ary.shape
        # positions[idx] is the index tuple of the element(s) idx selects
        positions = np.indices(shape).reshape(len(shape), -1).T.reshape(shape + (len(shape),))
        return TracedArray(fake, positions, name, space, recorder)

    return FakeCUDAArray, wrap


def _shared_name(frame):
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    match = _SHARED_NAME.search(line)
    return match.group(1) if match else f"shared_line{frame.f_lineno}"


@contextlib.contextmanager
def _recording_simulator(recorder, wrap):
    """Wrap the shared-array factory and the atomics while a launch runs."""
    from numba.cuda.simulator import kernelapi

    shared_cls = kernelapi.FakeCUDAShared
    atomic_cls = kernelapi.FakeCUDAAtomic
    original_array = shared_cls.array
    wrapped_cache = {}

    def shared_array(self, shape, dtype, alignment=None):
        data = original_array(self, shape, dtype, alignment)
        key = id(data)
        if key not in wrapped_cache:
            name = recorder.add_array(_shared_name(sys._getframe(1)), "shared", data)
            wrapped_cache[key] = (data, wrap(data, name, "shared", recorder))
        return wrapped_cache[key][1]

    def atomic(method):
        def run_atomically(self, *args):
            recorder.local.atomic = {"recorded": False}
            try:
                return method(self, *args)
            finally:
                recorder.local.atomic = None

        return run_atomically

    originals = {
        name: getattr(atomic_cls, name)
        for name in dir(atomic_cls)
        if not name.startswith("_") and callable(getattr(atomic_cls, name))
    }
    shared_cls.array = shared_array
    for name, method in originals.items():
        setattr(atomic_cls, name, atomic(method))
    try:
        yield
    finally:
        shared_cls.array = original_array
        for name, method in originals.items():
            setattr(atomic_cls, name, method)


def trace(kernel, griddim, blockdim, *args, out_of_bounds="record"):
    """Run kernel[griddim, blockdim](*args) in the simulator, recording accesses.

    NumPy arguments are written in place (as a simulated launch would copy
    them back).  Needs ``NUMBA_ENABLE_CUDASIM=1`` set before numba was
    imported.  out_of_bounds: "record" (default; the kernel goes on) or
    "raise".  Returns a :class:`Trace`.
    """
    from . import warp as sim_warp

    if not sim_warp._simulator_enabled():
        raise RuntimeError(
            "trace() needs Numba's CUDA simulator: set NUMBA_ENABLE_CUDASIM=1 "
            "before numba is imported"
        )
    if out_of_bounds not in ("record", "raise"):
        raise ValueError('out_of_bounds must be "record" or "raise"')
    py_func = getattr(kernel, "py_func", None)
    if py_func is None:
        raise TypeError("trace() expects a @cuda.jit kernel")
    sim_warp.install()

    fake_array_cls, wrap = _make_traced_class()
    recorder = _Recorder(out_of_bounds)
    names = list(inspect.signature(py_func).parameters)
    names += [f"arg{i}" for i in range(len(names), len(args))]
    launch_args = []
    for name, arg in zip(names, args):
        if (isinstance(arg, np.ndarray) and arg.ndim > 0) or isinstance(arg, fake_array_cls):
            name = recorder.add_array(name, "global", arg)
            launch_args.append(wrap(arg, name, "global", recorder))
        else:
            launch_args.append(arg)

    grid = _dim3(griddim)
    block = _dim3(blockdim)
    with _recording_simulator(recorder, wrap):
        kernel[grid, block](*launch_args)
    return Trace(grid, block, recorder.arrays, recorder.accesses, recorder.out_of_bounds)


def _dim3(dim):
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


# --------------------------------------------------------------------------
# The result


class Trace:
    """Accesses recorded by :func:`trace`, with summaries and plots.

    Threads are named by ``(block, thread)`` pairs of (x, y, z) tuples; their
    global id (``global_thread_id``) numbers them in launch order: block
    linear id * threads per block + thread linear id.
    """

    COUNT_FIELDS = Counts._fields

    def __init__(self, griddim, blockdim, arrays, accesses, out_of_bounds):
        self.griddim = griddim
        self.blockdim = blockdim
        self.arrays = dict(arrays)
        self.accesses = list(accesses)
        self.out_of_bounds = list(out_of_bounds)

    # ---------------------------------------------------------------- ids

    @staticmethod
    def dim3(dim):
        return _dim3(dim)

    @staticmethod
    def _linear(point, dims):
        return point[0] + dims[0] * (point[1] + dims[1] * point[2])

    def global_thread_id(self, block, thread):
        """Launch-order number of a thread: block linear id * block size + thread linear id."""
        per_block = int(np.prod(self.blockdim))
        return self._linear(block, self.griddim) * per_block + self._linear(thread, self.blockdim)

    def thread_ids(self):
        """Every launched (block, thread), in global id order."""
        blocks = [(x, y, z) for z in range(self.griddim[2]) for y in range(self.griddim[1])
                  for x in range(self.griddim[0])]
        threads = [(x, y, z) for z in range(self.blockdim[2]) for y in range(self.blockdim[1])
                   for x in range(self.blockdim[0])]
        return [(b, t) for b in blocks for t in threads]

    # ------------------------------------------------------------- counts

    def thread_counts(self):
        """{(block, thread): Counts} for every launched thread (zeros included).

        Out-of-bounds accesses are not counted here: see ``out_of_bounds``.
        """
        tally = {key: Counter() for key in self.thread_ids()}
        for a in self.accesses:
            field = "atomics" if a.kind == "atomic" else f"{a.space}_{a.kind}s"
            tally[a.block, a.thread][field] += 1
        return {key: Counts(*(c[f] for f in Counts._fields)) for key, c in tally.items()}

    def counts_table(self):
        """int array (threads in global id order) x (the fields of Counts)."""
        counts = self.thread_counts()
        return np.array([counts[key] for key in self.thread_ids()], dtype=np.int64).reshape(-1, len(Counts._fields))

    # ----------------------------------------------------------- elements

    def _touchers(self, name, kinds):
        if name not in self.arrays:
            raise KeyError(f"no array {name!r}; traced arrays: {sorted(self.arrays)}")
        shared = self.arrays[name].space == "shared"
        found = {}
        for a in self.accesses:
            if a.array == name and a.kind in kinds:
                key = (a.block, a.index) if shared else a.index
                who = found.setdefault(key, [])
                if (a.block, a.thread) not in who:
                    who.append((a.block, a.thread))
        return found

    def writers(self, name, include_atomics=False):
        """{index: [(block, thread), ...]} of the threads that wrote each element.

        For shared arrays (one copy per block) the key is (block, index).
        """
        return self._touchers(name, ("write", "atomic") if include_atomics else ("write",))

    def readers(self, name):
        """{index: [(block, thread), ...]} of the threads that read each element."""
        return self._touchers(name, ("read",))

    def written_by_many(self, name=None):
        """[(array, index, threads)] for elements written by more than one thread.

        A race hint: fine if syncthreads orders the writes, a bug otherwise.
        """
        names = [name] if name else sorted(self.arrays)
        return [(n, index, who) for n in names
                for index, who in sorted(self.writers(n).items()) if len(who) > 1]

    def never_written(self, name):
        """Sorted index tuples of a global array's elements no thread wrote."""
        info = self.arrays[name]
        if info.space == "shared":
            raise ValueError("never_written() is for global arrays; shared arrays have one copy per block")
        written = self.writers(name, include_atomics=True)
        return [idx for idx in np.ndindex(*info.shape) if idx not in written]

    def summary(self):
        """A few lines of text: arrays, totals, race hints, out-of-bounds accesses."""
        lines = [f"grid {self.griddim}, block {self.blockdim}, {len(self.accesses)} accesses"]
        for info in self.arrays.values():
            kinds = Counter(a.kind for a in self.accesses if a.array == info.name)
            lines.append(f"  {info.space} {info.name}{list(info.shape)}: {kinds['read']} reads, "
                         f"{kinds['write']} writes, {kinds['atomic']} atomics")
        many = self.written_by_many()
        if many:
            lines.append(f"  {len(many)} element(s) written by more than one thread, e.g. "
                         f"{many[0][0]}{list(many[0][1])} by {len(many[0][2])} threads")
        for a in self.out_of_bounds[:5]:
            lines.append(f"  OUT OF BOUNDS: {a.kind} {a.array}{list(a.index)} by thread "
                         f"{a.thread} of block {a.block}")
        if len(self.out_of_bounds) > 5:
            lines.append(f"  ... {len(self.out_of_bounds) - 5} more out-of-bounds accesses")
        return "\n".join(lines)

    def __repr__(self):
        return f"<Trace {self.summary()}>"

    # ------------------------------------------------------------- plots (grader.sim.trace_plot)

    def plot_writes(self, name, color_by="thread", block=(0, 0, 0), ax=None, annotate=None):
        """Grid of an array's elements coloured by the thread (or block) that wrote it (a Figure)."""
        from .trace_plot import plot_writes

        return plot_writes(self, name, color_by=color_by, block=block, ax=ax, annotate=annotate)

    def plot_counts(self, ax=None):
        """Accesses per thread, by kind and memory space (a Figure)."""
        from .trace_plot import plot_counts

        return plot_counts(self, ax=ax)
