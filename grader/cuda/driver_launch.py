"""Launches through the CUDA driver's own calls, for what cuda.core's ``launch`` does not take.

* :func:`launch_by_value` — ``cuLaunchKernel`` with each parameter's bytes given by address:
  cuda.core takes scalars and pointers only, so a 128-byte ``__grid_constant__`` tensor map
  (grader.cuda.tma) goes this way; with a cluster, ``cuLaunchKernelEx`` and its cluster-dimension
  attribute (chapter 05's multicast GEMM).
* :func:`max_active_clusters` — ``cuOccupancyMaxActiveClusters``: how many clusters of a kernel fit
  on the GPU at once (a persistent kernel launches no more).

Called by :class:`grader.cuda.module.CudaKernel`; needs a GPU.
"""
from __future__ import annotations

import ctypes

import numpy as np


class LaunchError(RuntimeError):
    """A kernel could not be launched (bad arguments, no GPU, ...)."""

    def _render_traceback_(self):
        lines = str(self).splitlines()
        return ["LaunchError: " + lines[0]] + lines[1:]


def _is_ctypes(a) -> bool:
    return isinstance(a, (ctypes._SimpleCData, ctypes.Structure, ctypes.Union, ctypes.Array))


def _xyz(dim) -> tuple:
    return (tuple(dim) + (1, 1))[:3] if isinstance(dim, tuple) else (int(dim), 1, 1)


def launch_config(grid, block, shared: int, cluster, stream):
    """A CUlaunchConfig with one attribute: the cluster's dimensions."""
    from cuda.bindings import driver

    attr = driver.CUlaunchAttribute()
    attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = _xyz(cluster)
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = _xyz(grid)
    config.blockDimX, config.blockDimY, config.blockDimZ = _xyz(block)
    config.sharedMemBytes, config.hStream = int(shared), stream
    config.attrs, config.numAttrs = [attr], 1
    return config


def function(kernel):
    """The driver's CUfunction of a CudaKernel in the current context."""
    from cuda.bindings import driver


    handle = kernel._get().handle
    if isinstance(handle, driver.CUkernel):                  # a library kernel: its function in this context
        err, func = driver.cuKernelGetFunction(handle)
        if int(err) != 0:
            raise LaunchError(f"{kernel.name}: cuKernelGetFunction failed ({err!r})")
        return func
    return driver.CUfunction(int(handle))


def launch_by_value(kernel, kargs, key, stream) -> None:
    """Launch ``kernel`` with ``kargs`` (tensor maps, NumPy scalars, ctypes values) on ``stream``;
    ``key`` is (grid, block, shared, cluster or None)."""
    from cuda.bindings import driver


    grid, block, shared, cluster = key
    keep, ptrs = [], (ctypes.c_void_p * max(len(kargs), 1))()
    for i, a in enumerate(kargs):
        if hasattr(a, "param_address"):
            keep.append(a)
            ptrs[i] = a.param_address()
        elif isinstance(a, np.generic) or _is_ctypes(a):
            buf = ctypes.create_string_buffer(bytes(a) if _is_ctypes(a) else a.tobytes())
            keep.append(buf)
            ptrs[i] = ctypes.addressof(buf)
        else:
            raise LaunchError(f"{kernel.name}: argument {i} ({type(a).__name__}) cannot be passed beside a tensor map")
    func, hstream = function(kernel), driver.CUstream(int(stream.handle))
    if cluster is None:
        (err,) = driver.cuLaunchKernel(func, *_xyz(grid), *_xyz(block), shared, hstream, ctypes.addressof(ptrs), 0)
    else:
        config = launch_config(grid, block, shared, cluster, hstream)
        (err,) = driver.cuLaunchKernelEx(config, func, ctypes.addressof(ptrs), 0)
    if int(err) != 0:
        raise LaunchError(f"{kernel.name}: launch failed ({err!r})")


def max_active_clusters(kernel, cluster: int, block: int | None = None, shared: int | None = None) -> int:
    """How many clusters of ``cluster`` CTAs the GPU can hold at once, with the block and dynamic
    shared memory of the kernel's launch shape unless given (cuOccupancyMaxActiveClusters)."""
    from cuda.bindings import driver


    shape = kernel.launch_shape
    block = block if block is not None else shape.threads
    shared = int(shared if shared is not None else shape.smem_bytes)
    kernel._set_max_dynamic_shared(shared)
    config = launch_config(cluster, block, shared, cluster, driver.CUstream(0))
    err, n = driver.cuOccupancyMaxActiveClusters(function(kernel), config)
    if int(err) != 0:
        raise LaunchError(f"{kernel.name}: cuOccupancyMaxActiveClusters failed ({err!r})")
    return int(n)


__all__ = ["LaunchError", "launch_by_value", "max_active_clusters", "launch_config", "function"]
