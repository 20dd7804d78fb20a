"""A compiled cell and its kernels: inspection anywhere, launching on a GPU.

``module.NAME[grid, block](*args)``, ``module.NAME[grid, block, shared](*args)``,
``module.NAME(*args, grid=, block=, shared=0, stream=None, cluster=None)``, or — for a kernel
configured by a type (grader.cuda.launch) — ``module["gemm<V3>"].launch(grid, *args)``, which
takes the block size and dynamic shared memory from the type.

Arguments may be torch CUDA tensors, Numba device arrays / anything with
``__cuda_array_interface__``, ``cuda.core`` buffers, integer addresses, or Python / NumPy scalars
(typed from the kernel's C parameter list, else from the sizes the driver reports). Dynamic shared
memory above 48 KiB is opted into automatically. Importing this module needs neither a GPU nor torch.
"""
from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any, Sequence

from numpy import generic as _np_generic

from ..launches import note_launch
from . import toolchain
from .diagnostics import find_mangled, parse_ptxas_report
from .driver_launch import LaunchError, _is_ctypes
from .elf import Cubin
from .launch import LaunchShape, read_launch_shape
from .signature import Param, kernel_signatures


_tls = threading.local()


def current_device():
    """The cuda.core Device, made current once per thread."""
    dev = getattr(_tls, "device", None)
    if dev is None:
        from cuda.core import Device

        dev = Device()
        dev.set_current()
        _tls.device = dev
    return dev


