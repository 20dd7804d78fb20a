"""doctor: what this machine has for the course, each missing piece with a fix."""
from __future__ import annotations

import importlib
import shutil
import sys


def _version(mod: str) -> str | None:
    try:
        m = importlib.import_module(mod)
    except Exception:
        return None
    return getattr(m, "__version__", "present")


def checks() -> list[tuple[str, bool, str, str]]:
    """(item, ok, what was found, how to fix) rows."""
    from . import _mode

    rows = []
    n = _mode.gpu_count()
    rows.append(("GPU", True, f"{n} CUDA device(s)" if n else "none: lessons run in the simulator, speed is not graded",
                 "No GPU: lessons run in the simulator; speed cells score 0. Use a machine with an "
                 "NVIDIA GPU and driver for speed."))
    drv = ""
    if n:
        import ctypes

        v = ctypes.c_int(0)
        ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))
        drv = f"CUDA {v.value // 1000}.{v.value % 1000 // 10}"
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
    rows.append(("simulator", _mode.SIMULATOR or n > 0,
                 "active (NUMBA_ENABLE_CUDASIM=1)" if _mode.SIMULATOR else "off: kernels run on the GPU",
                 "Set NUMBA_ENABLE_CUDASIM=1 before importing numba."))
    nvrtc = _version("cuda.core")
    rows.append(("cuda.core (NVRTC)", nvrtc is not None, nvrtc or "missing",
                 "pip install cuda-core cuda-bindings nvidia-cuda-nvrtc (compiled CUDA C++ cells)."))
    nvcc = shutil.which("nvcc")
    rows.append(("nvcc", True, nvcc or "not found (optional: NVRTC compiles cells)",
                 "Optional: install the CUDA toolkit for the nvcc fallback."))
    cutlass = _cutlass_include()
    rows.append(("CUTLASS headers", cutlass is not None, cutlass or "missing",
                 "pip install nvidia-cutlass (CuTe lessons)."))
    cuobjdump = _cuobjdump()
    rows.append(("cuobjdump", cuobjdump is not None, cuobjdump or "missing",
                 "pip install nvidia-cuda-cuobjdump (SASS checks of compiled cells)."))
    torch = _version("torch")
    rows.append(("torch", True, torch or "not installed (optional: library peers on a GPU)",
                 "Optional on a GPU: pip install torch for the torch/cuBLAS peers."))
    return rows


def _cutlass_include() -> str | None:
    try:
        import cutlass_library  # noqa: F401  (nvidia-cutlass wheel)
    except Exception:
        pass
    import importlib.util
    from pathlib import Path

    for name in ("cutlass_library", "cutlass"):
        spec = importlib.util.find_spec(name)
        if spec and spec.origin:
            for parent in Path(spec.origin).parents:
                for cand in parent.glob("**/include/cute/tensor.hpp"):
                    return str(cand.parent.parent)
                if parent.name == "site-packages":
                    break
    return None


def _cuobjdump() -> str | None:
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        for cand in Path(base).glob("**/bin/cuobjdump"):
            return str(cand)
    return shutil.which("cuobjdump")


def report() -> tuple[str, bool]:
    rows = checks()
    width = max(len(r[0]) for r in rows)
    lines = []
    for item, ok, found, fix in rows:
        lines.append(f"{'ok ' if ok else 'FIX'} {item:<{width}}  {found}")
        if not ok:
            lines.append(f"    {'':<{width}}  → {fix}")
    return "\n".join(lines), all(r[1] for r in rows)
