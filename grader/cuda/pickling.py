"""A launch function pickled by value, for a process of its own (grader.profile's ncu runner,
grader.cuda.sanitize's): functions and closures by value (cloudpickle, else numba's copy of it), a
compiled cell as its cubin and build metadata (rebuilt without compiling), a cached tensor map as its
128 bytes. Standard library plus cloudpickle."""
from __future__ import annotations

import io

def _reducer(obj):
    from .module import CudaKernel, CudaModule

    if isinstance(obj, CudaModule):
        from .compiler import module_meta

        meta = module_meta(obj.name, obj.source, obj.arch, obj.log, obj.compiler, obj.options, obj.symbol_mapping,
                           obj.compile_seconds)
        return (_rebuild_module, (bytes(obj.cubin), meta))
    if isinstance(obj, CudaKernel):
        return (_rebuild_kernel, (obj.module, obj.name))
    from .tma import TensorMap

    if isinstance(obj, TensorMap):       # a launch function's cache of maps: stale in another process
        return (_rebuild_tensormap, (bytes(obj), obj.shape, obj.box, obj.dtype.str, obj.swizzle))
    return NotImplemented


def _rebuild_tensormap(raw, shape, box, dtype, swizzle):
    from .tma import TensorMap

    return TensorMap(raw, shape=shape, box=box, dtype=dtype, swizzle=swizzle)


def _rebuild_module(cubin, meta):
    from .compiler import load_module

    return load_module(cubin, meta)


def _rebuild_kernel(module, name):
    return module[name]


def dumps(obj) -> bytes:
    """``obj`` pickled by value (functions, closures, compiled cells), for the runner process."""
    try:
        import cloudpickle
    except ImportError:                                    # numba vendors a copy
        from numba import cloudpickle

    buf = io.BytesIO()
    p = cloudpickle.CloudPickler(buf, protocol=4)
    base = p.reducer_override

    def override(o):
        r = _reducer(o)
        return base(o) if r is NotImplemented else r
    p.reducer_override = override
    p.dump(obj)
    return buf.getvalue()


__all__ = ["dumps"]