class CudaModule:
    """A compiled cell: ``cubin`` bytes plus what is needed to inspect and launch its kernels.

    Attributes: name, arch, cubin, log (warnings and the ptxas report), compiler, from_cache,
    compile_seconds, kernel_names, resources. Kernels: ``module.NAME`` or ``module["name<expr>"]``.
    """

    def __init__(self, *, name, source, arch, cubin, log, compiler, options, symbol_mapping,
                 from_cache, compile_seconds, cache_key):
        self.name, self.source, self.arch, self.cubin, self.log = name, source, arch, cubin, log
        self.compiler, self.options = compiler, list(options)
        self.symbol_mapping = dict(symbol_mapping)
        self.from_cache, self.compile_seconds, self.cache_key = from_cache, compile_seconds, cache_key
        self.signatures = kernel_signatures(source)
        self.is_stub = _holds_stub(source)                     # decided once: launches ask it (refuse_stub)
        self.elf = Cubin(cubin)
        self.functions = self.elf.kernels()                  # symbols as in the cubin
        self._objcode = None
        self._kernels: dict[str, CudaKernel] = {}
        self._shapes: dict[str, LaunchShape | None] = {}   # name expression -> launch shape, read once

    # -- names -----------------------------------------------------------------
    @property
    def kernel_names(self) -> list[str]:
        """Names that find a kernel: plain names of ``extern "C"`` kernels, then name expressions."""
        plain = [f for f in self.functions if not f.startswith("_Z")]
        exprs = [e for e, sym in self.symbol_mapping.items() if sym in self.functions]
        return plain + [e for e in exprs if e not in plain]

    def symbol(self, name: str) -> str:
        """Cubin symbol of a kernel name, name expression or mangled name."""
        if name in self.functions:
            return name
        if name in self.symbol_mapping:
            return self.symbol_mapping[name]
        hits = find_mangled(name, self.functions)
        if len(hits) == 1:
            return hits[0]
        if hits:
            raise KeyError(f"{name!r} is ambiguous in {self.name}: {hits}; compile with kernels=[...] name expressions")
        raise KeyError(f"no kernel {name!r} in {self.name}; kernels: {', '.join(self.kernel_names) or '(none)'}")

    def __getitem__(self, name: str) -> "CudaKernel":
        sym = self.symbol(name)
        if sym not in self._kernels:
            self._kernels[sym] = CudaKernel(self, name, sym, self.signatures.get(name))
        return self._kernels[sym]

    def __getattr__(self, name: str) -> "CudaKernel":
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(str(e)) from None

    def __dir__(self):
        return sorted(set(super().__dir__()) | {n for n in self.kernel_names if n.isidentifier()})

    def __contains__(self, name: str) -> bool:
        try:
            self.symbol(name)
            return True
        except KeyError:
            return False

    def launch_shape(self, kernel_expr: str) -> LaunchShape | None:
        """What the type of ``kernel_expr`` (``"gemm<V3>"``) states about its launch (launch.py).
        Read from the cubin once per name expression: ``CudaKernel.launch`` asks on every launch, and
        reading a large cubin's symbol table (a CuTe cell's: ~2 MB) takes milliseconds of host time."""
        if kernel_expr not in self._shapes:
            self._shapes[kernel_expr] = read_launch_shape(self.elf, self.symbol_mapping, kernel_expr)
        return self._shapes[kernel_expr]

    # -- reports ---------------------------------------------------------------
    @property
    def resources(self) -> dict[str, dict[str, int]]:
        """ptxas report per kernel (keys: name expressions or plain names where known)."""
        by_symbol = {v: k for k, v in self.symbol_mapping.items()}
        return {by_symbol.get(k, k): v for k, v in parse_ptxas_report(self.log).items()}

    @property
    def warnings(self) -> list[str]:
        return [ln for ln in self.log.splitlines() if ": warning" in ln]

    def print_log(self) -> None:
        """Print the compiler's warnings and ptxas report to stdout."""
        print(self.log or "(empty log)", file=sys.stdout)

    def sass(self, kernel: str | None = None) -> str:
        """Disassembly (text) of one kernel or of the whole cubin."""
        from .sass import disassemble

        return disassemble(self, kernel)

    def summary(self) -> str:
        """One line per kernel: registers, spills, shared memory (the ptxas report)."""
        lines = []
        for kernel, r in self.resources.items():
            if kernel.startswith("&"):
                continue
            spills = r["spill_stores"] + r["spill_loads"]
            lines.append(f"  {kernel}: {r['registers']} registers, "
                         f"{'no spills' if not spills else f'{spills} B spilled'}, {r['smem']} B static shared memory")
        return "\n".join(lines)

    def save(self, path: str | os.PathLike) -> Path:
        p = Path(path)
        p.write_bytes(self.cubin)
        return p

    def _load(self):
        if self._objcode is None:
            if not toolchain.gpu_available():
                raise LaunchError("no CUDA GPU is available: this module can be inspected (SASS, resources) but not run")
            if not toolchain.runs_here(self.arch):
                raise LaunchError(f"{self.name} was compiled for {self.arch}, which this GPU "
                                  f"({toolchain.arch_for(toolchain.compute_capability())}) cannot run")
            from cuda.core import ObjectCode

            current_device()
            self._objcode = ObjectCode.from_cubin(self.cubin, name=self.name, symbol_mapping=self.symbol_mapping)
        return self._objcode

    def __repr__(self):
        src = "cache" if self.from_cache else f"{self.compile_seconds:.2f}s"
        return (f"<CudaModule {self.name!r} {self.arch} [{self.compiler}, {src}] "
                f"kernels: {', '.join(self.kernel_names) or '-'}>")


