"""doctor: what this machine has for the course, each missing piece with a fix.

Each row is (item, ok, what was found, how to fix): ok is True, False (``FIX``: something the course
needs is missing) or None (``note``: it works, with something to know, e.g. no sandbox or root)."""
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
    rows.append(driver_row(n, toolchain.driver_version(), wheels_cuda_major()))
    rows.append(("python", sys.version_info >= (3, 10), sys.version.split()[0], "Python 3.10 or newer."))
    np_v = _version("numpy")
    np_ok = np_v is not None and tuple(int(x) for x in np_v.split(".")[:2]) < (2, 5)
    rows.append(("numpy", np_ok, np_v or "missing",
                 "pip install 'numpy<2.5' (numba-cuda still needs np.row_stack, removed in 2.5)."))
    for mod, fix in [("numba", "pip install numba"), ("numba_cuda", "pip install numba-cuda"),
                     ("nbgrader", "pip install nbgrader"), ("matplotlib", "pip install matplotlib"),
                     ("jupyterlab", "pip install jupyterlab (the lab: ./course.sh, python -m grader.lab)")]:
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
    rows.append(sandbox_row())
    rows.append(user_row())
    return rows


#: The oldest Linux driver each CUDA major version's wheels run on (NVIDIA's CUDA Compatibility guide,
#: "Minor Version Compatibility": CUDA 12.x needs >= 525, CUDA 13.x >= 580).
MIN_DRIVER = {12: 525, 13: 580}


def wheels_cuda_major() -> tuple[int | None, str]:
    """(the CUDA major version the installed CUDA wheels need, which wheels say so): the highest of
    cuda-bindings' and NVRTC's (nvidia-cuda-nvrtc is CUDA 13's, nvidia-cuda-nvrtc-cu12 CUDA 12's)."""
    from importlib import metadata

    found, majors = [], []
    for dist in ("cuda-bindings", "nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu12"):
        try:
            v = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
        try:
            majors.append(12 if dist.endswith("-cu12") else int(v.split(".")[0]))
        except ValueError:
            continue
        found.append(f"{dist} {v}")
    return (max(majors) if majors else None), ", ".join(found)


def driver_row(n_gpus: int, driver: str | None, wheels: tuple[int | None, str]) -> tuple:
    """The driver against the CUDA wheels: a driver runs code of its own CUDA major version and older."""
    need, which = wheels
    if n_gpus == 0:
        return ("driver", True, "not needed without a GPU", "")
    if not driver:
        return ("driver", False, "no CUDA driver answers", "Install the NVIDIA driver (nvidia-smi should list the GPU).")
    try:
        major = int(driver.split()[-1].split(".")[0])            # "CUDA 13.0" -> 13
    except ValueError:
        return ("driver", True, driver, "")
    if need is None or major >= need:
        return ("driver", True, f"{driver}" + (f"; the CUDA wheels are CUDA {need} ({which})" if need else ""), "")
    return ("driver", False, f"{driver}, older than the CUDA {need} wheels installed ({which})",
            f"The CUDA {need} wheels need a driver for CUDA {need}.0 or newer (Linux driver {MIN_DRIVER.get(need, '?')} "
            f"or newer): update the NVIDIA driver. Compiled cells fail to load until then; Numba lessons may still run.")


def sandbox_row() -> tuple:
    """bubblewrap: `grade` and `autograde` run each notebook's code in it (grader.judge.sandbox)."""
    from .judge.sandbox import Bwrap

    why = Bwrap().available()
    if why is None:
        return ("sandbox (bubblewrap)", True, "works: grade and autograde run each notebook in its own sandbox", "")
    if "not installed" in why:
        found = "not installed: `grade` runs your notebook's code without a sandbox (fine for your own work)"
        fix = ("Debian/Ubuntu: apt-get install bubblewrap. Needed by an instructor grading a class "
               "(autograde); a learner can do without it.")
    else:
        found = "installed, but it cannot create namespaces here: `grade` runs your code without a sandbox"
        fix = ("A container without user namespaces, or a kernel that restricts them (Ubuntu 24.04's AppArmor "
               "setting): grade a class where `bwrap --unshare-all --ro-bind / / true` succeeds. "
               f"bubblewrap said: {why.split(': ', 1)[-1]}")
    return ("sandbox (bubblewrap)", None, found, fix)


def user_row() -> tuple:
    """Root: Jupyter needs --allow-root (the lab adds it); unsandboxed grading runs code as root."""
    import os

    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return ("user", True, "not root", "")
    return ("user", None, "root (a container, a cloud VM?)",
            "Fine: ./course.sh and python -m grader.lab start Jupyter with --allow-root themselves. The bubblewrap "
            "sandbox runs notebooks as an unprivileged user; without it (--sandbox none) a notebook's code runs "
            "as root, so grade only your own notebooks that way.")


def report() -> tuple[str, bool]:
    """The table (``ok``, ``FIX`` with its fix beneath, or ``note``: works, with something to know) and
    whether nothing needs fixing."""
    rows = checks()
    width = max(len(r[0]) for r in rows)
    lines = []
    for item, ok, found, fix in rows:
        lines.append(f"{'ok  ' if ok else 'note' if ok is None else 'FIX '} {item:<{width}}  {found}")
        if not ok and fix:
            lines.append(f"     {'':<{width}}  → {fix}")
    return "\n".join(lines), all(r[1] is not False for r in rows)
