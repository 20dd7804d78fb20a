"""timing: how long a call takes on the GPU, the way the lessons teach it.

This module only measures; what a figure is compared with (a peer) is grader.peers, and the
verbs that put the two side by side are grader.speed. The method:
* CUDA events around the kernel only (nothing else inside the timed region);
* warm-up launches first (JIT compilation, module load);
* the L2 cache flushed before every repetition, so each run reads from DRAM: after anything else
  prepared for the repetition (re-poisoned outputs), a kernel *reads* a 512 MiB buffer, so the L2 is
  left holding only clean lines of that buffer (``FLUSH``; see :func:`flush_l2`);
* repeat until the spread (interquartile range / median) is under 2 % or the
  time budget is spent; report the median.

The timer and the clock are parameters, so the stopping logic is tested on the
CPU with a fake clock (tests/test_timing_and_peers.py).

A :class:`Measurement` holds the times, the work (bytes or FLOPs), and the peer's figure from
the same run; ``str(m)`` prints the figure beside its peer and the device.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .backend import SIMULATOR

FLUSH_BYTES = 512 * 2**20     # > 2× the L2 of every GPU in device.PUBLISHED (B200: 126 MB)
# How flush_l2 empties the L2: "read" (the default since 2026-11-24) or "write" (the course's method
# before: results/timing/flush_study_h100_2026-11-24.txt compares them, reference by reference).
FLUSH = "read"


@dataclass
class Measurement:
    label: str
    times_s: list = field(repr=False, default_factory=list)
    bytes: int | None = None
    flops: int | None = None
    peer_name: str | None = None
    peer_value: float | None = None     # same unit as ``value``
    device: str = ""
    note: str = "no GPU"                # why nothing was measured, when nothing was

    @property
    def measured(self) -> bool:
        return bool(self.times_s)

    @property
    def median_s(self) -> float:
        return float(np.median(self.times_s)) if self.times_s else math.nan

    @property
    def spread(self) -> float:
        return spread(self.times_s)

    @property
    def unit(self) -> str:
        return "TFLOP/s" if self.flops else "GB/s"

    @property
    def value(self) -> float:
        """GB/s (bytes / median time) or TFLOP/s (flops / median time)."""
        if not self.times_s:
            return math.nan
        if self.flops:
            return self.flops / self.median_s / 1e12
        if self.bytes:
            return self.bytes / self.median_s / 1e9
        return math.nan

    @property
    def fraction(self) -> float:
        """value / peer value: 1.0 means as fast as the peer."""
        if not self.peer_value or not self.measured:
            return math.nan
        return self.value / self.peer_value

    def __str__(self) -> str:
        if not self.measured:
            return f"{self.label}: speed not measured: {self.note}"
        s = f"{self.label}: {_num(self.value)} {self.unit}"
        if self.peer_value:
            s += (f" = {100 * self.fraction:.0f}% of {self.peer_name} "
                  f"({_num(self.peer_value)} {self.unit} on {self.device or 'this GPU'})")
        s += f"; median of {len(self.times_s)} runs, {self.median_s * 1e3:.3f} ms, spread {100 * self.spread:.1f}%"
        return s

    def as_dict(self) -> dict:
        return {"label": self.label, "value": self.value, "unit": self.unit, "median_ms": self.median_s * 1e3,
                "runs": len(self.times_s), "spread": self.spread, "bytes": self.bytes, "flops": self.flops,
                "peer": self.peer_name, "peer_value": self.peer_value, "fraction": self.fraction,
                "device": self.device}


def _num(x: float) -> str:
    return f"{x:,.0f}".replace(",", " ") if x >= 100 else f"{x:.3g}"


def spread(times: list) -> float:
    """Interquartile range over median: 0.02 means the middle half lies within 2 %."""
    if len(times) < 2:
        return math.inf
    q1, med, q3 = np.percentile(times, [25, 50, 75])
    return float((q3 - q1) / med) if med > 0 else math.inf


def repeat(run_once: Callable[[], float], *, before_each: Callable[[], None] | None = None,
           warmup: int = 3, min_reps: int = 10, max_reps: int = 2000, target_spread: float = 0.02,
           budget_s: float = 3.0, now: Callable[[], float] = time.perf_counter) -> list:
    """Time ``run_once`` (returns seconds) until the spread is small or the budget is spent."""
    for _ in range(warmup):
        if before_each:
            before_each()
        run_once()
    times: list = []
    start = now()
    while len(times) < max_reps:
        if before_each:
            before_each()
        times.append(run_once())
        if len(times) >= min_reps and (spread(times) <= target_spread or now() - start >= budget_s):
            break
    return times


HEAD_START_US = 50.0           # the least GPU work queued before the start event
HEAD_START_MAX_US = 5000.0


def head_start_us(host_s: list) -> float:
    """Microseconds of GPU work to queue before the start event, given the host times of recent calls.

    Twice the median of the last five host times of ``fn`` (the first call compiles and is
    outvoted by the next ones), plus 20 µs, within [HEAD_START_US, HEAD_START_MAX_US]: a launch
    function that makes views or launches several kernels takes the host longer than one launch.
    """
    if not host_s:
        return HEAD_START_US
    recent = sorted(host_s[-5:])
    median = recent[len(recent) // 2]
    return min(HEAD_START_MAX_US, max(HEAD_START_US, 2e6 * median + 20.0))


class EventTimer:
    """Seconds one call of ``fn`` takes on the GPU, between two CUDA events.

    Before the start event the GPU is given work (a sleeping kernel), so the host's
    time in ``fn`` (Python preparing and launching kernels) is hidden behind it and the
    events time only the GPU's work, not a GPU idling while Python prepares the launch.
    The sleep is at least 50 µs and adapts to twice the host time ``fn`` has been taking
    (``head_start_us``): otherwise a launch function that is slow on the host, or one
    called right after a host-blocking ``before_each``, is charged for the host's time.
    """

    def __init__(self, adaptive: bool = True):
        from numba import cuda

        self.cuda = cuda
        self.start, self.end = cuda.event(), cuda.event()
        self.adaptive = adaptive
        self.host_s: list = []

    @property
    def head_start_us(self) -> float:
        return head_start_us(self.host_s) if self.adaptive else HEAD_START_US

    def __call__(self, fn: Callable[[], object]) -> float:
        keep_gpu_busy(self.head_start_us)
        self.start.record()
        t0 = time.perf_counter()
        fn()
        self.host_s.append(time.perf_counter() - t0)
        self.end.record()
        self.end.synchronize()
        return self.cuda.event_elapsed_time(self.start, self.end) / 1e3


_flush_buffer = None
_flush_sink = None


def flush_l2() -> None:
    """Empty the L2 of what earlier work left there, so the next kernel reads its inputs from DRAM.

    ``FLUSH == "read"``: a kernel reads a 512 MiB buffer (filled once), which evicts every line the
    L2 held (the dirty ones are written back now, outside any timed region) and leaves it holding
    clean lines of that buffer only: the timed kernel's own misses evict lines that need no write-back.
    ``"write"``: the buffer is overwritten instead, which leaves the L2 full of *dirty* lines that the
    next kernel's misses must write back to DRAM while it runs (8-10 µs of a 100 µs kernel on an H100)."""
    global _flush_buffer, _flush_sink
    from numba import cuda

    if _flush_buffer is None:
        _flush_buffer = cuda.device_array(FLUSH_BYTES // 4, dtype=np.int32)
        _flush_sink = cuda.device_array(1, dtype=np.int32)
        _fill[(_flush_buffer.size + 255) // 256, 256](_flush_buffer)     # 0, 1, 2, ...: never -1
    blocks = (_flush_buffer.size + 255) // 256
    if FLUSH == "write":
        _fill[blocks, 256](_flush_buffer)
    else:
        _touch[blocks, 256](_flush_buffer, _flush_sink)


_sleep_ns_per_step = None


def keep_gpu_busy(microseconds: float = HEAD_START_US) -> None:
    """Queue a one-thread kernel that sleeps about ``microseconds``, so work queued after it
    starts back to back. ``nanosleep`` only promises a sleep between 0 and twice the request,
    so the length of one step is measured once (events around a 400-step sleep)."""
    global _sleep_ns_per_step
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # Numba's low-occupancy warning would reach stderr
        if _sleep_ns_per_step is None:
            from numba import cuda

            _sleep[1, 1](1)                # compile, load
            a, b = cuda.event(), cuda.event()
            _sleep[1, 1](100)              # covers the host's launch of the timed sleep
            a.record()
            _sleep[1, 1](400)
            b.record()
            b.synchronize()
            _sleep_ns_per_step = max(100.0, min(2000.0, cuda.event_elapsed_time(a, b) * 1e6 / 400))
        _sleep[1, 1](max(1, int(math.ceil(microseconds * 1e3 / _sleep_ns_per_step))))


def _make_sleep():
    from numba import cuda

    @cuda.jit
    def sleep(steps):
        for _ in range(steps):
            cuda.nanosleep(1000)
    return sleep


def _make_touch():
    from numba import cuda

    @cuda.jit
    def touch(buf, sink):
        # a load per element; the store happens only for -1, which the buffer never holds
        i = cuda.grid(1)
        if i < buf.size and buf[i] == -1:
            sink[0] = 1
    return touch


def _make_fill():
    from numba import cuda

    @cuda.jit
    def fill(buf):
        i = cuda.grid(1)
        if i < buf.size:
            buf[i] = i
    return fill


class _Lazy:
    """A Numba kernel compiled at first launch (importing grader compiles nothing)."""

    def __init__(self, make):
        self.make, self.kernel = make, None

    def __getitem__(self, config):
        if self.kernel is None:
            self.kernel = self.make()
        return self.kernel[config]


_fill = _Lazy(_make_fill)
_touch = _Lazy(_make_touch)
_sleep = _Lazy(_make_sleep)


def time_call(fn: Callable[[], object], *, before_each: Callable[[], None] | None = None, flush: bool = True,
              budget_s: float = 3.0, timer: Callable | None = None, warmup: int = 3, min_reps: int = 10) -> list:
    """Seconds per call of ``fn`` on the GPU: events around each call, ``before_each`` run and then
    the L2 flushed before each one (outside the timed region), so what ``before_each`` wrote is not
    left dirty in the L2 either (the "write" flush keeps its old order: flush, then ``before_each``).
    [] in the simulator."""
    if SIMULATOR:
        return []
    timer = timer or EventTimer()

    def prepare():
        if flush and FLUSH == "write":
            flush_l2()
        if before_each:
            before_each()
        if flush and FLUSH != "write":
            flush_l2()

    return repeat(lambda: timer(fn), before_each=prepare, budget_s=budget_s, warmup=warmup, min_reps=min_reps)