class CudaKernel:
    """One kernel of a :class:`CudaModule`."""

    def __init__(self, module: CudaModule, name: str, symbol: str, params: list[Param] | None):
        self.module, self.name, self.symbol, self.params = module, name, symbol, params
        self._kernel = None
        self._shared_set = 0
        self._arg_sizes = None
        self._converters = None     # one per C parameter, made at the first launch
        self._untyped = None        # (type, converter) per position, without a parameter list
        self._configs: dict = {}

    def __repr__(self):
        sig = ", ".join(f"{p.ctype} {p.name}".strip() for p in self.params) if self.params is not None else "..."
        return f"<CudaKernel {self.name}({sig}) in {self.module.name} [{self.module.arch}]>"

    # -- inspection --------------------------------------------------------------
    @property
    def resources(self) -> dict[str, int]:
        """ptxas report: registers, stack, spill_stores, spill_loads, smem (no GPU needed)."""
        return parse_ptxas_report(self.module.log).get(self.symbol, {})

    @property
    def launch_shape(self) -> LaunchShape | None:
        return self.module.launch_shape(self.name)

    @property
    def attributes(self) -> dict[str, int]:
        """The driver's view (needs a GPU): num_regs, shared_size_bytes, local_size_bytes, ..."""
        a = self._get().attributes
        names = ["num_regs", "shared_size_bytes", "local_size_bytes", "const_size_bytes",
                 "max_threads_per_block", "max_dynamic_shared_size_bytes", "binary_version", "ptx_version"]
        return {n: getattr(a, n) for n in names}

    def sass(self) -> str:
        return self.module.sass(self.symbol)

    # -- launching ---------------------------------------------------------------
    def _get(self):
        if self._kernel is None:
            # the lowered (mangled) symbol: cuda.core hands a name expression to the driver as str
            self._kernel = self.module._load().get_kernel(self.symbol.encode())
        return self._kernel

    def __getitem__(self, cfg):
        if not isinstance(cfg, tuple) or not 2 <= len(cfg) <= 4:
            raise LaunchError("use kernel[grid, block], kernel[grid, block, shared] or kernel[grid, block, shared, stream]")
        grid, block, *rest = cfg
        shared = rest[0] if rest else 0
        stream = rest[1] if len(rest) > 1 else None

        def launcher(*args, cluster=None):
            return self(*args, grid=grid, block=block, shared=shared, stream=stream, cluster=cluster)

        return launcher

    def launch(self, grid, *args, stream=None):
        """Launch with the block size, dynamic shared memory and cluster its type states."""
        shape = self.launch_shape
        if shape is None:
            raise LaunchError(f"{self.name} states no launch shape: configure it with a type that has THREADS "
                              "(and SMEM_BYTES), compile it as name<Cfg> in a cell that includes course.cuh")
        cluster = shape.cluster if shape.cluster > 1 else None
        return self(*args, grid=grid, block=shape.threads, shared=shape.smem_bytes, stream=stream, cluster=cluster)

    def _set_max_dynamic_shared(self, nbytes: int):
        if nbytes <= max(self._shared_set, 48 * 1024):
            return
        from cuda.bindings import driver

        handle = self._get().handle
        attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        if isinstance(handle, driver.CUkernel):
            (err,) = driver.cuKernelSetAttribute(attr, int(nbytes), handle, driver.CUdevice(current_device().device_id))
        else:
            (err,) = driver.cuFuncSetAttribute(handle, attr, int(nbytes))
        if int(err) != 0:
            raise LaunchError(f"cannot give {self.name} {nbytes} bytes of dynamic shared memory ({err!r}); "
                              f"the device allows {current_device().properties.max_shared_memory_per_block_optin}")
        self._shared_set = nbytes

    def _sizes(self) -> list[int] | None:
        if self._arg_sizes is None:
            try:
                info = self._get().arguments_info
                self._arg_sizes = [int(getattr(i, "size", i[1] if isinstance(i, tuple) else 0)) for i in info]
            except Exception:          # older cuda.core: no argument info; scalars default to 32 bits
                self._arg_sizes = []
        return self._arg_sizes or None

    def prepare_args(self, args: Sequence[Any]) -> list[Any]:
        """Python arguments -> exactly-typed kernel arguments."""
        params = self.params
        if params is not None and len(params) != len(args):
            raise LaunchError(f"{self.name} takes {len(params)} arguments "
                              f"({', '.join(p.name or p.ctype for p in params)}), got {len(args)}")
        if params is not None:
            if self._converters is None:
                self._converters = [_converter(p, f"argument {i} ({p.ctype} {p.name})") for i, p in enumerate(params)]
            return [convert(a) for convert, a in zip(self._converters, args)]
        return self._untyped_args(args)

    def _untyped_args(self, args: Sequence[Any]) -> list[Any]:
        """Arguments of a kernel whose C parameter list is unknown (a template's): typed from the
        driver's sizes, by a converter made once per position and type of argument (the judge
        times launches back to back, and a launch's host time counts against a short kernel)."""
        convs = self._untyped
        if convs is None or len(convs) != len(args):
            convs = self._untyped = [(None, None)] * len(args)
        out = []
        for i, a in enumerate(args):
            t, convert = convs[i]
            if t is not type(a):
                convert = _untyped_converter(a, self._size_of(i))
                convs[i] = (type(a), convert)
            out.append(convert(a))
        return out

    def _size_of(self, i: int) -> int | None:
        sizes = self._sizes()
        return sizes[i] if sizes and i < len(sizes) else None

    def __call__(self, *args, grid=None, block=None, shared: int = 0, stream=None, cluster=None):
        if grid is None or block is None:
            raise LaunchError(f"launch {self.name} with grid= and block= (or {self.name}[grid, block](...))")
        from cuda.core import LaunchConfig, launch

        if getattr(self.module, "is_stub", True):          # (a module without the flag: refuse_stub reads its source)
            refuse_stub(self.module)
        kernel = self._get()
        kargs = self.prepare_args(args)
        shared = int(shared or 0)
        self._set_max_dynamic_shared(shared)
        key = (_dim(grid), _dim(block), shared, None if cluster is None else _dim(cluster))
        cfg = self._configs.get(key)
        if cfg is None:
            kw = dict(grid=key[0], block=key[1], shmem_size=shared)
            if cluster is not None:
                kw["cluster"] = key[3]
            cfg = self._configs[key] = LaunchConfig(**kw)
        note_launch()
        if any(not isinstance(a, _np_generic) and hasattr(a, "param_address") for a in kargs):   # a tensor map, by value
            return self._launch_by_value(kargs, key, _stream_for(stream, args))
        launch(_stream_for(stream, args), cfg, kernel, *kargs)

    def _launch_by_value(self, kargs, key, stream):
        """Parameters by address through the driver (a tensor map by value; clusters): driver_launch."""
        from .driver_launch import launch_by_value

        launch_by_value(self, kargs, key, stream)

    def max_active_clusters(self, cluster: int, block: int | None = None, shared: int | None = None) -> int:
        """How many clusters of ``cluster`` CTAs the GPU holds at once (driver_launch.max_active_clusters)."""
        from .driver_launch import max_active_clusters

        return max_active_clusters(self, cluster, block, shared)


