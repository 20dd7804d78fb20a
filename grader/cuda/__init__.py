"""Compiled CUDA C++ / CuTe: the toolchain, compiling, launching, machine code, the %%cuda magic.

    toolchain    is there a GPU, which architecture to build for, where nvcc/NVRTC/cuobjdump/
                 nvdisasm/ptxas and the CUTLASS headers are (the only module that asks)
    compiler     source -> cubin (NVRTC, or nvcc), cached; CompileError against the cell's lines
    diagnostics  compiler logs, the ptxas resource report, mangled names
    elf          a minimal cubin reader (kernels, a variable's initial bytes)
    launch       the launch contract: a kernel's configuration is written once, in its C++ type
    signature    kernel parameter lists, for typing scalar arguments
    module       CudaModule / CudaKernel: inspect anywhere, launch on a GPU
    sass         disassembly and structural rubrics (HMMA, LDSM, HGMMA, …), no GPU needed
    numba_sass   the same for @cuda.jit kernels
    magic        %%cuda NAME cells (and %%nvcc NAME)
    host         host libraries: host + device code built by nvcc into a .so (CUTLASS's device layer)
    driver_launch  launches through the driver: tensor maps by value, clusters, cluster occupancy
    sanitizer    sanitize(): one launch under compute-sanitizer (racecheck, synccheck, memcheck), its findings
    ptx, replay  one block of a compiled cell replayed on the CPU from its PTX (TMA, mbarriers, wgmma)
    wgmma_replay, tma_replay   the replay's checks of wgmma descriptors and TMA boxes (chapter 05)

Learners write a cell::

    %%cuda vadd
    extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {...}

and get a :class:`CudaModule` named ``vadd``: ``vadd.add[blocks, threads](a, b, c, n)``.
Importing this package needs neither a GPU nor torch.
"""
from .compiler import STATS, CompileError, cache_dir, compile_cuda
from .launch import LaunchShape
from .magic import load_ipython_extension, register_magic
from .module import CudaKernel, CudaModule, LaunchError
from .numba_sass import numba_sass
from .sanitizer import sanitize
from .toolchain import DEFAULT_ARCH, default_arch, gpu_available, include_dirs

__all__ = ["STATS", "CompileError", "LaunchError", "CudaModule", "CudaKernel", "LaunchShape", "compile_cuda",
           "cache_dir", "default_arch", "gpu_available", "include_dirs", "register_magic",
           "load_ipython_extension", "numba_sass", "DEFAULT_ARCH", "sanitize"]
