"""doctor: what this machine has for the course, each missing piece with a fix."""
from __future__ import annotations

import importlib
import sys


def _version(mod: str) -> str | None:
    try:
        m = importlib.import_module(mod)
    except Exception:
        return None
    return getattr(m, "__version__", "present")


def checks() -> list[tuple[str, bool, str, str]]:
    """(item, ok, what was found, how to fix) rows."""
    from . import backend as mode
    from .cuda import toolchain

    rows = []
    n = toolchain.gpu_count()
    cc = toolchain.compute_capability()
    gpu = (f"{n} CUDA device(s), compute capability {cc[0]}.{cc[1]} ({toolchain.arch_for(cc)})" if n
           else "none: lessons run in the simulator, speed is not graded")
    rows.append(("GPU", True, gpu, "No GPU: lessons run in the simulator; speed cells score 0. Use a machine "
                 "with an NVIDIA GPU and driver for speed."))
    drv = toolchain.driver_version() or ""
    rows.append(("driver", bool(drv) or n == 0, drv or "not needed without a GPU",
                 "Install an NVIDIA driver matching CUDA 12.8+ (nvidia-smi should list the GPU)."))
    rows.append(("python", sys.version_info >= (3, 10), sys.version.split()[0], "Python 3.10 or newer."))
    np_v = _version("numpy")
    np_ok = np_v is not None and tuple(int(x) for x in np_v.split(".")[:2]) < (2, 5)
    rows.append(("numpy", np_ok, np_v or "missing",
                 "pip install 'numpy<2.5' (numba-cuda still needs np.row_stack, removed in 2.5)."))
    for mod, fix in [("numba", "pip install numba"), ("numba_cuda", "pip install numba-cuda"),
                     ("nbgrader", "pip install nbgrader"), ("matplotlib", "pip install matplotlib")]:
        v = _version(mod)
        rows.append((mod, v is not None, v or "missing", fix))
    rows.append(("simulator", mode.SIMULATOR or n > 0,
                 "active (NUMBA_ENABLE_CUDASIM=1)" if mode.SIMULATOR else "off: kernels run on the GPU",
                 "Set NUMBA_ENABLE_CUDASIM=1 before importing numba."))
    nvrtc = _version("cuda.core")
    rows.append(("cuda.core (NVRTC)", nvrtc is not None, nvrtc or "missing",
                 "pip install cuda-core cuda-bindings nvidia-cuda-nvrtc (compiled CUDA C++ cells)."))
    rows.append(("compile target", True, toolchain.default_arch() + ("" if n else " (no GPU: Hopper, to inspect its SASS)"),
                 "Set GRADER_CUDA_ARCH to compile for another architecture."))
    nvcc = toolchain.tool_path("nvcc")
    rows.append(("nvcc", True, nvcc or "not found (optional: NVRTC compiles cells)",
                 "Optional: install the CUDA toolkit for the nvcc fallback."))
    cutlass = toolchain.cutlass_include_dir()
    rows.append(("CUTLASS headers", cutlass is not None, str(cutlass) if cutlass else "missing",
                 "pip install nvidia-cutlass (CuTe lessons)."))
    cuobjdump = toolchain.tool_path("cuobjdump")
    rows.append(("cuobjdump", cuobjdump is not None, cuobjdump or "missing",
                 "pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm (SASS checks of compiled cells)."))
    torch = _version("torch")
    rows.append(("torch", True, torch or "not installed (optional: library peers on a GPU)",
                 "Optional on a GPU: pip install torch for the torch/cuBLAS peers."))
    return rows


def report() -> tuple[str, bool]:
    rows = checks()
    width = max(len(r[0]) for r in rows)
    lines = []
    for item, ok, found, fix in rows:
        lines.append(f"{'ok ' if ok else 'FIX'} {item:<{width}}  {found}")
        if not ok:
            lines.append(f"    {'':<{width}}  → {fix}")
    return "\n".join(lines), all(r[1] for r in rows)
