"""The CUDA toolchain: is there a GPU, which architecture to compile for, where each tool is.

Every other module asks here; nothing else probes the driver or searches for a tool.

* :func:`gpu_count` / :func:`compute_capability` ask the driver (libcuda through ctypes): cheap,
  and they import neither Numba nor cuda.core, so the simulator can still be chosen afterwards.
* :func:`arch_for` is the one rule for the architecture string: ``sm_XY``, with the ``a``
  (architecture-specific) suffix where it unlocks instructions (wgmma and setmaxnreg on Hopper,
  tcgen05 on Blackwell). :func:`default_arch` is the GPU's, else ``$GRADER_CUDA_ARCH``, else
  :data:`DEFAULT_ARCH` (so Hopper kernels compile and their SASS can be read on any laptop).
* Tool paths: nvcc, ptxas, cuobjdump, nvdisasm (the nvidia-cuda-* wheels first, then a CUDA
  toolkit), NVRTC's version, the include folders (the course's, CUTLASS/CuTe's, CUDA's).

Standard library only.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

#: Architecture compiled for when there is no GPU and none is named.
DEFAULT_ARCH = "sm_90a"
#: Compute capabilities whose architecture-specific ("a") target is the useful default.
ARCH_SPECIFIC = {90, 100, 101, 103, 110, 120, 121}

PACKAGE_DIR = Path(__file__).resolve().parent.parent
COURSE_INCLUDE = PACKAGE_DIR / "include"

_LIBCUDA_NAMES = ("libcuda.so.1", "libcuda.so", "nvcuda.dll")
_CC_MAJOR, _CC_MINOR = 75, 76      # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR


# ---------------------------------------------------------------- the GPU
@lru_cache(maxsize=1)
def _libcuda():
    """libcuda, initialised; None when there is no driver (or no device it can use)."""
    for name in _LIBCUDA_NAMES:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            return lib if lib.cuInit(0) == 0 else None
        except AttributeError:
            return None
    return None


def gpu_count() -> int:
    """Number of CUDA devices the driver reports; 0 without a driver or a GPU."""
    lib = _libcuda()
    if lib is None:
        return 0
    count = ctypes.c_int(0)
    return count.value if lib.cuDeviceGetCount(ctypes.byref(count)) == 0 else 0


def gpu_available() -> bool:
    return gpu_count() > 0


def compute_capability(device: int = 0) -> tuple[int, int] | None:
    """(major, minor) of a device, or None without one."""
    lib = _libcuda()
    if lib is None or gpu_count() <= device:
        return None
    dev, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
    if lib.cuDeviceGet(ctypes.byref(dev), device) != 0:
        return None
    lib.cuDeviceGetAttribute(ctypes.byref(major), _CC_MAJOR, dev)
    lib.cuDeviceGetAttribute(ctypes.byref(minor), _CC_MINOR, dev)
    return major.value, minor.value


def driver_version() -> str | None:
    """"CUDA 13.0" for the installed driver, None without one."""
    lib = _libcuda()
    if lib is None:
        return None
    v = ctypes.c_int(0)
    lib.cuDriverGetVersion(ctypes.byref(v))
    return f"CUDA {v.value // 1000}.{v.value % 1000 // 10}"


# ---------------------------------------------------------------- architectures
def arch_for(cc: tuple[int, int]) -> str:
    """``sm_XY`` for a compute capability, with the ``a`` suffix where it unlocks features."""
    major, minor = cc
    number = 10 * major + minor
    return f"sm_{number}a" if number in ARCH_SPECIFIC else f"sm_{number}"


def normalise_arch(arch: str | int) -> str:
    """"90a", 90, "compute_90a", "SM_90A" -> "sm_90a"; a ValueError for anything else."""
    a = str(arch).strip().lower().replace("compute_", "sm_")
    if re.fullmatch(r"\d+[af]?", a):
        a = "sm_" + a
    if not re.fullmatch(r"sm_\d{2,3}[af]?", a):
        raise ValueError(f"not a GPU architecture: {arch!r} (expected e.g. sm_80, sm_89, sm_90a, sm_100a)")
    return a


def arch_number(arch: str) -> int:
    """sm_90a -> 90, sm_100a -> 100."""
    return int(re.sub(r"\D", "", normalise_arch(arch)))


def default_arch() -> str:
    """``$GRADER_CUDA_ARCH`` if set, else the GPU's (:func:`arch_for`), else :data:`DEFAULT_ARCH`."""
    env = os.environ.get("GRADER_CUDA_ARCH")
    if env:
        return normalise_arch(env)
    cc = compute_capability()
    return arch_for(cc) if cc else DEFAULT_ARCH


def runs_on(arch: str, cc: tuple[int, int] | None) -> bool:
    """Can a cubin built for ``arch`` run on a GPU of compute capability ``cc``? Machine code runs
    on its own major version at the same or a later minor; an ``a`` target only on its own
    capability."""
    if cc is None:
        return False
    arch = normalise_arch(arch)
    want = arch_number(arch)
    if arch.endswith("a"):
        return 10 * cc[0] + cc[1] == want
    return cc[0] == want // 10 and cc[1] >= want % 10


def runs_here(arch: str) -> bool:
    """Can code built for ``arch`` run on this machine's GPU?"""
    return runs_on(arch, compute_capability())


# ---------------------------------------------------------------- tools
def _site_dirs() -> list[Path]:
    return [Path(p) for p in sys.path if p and ("site-packages" in p or "dist-packages" in p)]


def _wheel_bin(tool: str) -> Path | None:
    """A tool shipped in an nvidia-cuda-* wheel (nvidia/cu13/bin/…)."""
    for sd in [Path(p) for p in sys.path if p]:
        for sub in ("cu13", "cu12", "cuda_cuobjdump", "cuda_nvdisasm", "cuda_nvcc"):
            c = sd / "nvidia" / sub / "bin" / tool
            if c.is_file():
                return c
    return None


