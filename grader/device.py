"""device: which GPU is this, and what can it do?

* :func:`info` names the GPU (or the simulator).
* :func:`peer` measures a ceiling once per process (the copy bandwidth; cuBLAS
  matmul TFLOP/s per dtype through torch) and returns it for ratios. Speed
  ratios always use the figure measured in *this* process on *this* GPU.
* Each measurement is also written to a per-device cache file
  (``~/.cache/gpu-kernel-course/ceilings.json``) so ``doctor`` and the plots can
  show the last known ceilings without a GPU run.
* :data:`PUBLISHED` holds datasheet peaks (dense, no sparsity) for the roofline.
  They are leads: the measured ceilings are what grades.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._mode import SIMULATOR

CACHE_DIR = Path(os.environ.get("GRADER_CACHE_DIR", Path.home() / ".cache" / "gpu-kernel-course"))

# Datasheet figures: memory bandwidth in GB/s, dense TFLOP/s per math mode, L2 in MB.
PUBLISHED = {
    "H200":      {"match": r"H200", "mem_GBps": 4800, "fp32": 67, "tf32": 495, "bf16": 989, "fp16": 989, "fp8": 1979, "l2_MB": 60},
    "H100 SXM":  {"match": r"H100 80GB HBM3|H100 SXM", "mem_GBps": 3350, "fp32": 67, "tf32": 495, "bf16": 989, "fp16": 989, "fp8": 1979, "l2_MB": 50},
    "H100 PCIe": {"match": r"H100 PCIe", "mem_GBps": 2000, "fp32": 51, "tf32": 378, "bf16": 756, "fp16": 756, "fp8": 1513, "l2_MB": 50},
    "A100":      {"match": r"A100", "mem_GBps": 2039, "fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312, "fp8": None, "l2_MB": 40},
    "L4":        {"match": r"\bL4\b", "mem_GBps": 300, "fp32": 30.3, "tf32": 60, "bf16": 121, "fp16": 121, "fp8": 242, "l2_MB": 48},
    "T4":        {"match": r"\bT4\b", "mem_GBps": 320, "fp32": 8.1, "tf32": None, "bf16": None, "fp16": 65, "fp8": None, "l2_MB": 4},
    "RTX 4090":  {"match": r"4090", "mem_GBps": 1008, "fp32": 82.6, "tf32": 82.6, "bf16": 165, "fp16": 165, "fp8": 330, "l2_MB": 72},
    "B200":      {"match": r"B200", "mem_GBps": 8000, "fp32": 75, "tf32": 1100, "bf16": 2250, "fp16": 2250, "fp8": 4500, "l2_MB": 126},
}


@dataclass
class DeviceInfo:
    name: str
    simulator: bool
    compute_capability: tuple = (0, 0)
    sm_count: int = 0

    @property
    def published(self) -> dict | None:
        return published_peaks(self.name)

    @property
    def arch(self) -> str:
        """sm_XY, with the ``a`` suffix on Hopper/Blackwell (wgmma, tcgen05 need it)."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}" + ("a" if major in (9, 10) else "")


def published_peaks(name: str) -> dict | None:
    for key, row in PUBLISHED.items():
        if re.search(row["match"], name):
            return {"model": key, **{k: v for k, v in row.items() if k != "match"}}
    return None


_info: DeviceInfo | None = None


def info() -> DeviceInfo:
    global _info
    if _info is None:
        if SIMULATOR:
            _info = DeviceInfo(name="Numba CUDA simulator (no GPU)", simulator=True)
        else:
            from numba import cuda

            d = cuda.get_current_device()
            name = d.name.decode() if isinstance(d.name, bytes) else str(d.name)
            _info = DeviceInfo(name=name, simulator=False, compute_capability=tuple(d.compute_capability),
                               sm_count=int(d.MULTIPROCESSOR_COUNT))
    return _info


# ------------------------------------------------------------------ ceilings
_measured: dict = {}
PEER_LABELS = {"copy": "copy bandwidth", "matmul_bf16": "cuBLAS bf16", "matmul_fp16": "cuBLAS fp16",
               "matmul_fp32": "cuBLAS fp32 (TF32 off)"}


