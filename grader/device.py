"""device: which GPU is this, and what can it do?

* :func:`info` names the GPU (or the simulator).
* :func:`save_ceiling` / :func:`cached_ceilings`: the last ceilings measured on
  a device of this name (``<cache root>/ceilings.json``), so ``doctor`` and the
  plots can show them without a GPU run. The ceilings themselves, and every peer
  a speed is a fraction of, are measured by grader.peers in the same run.
* :data:`PUBLISHED` holds datasheet peaks (dense, no sparsity) for the roofline.
  They are leads: the measured ceilings are what grades.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

from .cuda.toolchain import arch_for, cache_root
from .backend import SIMULATOR

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
        """The architecture string compiled for on this GPU (grader.cuda.toolchain.arch_for)."""
        return arch_for(self.compute_capability)


def published_peaks(name: str) -> dict | None:
    for key, row in PUBLISHED.items():
        if re.search(row["match"], name):
            return {"model": key, **{k: v for k, v in row.items() if k != "match"}}
    return None


def bandwidth_per_sm(dev: DeviceInfo | None = None) -> float | None:
    """The device's published memory bandwidth over its SM count, in GB/s per SM (None where either
    is unknown: the simulator, a GPU not in :data:`PUBLISHED`). By Little's law the bytes an SM must
    keep in flight to draw its share of the bandwidth grow with this figure: an H100 SXM has 25 GB/s
    per SM, an H200 36 (the same 132 SMs with faster memory). Lessons pick a configuration from it
    where one does not serve both (FAST_MEMORY_PER_SM)."""
    dev = dev or info()
    peaks = dev.published
    if not peaks or not dev.sm_count:
        return None
    return peaks["mem_GBps"] / dev.sm_count


FAST_MEMORY_PER_SM = 30.0     # GB/s per SM: above it (H200 36, B200 54; H100 SXM 25, A100 19) memory outruns the SMs


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


def save_ceiling(name: str, value: float) -> None:
    """Remember a measured ceiling for this device (doctor and plots show the last ones)."""
    try:
        cache_root().mkdir(parents=True, exist_ok=True)
        path = cache_root() / "ceilings.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        data.setdefault(info().name, {})[name] = {"value": value, "measured": time.strftime("%Y-%m-%d")}
        path.write_text(json.dumps(data, indent=1))
    except OSError:
        pass  # a read-only home must not fail a grade


def cached_ceilings(name: str | None = None) -> dict:
    """The last ceilings measured on a device of this name (for plots and doctor)."""
    path = cache_root() / "ceilings.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    return data if name is None else data.get(name, {})