from ..errors import NotWrittenYet  # noqa: E402


class StubLaunch(NotWrittenYet):
    """A kernel of a cell that still holds the exercise's stub was launched: it is refused, never run
    (a half-written kernel can hang or take the GPU's context down for every later cell)."""


def _holds_stub(source: str | None) -> bool:
    from .sass import STUB

    return STUB in (source or "")


def refuse_stub(module) -> None:
    from .sass import STUB

    stub = module.is_stub if hasattr(module, "is_stub") else _holds_stub(getattr(module, "source", ""))
    if stub:
        raise StubLaunch(f"the cell `%%cuda {module.name}` still holds `{STUB}`: write the kernel's missing part "
                         "there and run the cell again (its kernels are not launched until then).")


def _converter(p: Param, label: str):
    """The function that turns one Python argument into parameter ``p``'s exact type. Built once
    per kernel: a launch converts every argument, and its host time counts against a short kernel
    (the judge times launches back to back)."""
    import numpy as np

    if p.kind == "pointer":
        def pointer(a, _u64=np.uint64):
            if type(a).__name__ == "Tensor" and a.is_cuda:           # torch, the common case
                return _u64(a.data_ptr())
            ptr = device_pointer(a)
            if ptr is None:
                raise LaunchError(f"{label}: expected a device array/tensor or an address, got {type(a).__name__}")
            return _u64(ptr)
        return pointer
    if p.kind == "scalar":
        dt = np.dtype(p.dtype)
        make, integral = dt.type, dt.kind in "iub"

        def scalar(a):
            t = type(a)
            if t is int or (t is float and not integral):
                return make(a)
            if isinstance(a, np.generic) and a.dtype == dt:
                return a
            if integral and isinstance(a, float) and not float(a).is_integer():
                raise LaunchError(f"{label}: expected an integer, got {a!r}")
            if device_pointer(a) is not None and not isinstance(a, (int, float, np.generic)):
                raise LaunchError(f"{label}: expected a {p.ctype}, got a {type(a).__name__}")
            return make(a)
        return scalar

    def other(a):
        if isinstance(a, np.generic) or _is_ctypes(a):
            return a
        ptr = device_pointer(a)
        if ptr is not None and not isinstance(a, (int, bool, float)):
            return np.uint64(ptr)
        if isinstance(a, bool):
            return np.bool_(a)
        if isinstance(a, int):
            return np.int32(a)
        if isinstance(a, float):
            return np.float32(a)
        return a                   # let cuda.core decide (e.g. a TensorMapDescriptor)
    return other