def peer(name: str, size=None) -> tuple:
    """(label, value) of a peer, measured at first use in this process.

    A matmul peer given ``size`` (a GEMM Shape ``(M, N, K)``: the shape the candidate is timed at)
    is torch.matmul at that shape, timed the way :func:`grader.bench.bench` times the candidate
    (L2 flushed before each run, events around the call alone), so the ratio compares like with
    like. Without a size (doctor, plots) it is the 8192³ product, timed back to back.
    """
    if name not in PEER_LABELS:
        raise ValueError(f"unknown peer {name!r}; choose from {sorted(PEER_LABELS)}")
    shape = tuple(int(x) for x in size) if name != "copy" and isinstance(size, tuple) and len(size) == 3 else None
    key = name if shape is None else f"{name}@{shape[0]}x{shape[1]}x{shape[2]}"
    if key not in _measured:
        if name == "copy":
            _measured[key] = copy_bandwidth()
        elif shape is None:
            _measured[key] = matmul_tflops(name.split("_")[1])
        else:
            _measured[key] = matmul_tflops_at(name.split("_")[1], shape)
        _save(key, _measured[key])
    return PEER_LABELS[name], _measured[key]


def copy_bandwidth(nbytes: int = 2**30) -> float:
    """GB/s of the fastest device-to-device copy here, counting bytes read plus bytes written.

    The best of cuMemcpyDtoD (through Numba) and torch's ``copy_`` (when torch is
    installed): a peer must be the best the device does, or ratios flatter.
    """
    from numba import cuda

    from .bench import EventTimer, repeat

    n = nbytes // 4
    src = cuda.to_device(np.arange(n, dtype=np.float32))
    dst = cuda.device_array(n, dtype=np.float32)
    timer = EventTimer()
    copies = [lambda: dst.copy_to_device(src)]
    try:
        import torch

        t_src = torch.arange(n, dtype=torch.float32, device="cuda")
        t_dst = torch.empty_like(t_src)
        copies.append(lambda: t_dst.copy_(t_src))
    except Exception:  # no torch, or a CPU-only torch
        pass
    best = min(float(np.median(repeat(lambda c=c: timer(c), warmup=3, min_reps=20, budget_s=2.0)))
               for c in copies)
    return 2 * nbytes / best / 1e9


@contextlib.contextmanager
def _matmul_operands(dtype: str, M: int, N: int, K: int, uniform: bool):
    """A (M, K), B (K, N) and C (M, N) on the GPU in ``dtype`` (A and B standard normal, or uniform in
    [-1, 1] as the course's GEMM inputs), with TF32 off for as long as they are used."""
    import torch

    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        if uniform:
            a = (torch.rand(M, K, device="cuda") * 2 - 1).to(dt)
            b = (torch.rand(K, N, device="cuda") * 2 - 1).to(dt)
        else:
            a = torch.randn(M, K, device="cuda", dtype=dt)
            b = torch.randn(K, N, device="cuda", dtype=dt)
        yield a, b, torch.empty(M, N, device="cuda", dtype=dt)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def matmul_tflops(dtype: str, n: int = 8192) -> float:
    """TFLOP/s of an n×n×n torch.matmul (cuBLAS) on random data; fp32 with TF32 off."""
    import torch

    from .bench import repeat

    with _matmul_operands(dtype, n, n, n, uniform=False) as (a, b, c):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def once():
            start.record()
            torch.matmul(a, b, out=c)
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3

        times = repeat(once, warmup=3, min_reps=10, budget_s=3.0)
    return 2 * n**3 / float(np.median(times)) / 1e12


def matmul_tflops_at(dtype: str, shape: tuple) -> float:
    """TFLOP/s of torch.matmul (cuBLAS; fp32 with TF32 off) at ``shape = (M, N, K)`` on inputs
    uniform in [-1, 1] (the course's GEMM inputs), timed as bench times a candidate: the L2
    flushed before every run, CUDA events around the call, the median of the repetitions."""
    import torch

    from .bench import EventTimer, flush_l2, repeat

    M, N, K = shape
    with _matmul_operands(dtype, M, N, K, uniform=True) as (a, b, c):
        timer = EventTimer()
        times = repeat(lambda: timer(lambda: torch.matmul(a, b, out=c)), before_each=flush_l2,
                       warmup=3, min_reps=10, budget_s=3.0)
    return 2 * M * N * K / float(np.median(times)) / 1e12


def _save(name: str, value: float) -> None:
    try:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        path = CACHE_DIR / "ceilings.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        data.setdefault(info().name, {})[name] = {"value": value, "measured": time.strftime("%Y-%m-%d")}
        path.write_text(json.dumps(data, indent=1))
    except OSError:
        pass  # a read-only home must not fail a grade


def cached_ceilings(name: str | None = None) -> dict:
    """The last ceilings measured on a device of this name (for plots and doctor)."""
    path = CACHE_DIR / "ceilings.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    return data if name is None else data.get(name, {})
