"""Replaying a lesson's launch on the CPU: its launch function, called with stand-ins, then one or
two blocks of its kernel through :mod:`grader.cuda.ptx`.

The lesson's own launch function decides the grid, the tensor maps (their boxes and swizzles) and
the kernel's arguments, exactly as on a GPU; here :func:`record_launch` calls it with
:class:`FakeTensor` arguments and a stand-in for the kernel, while the tensor-map encoders return
:class:`~grader.cuda.ptx.MapSpec` descriptions instead of driver calls. :func:`replay` then runs the
recorded launch's blocks. Nothing here needs a GPU, torch or the CUDA driver; NVRTC makes the PTX.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from .ptx import Block, Deadlock, MapSpec, Program, ReplayError, kernel_ptx

_DTYPES = {"bf16": ("torch.bfloat16", 2), "f16": ("torch.float16", 2), "f32": ("torch.float32", 4),
           "e4m3": ("torch.float8_e4m3fn", 1), "u8": ("torch.uint8", 1), "i16": ("torch.int16", 2),
           "i32": ("torch.int32", 4)}


class _Device:
    index = 0
    type = "cuda"


class FakeTensor:
    """What a launch function reads of a torch tensor (shape, strides, dtype, data_ptr), nothing more.
    ``name`` is what the replay calls the tensor's elements (:class:`~grader.cuda.ptx.Elem`)."""
    _next = 0x10_0000_0000

    def __init__(self, name: str, shape: tuple, dtype: str = "bf16"):
        self.name, self.shape = name, tuple(int(s) for s in shape)
        self._torch_dtype, self._itemsize = _DTYPES[dtype]
        self.kind = dtype
        FakeTensor._next += 1 << 32
        self._ptr = FakeTensor._next
        self.device = _Device()
        self.is_cuda = True

    @property
    def dtype(self):
        return self._torch_dtype

    def data_ptr(self):
        return self._ptr

    def stride(self):
        out, acc = [], 1
        for s in reversed(self.shape):
            out.append(acc)
            acc *= s
        return tuple(reversed(out))

    def element_size(self):
        return self._itemsize

    def numel(self):
        return int(np.prod(self.shape))

    def dim(self):
        return len(self.shape)

    def is_contiguous(self):
        return True

    def get_device(self):
        return 0

    def size(self, i=None):
        return self.shape if i is None else self.shape[i]

    def __repr__(self):
        return f"<{self.name} {self.shape} {self.kind}>"


@dataclass
class Launch:
    """One recorded launch: the kernel's name, grid, block, dynamic shared memory and arguments
    (ints, floats, :class:`MapSpec`, or the name of a pointer argument's tensor)."""
    kernel: object
    grid: tuple
    block: int
    smem: int
    args: list


class _KernelStandIn:
    def __init__(self, kernel, record: list):
        self._k, self._record = kernel, record
        self.name, self.module = kernel.name, kernel.module
        self.launch_shape = kernel.launch_shape

    def launch(self, grid, *args, stream=None):
        shape = self.launch_shape
        self._record.append(Launch(self._k, tuple(grid) + (1,) * (3 - len(tuple(grid))), shape.threads,
                                   shape.smem_bytes, [_arg(a) for a in args]))

    def __call__(self, *args, grid=None, block=None, shared=0, stream=None, cluster=None):
        g = grid if isinstance(grid, tuple) else (grid,)
        b = block[0] if isinstance(block, tuple) else block
        self._record.append(Launch(self._k, tuple(g) + (1,) * (3 - len(g)), int(b), int(shared or 0),
                                   [_arg(a) for a in args]))

    def max_active_clusters(self, cluster, block=None, shared=None):
        return 1

    def __getattr__(self, name):
        return getattr(self._k, name)


def _arg(a):
    if isinstance(a, MapSpec):
        return a
    if isinstance(a, FakeTensor):
        return a.name
    if isinstance(a, (np.floating, float)):
        return float(a)
    if isinstance(a, (np.integer, int, bool, np.bool_)):
        return int(a)
    raise ReplayError(f"a kernel argument the replay cannot stand in for: {type(a).__name__}")


def _itemsize(x) -> int:
    return x.element_size() if hasattr(x, "element_size") else np.dtype(x.dtype).itemsize


@contextlib.contextmanager
def _stand_ins():
    """The tensor-map encoders and the stream lookup, replaced while a launch function is made and
    called: maps become :class:`MapSpec`, streams 0."""
    from . import module as _module
    from . import tma as _tma

    def tiled_2d(tensor, box, swizzle="128B", cols=None):
        rows, c = tensor.shape
        if cols is not None:
            c = cols
        return MapSpec(tensor.name, (rows, c), tuple(box), _itemsize(tensor), swizzle)

    def tiled_rows_3d(tensor, box, swizzle="128B"):
        shape = tensor.shape
        heads = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
        return MapSpec(tensor.name, (heads, shape[-2], shape[-1]), tuple(box), _itemsize(tensor), swizzle)

    saved = (_tma.tiled_2d, _tma.tiled_rows_3d, _module._torch_stream_handle, _module.current_device)
    _tma.tiled_2d, _tma.tiled_rows_3d = tiled_2d, tiled_rows_3d
    _module._torch_stream_handle = lambda t: 0
    _module.current_device = lambda: None
    try:
        yield
    finally:
        _tma.tiled_2d, _tma.tiled_rows_3d, _module._torch_stream_handle, _module.current_device = saved


def record_launch(make_launch, kernels, *args) -> list[Launch]:
    """The launches ``make_launch(*stand-ins for kernels)(*args)`` makes, recorded, none run.
    ``args``: :class:`FakeTensor` and plain values, as the launch function takes them."""
    record: list = []
    ks = kernels if isinstance(kernels, (list, tuple)) else [kernels]
    with _stand_ins():
        launch = make_launch(*[_KernelStandIn(k, record) for k in ks])
        launch(*args)
    return record


def refuse_stub(module):
    from .sass import STUB

    if STUB in (getattr(module, "source", "") or ""):
        from .module import StubLaunch

        raise StubLaunch(f"the cell `%%cuda {module.name}` still holds `{STUB}`: write the kernel's missing part "
                         "there and run the cell again (the replay runs your kernel's code).")


def run(launch: Launch, block_idx=(0, 0, 0), threads=None, max_steps: int = 20_000_000, fill: dict | None = None) -> Block:
    """Replay block ``block_idx`` of a recorded launch; the :class:`~grader.cuda.ptx.Block` after it ran
    (a hang raises :class:`~grader.cuda.ptx.Deadlock`). ``fill``: {pointer argument: FakeTensor}
    whose elements are tagged before the block runs (inputs read with plain loads)."""
    k = launch.kernel
    refuse_stub(k.module)
    text, symbol = kernel_ptx(k.module, k.name)
    prog = _program(text)
    b = Block(prog, symbol, launch.args, block=launch.block, block_idx=block_idx, grid=launch.grid,
              dynamic_smem=launch.smem, max_steps=max_steps, threads=threads)
    for name, t in (fill or {}).items():
        b.fill(name, t.shape, t.element_size())
    return b.run()


_PROGRAMS: dict = {}


def _program(text: str) -> Program:
    key = hash(text)
    p = _PROGRAMS.get(key)
    if p is None:
        if len(_PROGRAMS) > 16:
            _PROGRAMS.clear()
        p = _PROGRAMS[key] = Program(text)
    return p


__all__ = ["FakeTensor", "Launch", "record_launch", "run", "Deadlock", "ReplayError"]
