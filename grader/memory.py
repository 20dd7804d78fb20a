"""memory: how much device memory a launch function allocates beside its inputs and outputs.

Flash attention's point is that it needs no S × S buffer: its memory grows like the inputs,
O(S·d), not O(S²). ``grader.check`` measures that claim instead of taking it on trust: it runs
the launch function inside :func:`track` and a problem that states ``max_scratch_bytes`` fails a
launch that allocated more ("the launch allocated 4.0 MiB of device memory; at most 1.1 MiB …").

What is counted, while the block runs:

* **Numba on a GPU**: every allocation the driver context makes for Numba — ``cuda.device_array``,
  ``device_array_like``, ``to_device``, ``mapped_array``, ``managed_array``, pinned host memory
  (reachable from kernels too), and arrays Numba copies to the device for a launch. Bytes are
  summed as they are allocated (Numba frees lazily, so the sum is what the launch asked for).
* **Numba's simulator**: the same calls (``device_array``, ``device_array_like``, ``to_device``,
  ``mapped_array``, ``pinned_array``, ``managed_array``), by the bytes of the array each returns.
* **torch**, when it is imported and has a CUDA context: the rise of its caching allocator's
  peak (``torch.cuda.max_memory_allocated``) above what was allocated before the block.

Not counted: memory taken through other allocators (cuda.core buffers, CuPy, raw driver calls).
The measurement is advisory in the notebook, like the rest of the checks (grader.integrity).

    with memory.track() as used:
        launch(*args)
    used.bytes        # device memory the block allocated
"""
from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass

from .backend import SIMULATOR


@dataclass
class Usage:
    """Device memory allocated inside a :func:`track` block (bytes), by source."""
    numba: int = 0
    torch: int = 0

    @property
    def bytes(self) -> int:
        return self.numba + self.torch


def human(nbytes: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(nbytes) < 1024 or unit == "TiB":
            return f"{nbytes:.0f} B" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} TiB"


@contextlib.contextmanager
def _swap(owner, name: str, replacement):
    old = getattr(owner, name)
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, old)


def _count_simulator(stack: contextlib.ExitStack, usage: Usage) -> None:
    """Wrap the simulator's allocating functions (in its module and in ``numba.cuda``)."""
    from numba.cuda.simulator.cudadrv import devicearray

    counted = {}
    for name in ("device_array", "to_device", "pinned_array", "managed_array"):
        real = getattr(devicearray, name)

        def wrapper(*args, _real=real, **kwargs):
            out = _real(*args, **kwargs)
            usage.numba += int(getattr(out, "nbytes", 0) or 0)
            return out

        counted[name] = wrapper
        # device_array_like and mapped_array call device_array through the module: counted once
        stack.enter_context(_swap(devicearray, name, wrapper))
    cuda = sys.modules.get("numba.cuda")
    if cuda is not None:
        for name, wrapper in counted.items():
            if hasattr(cuda, name):
                stack.enter_context(_swap(cuda, name, wrapper))


def _count_driver(stack: contextlib.ExitStack, usage: Usage) -> None:
    """Wrap the Numba driver context's allocations (every Numba device or host allocation)."""
    from numba.cuda.cudadrv import driver

    def counting(method: str, size_arg: int):
        real = getattr(driver.Context, method)

        def wrapper(self, *args, **kwargs):
            try:
                usage.numba += int(args[size_arg])
            except (IndexError, TypeError, ValueError):
                pass
            return real(self, *args, **kwargs)

        return wrapper

    for method, size_arg in (("memalloc", 0), ("memallocmanaged", 0), ("memhostalloc", 0)):
        if hasattr(driver.Context, method):
            stack.enter_context(_swap(driver.Context, method, counting(method, size_arg)))


@contextlib.contextmanager
def _count_torch(usage: Usage):
    torch = sys.modules.get("torch")
    active = False
    try:
        active = torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized()
    except Exception:            # a CPU-only torch, or one that cannot reach the driver
        active = False
    if not active:
        yield
        return
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    try:
        yield
    finally:
        try:             # the allocator's counters need no synchronization; a broken context: 0
            usage.torch += max(0, int(torch.cuda.max_memory_allocated()) - int(before))
        except Exception:
            pass


@contextlib.contextmanager
def track():
    """Count the device memory allocated inside the block (a :class:`Usage`)."""
    usage = Usage()
    with contextlib.ExitStack() as stack:
        try:
            if SIMULATOR:
                _count_simulator(stack, usage)
            else:
                _count_driver(stack, usage)
        except ImportError:       # numba without CUDA support: nothing of Numba's to count
            pass
        stack.enter_context(_count_torch(usage))
        yield usage


def over_bound(used: int, bound: int) -> list[str]:
    """The failure line of a launch that allocated ``used`` bytes where ``bound`` are allowed."""
    if used <= bound:
        return []
    return [f"the launch function allocated {human(used)} of device memory beside its inputs and "
            f"outputs; at most {human(bound)} is allowed at this size (the scratch memory of this "
            "problem must grow like its inputs, not faster)."]


__all__ = ["Usage", "track", "human", "over_bound"]