def _untyped_converter(a, size: int | None):
    """The function that types arguments like ``a`` for a parameter of ``size`` bytes (None: unknown)."""
    import numpy as np

    if isinstance(a, np.generic) or _is_ctypes(a):
        return _same
    if type(a).__name__ == "Tensor" and type(a).__module__.startswith("torch"):   # torch, the common case
        def tensor(x, _u64=np.uint64):
            return _u64(x.data_ptr()) if x.is_cuda else _u64(device_pointer(x))   # (a CPU tensor: the error)
        return tensor
    if isinstance(a, bool):
        return np.bool_
    if isinstance(a, int):
        return np.int64 if size == 8 else np.int32
    if isinstance(a, float):
        return np.float64 if size == 8 else np.float32
    if device_pointer(a) is not None:
        return lambda x, _u64=np.uint64: _u64(device_pointer(x))
    return _same                   # let cuda.core decide (e.g. a TensorMapDescriptor)


def _same(a):
    return a


def _dim(d):
    return tuple(int(x) for x in d) if isinstance(d, (list, tuple)) else int(d)


def device_pointer(a) -> int | None:
    """Device address of a tensor / array / buffer, or an int taken as an address."""
    if a is None:
        return 0
    if hasattr(a, "data_ptr") and callable(a.data_ptr):          # torch
        if getattr(a, "is_cuda", True) is False:
            raise LaunchError("a torch tensor on the CPU was passed to a GPU kernel; use .cuda()")
        return int(a.data_ptr())
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0])
    h = getattr(a, "handle", None)                                # cuda.core Buffer
    if h is not None and type(a).__name__ == "Buffer":
        return int(h)
    if isinstance(a, int) and not isinstance(a, bool):
        return a
    return None


def _stream_for(stream, args):
    """A cuda.core Stream: the one given; torch's current stream when torch tensors are passed;
    else the device's default stream. Stream objects are kept per handle (a launch asks every time)."""
    dev = current_device()
    from cuda.core import Stream

    if stream is None:
        for a in args:
            if type(a).__module__.startswith("torch") and hasattr(a, "data_ptr"):
                stream = _torch_stream_handle(a)
                break
    if stream is None:
        return _stream_from_handle(dev, 0)
    if isinstance(stream, Stream):
        return stream
    if isinstance(stream, int):
        return _stream_from_handle(dev, stream)
    handle = getattr(stream, "cuda_stream", None)                 # torch.cuda.Stream
    if handle is not None:
        return _stream_from_handle(dev, int(handle))
    return stream                                                 # objects with __cuda_stream__


def _torch_stream_handle(tensor) -> int:
    """The raw handle of torch's current stream on the tensor's device."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)     # skips building a Stream object
    if raw is not None and tensor.is_cuda:
        return int(raw(tensor.get_device()))
    return int(torch.cuda.current_stream().cuda_stream)


def _stream_from_handle(dev, handle: int):
    streams = getattr(_tls, "streams", None)
    if streams is None:
        streams = _tls.streams = {}
    s = streams.get(handle)
    if s is None:
        from cuda.core import Stream

        s = streams[handle] = dev.default_stream if handle == 0 else Stream.from_handle(handle)
    return s