@lru_cache(maxsize=1)
def cuda_home() -> Path | None:
    """A CUDA toolkit root holding ``include/cuda_runtime.h`` (or None)."""
    cands = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(str(Path(nvcc).resolve().parent.parent))
    cands.append("/usr/local/cuda")
    for c in cands:
        if c and (Path(c) / "include" / "cuda_runtime.h").is_file():
            return Path(c)
    return None


def tool_path(tool: str) -> str | None:
    """nvcc, ptxas, cuobjdump or nvdisasm: the wheel's, then the toolkit's, then PATH; None if absent."""
    wheel = _wheel_bin(tool) if tool != "nvcc" else None
    if wheel:
        return str(wheel)
    home = cuda_home()
    if home and (home / "bin" / tool).is_file():
        return str(home / "bin" / tool)
    return shutil.which(tool)


def require_tool(tool: str) -> str:
    path = tool_path(tool)
    if path is None:
        fixes = {"cuobjdump": "pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm",
                 "nvdisasm": "pip install nvidia-cuda-nvdisasm",
                 "ptxas": "install a CUDA toolkit (ptxas comes with it)",
                 "nvcc": "install a CUDA toolkit"}
        raise FileNotFoundError(f"{tool} not found: {fixes.get(tool, 'install a CUDA toolkit')}")
    return path


def tool_env() -> dict:
    """The environment for cuobjdump: it runs nvdisasm for --dump-sass, found through PATH."""
    env = dict(os.environ)
    nvdisasm = tool_path("nvdisasm")
    if nvdisasm:
        folder = str(Path(nvdisasm).parent)
        env["NVDISASM_PATH"] = folder
        env["PATH"] = folder + os.pathsep + env.get("PATH", "")
    return env


@lru_cache(maxsize=1)
def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return f"nvrtc {major}.{minor}"


@lru_cache(maxsize=1)
def nvcc_version() -> str | None:
    exe = tool_path("nvcc")
    if not exe:
        return None
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"V(\d+\.\d+\.\d+)", out)
    return "nvcc " + (m.group(1) if m else out.strip()[-40:])


# ---------------------------------------------------------------- headers
@lru_cache(maxsize=1)
def cutlass_include_dir() -> Path | None:
    """The folder holding ``cute/tensor.hpp``: ``$CUTLASS_PATH`` (or _HOME/_DIR), else the
    nvidia-cutlass wheel's copy."""
    cands: list[Path] = []
    for env in ("CUTLASS_PATH", "CUTLASS_HOME", "CUTLASS_DIR"):
        if os.environ.get(env):
            cands += [Path(os.environ[env]) / "include", Path(os.environ[env])]
    try:
        import importlib.util

        spec = importlib.util.find_spec("cutlass_library")
        for loc in (spec.submodule_search_locations or []) if spec else []:
            cands.append(Path(loc) / "source" / "include")
    except (ImportError, ValueError):
        pass
    for sd in _site_dirs():
        cands += [sd / "cutlass_library" / "source" / "include", sd / "cutlass" / "include"]
    return next((c for c in cands if (c / "cute" / "tensor.hpp").is_file()), None)


def include_dirs() -> list[Path]:
    """Include folders given to every build, in search order: the course's helpers, CUTLASS/CuTe,
    CUDA's (the toolkit's, else the nvidia-cuda-runtime / -cccl wheels'; NVRTC's bundled headers
    cover the rest)."""
    dirs = [COURSE_INCLUDE]
    cutlass = cutlass_include_dir()
    if cutlass:
        dirs.append(cutlass)
    home = cuda_home()
    if home:
        dirs.append(home / "include")
        if (home / "include" / "cccl").is_dir():
            dirs.append(home / "include" / "cccl")
        return dirs
    for sd in _site_dirs():
        for sub in ("cu13/include", "cu12/include", "cuda_runtime/include", "cuda_cccl/include"):
            d = sd / "nvidia" / sub
            if (d / "cuda_runtime_api.h").is_file() or (d / "cuda" / "std").is_dir():
                dirs.append(d)
            if (d / "cccl").is_dir():
                dirs.append(d / "cccl")
    return dirs


@lru_cache(maxsize=1)
def headers_digest() -> str:
    """A hash of what a build depends on beyond its source: the course's headers and where
    CUTLASS and CUDA come from (their versions follow those paths and the compiler's version)."""
    h = hashlib.sha256()
    for p in sorted(COURSE_INCLUDE.glob("*")):
        if p.is_file():
            h.update(p.name.encode())
            h.update(p.read_bytes())
    try:
        import importlib.metadata as md

        h.update(md.version("nvidia-cutlass").encode())
    except Exception:          # not installed: the path below still tells builds apart
        pass
    h.update(str(cutlass_include_dir()).encode())
    h.update(str(cuda_home()).encode())
    return h.hexdigest()[:16]


def cache_root() -> Path:
    """Where the course caches builds and measured ceilings (``$GRADER_CACHE_DIR``)."""
    d = os.environ.get("GRADER_CACHE_DIR")
    return Path(d) if d else Path.home() / ".cache" / "gpu-kernel-course"


__all__ = ["DEFAULT_ARCH", "ARCH_SPECIFIC", "COURSE_INCLUDE", "gpu_count", "gpu_available",
           "compute_capability", "driver_version", "arch_for", "normalise_arch", "arch_number",
           "default_arch", "runs_on", "runs_here", "cuda_home", "tool_path", "require_tool", "tool_env",
           "nvrtc_version", "nvcc_version", "cutlass_include_dir", "include_dirs", "headers_digest",
           "cache_root"]
