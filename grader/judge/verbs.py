"""``grader.check`` and ``grader.speed`` as the judge runs them: the learner's code in the runner,
everything that decides points here.

* check: the judge draws the seed (the runner learns it only with the request), makes the inputs
  and the float64 reference itself, and compares what the runner's run left in the output buffers
  (guard zones included) — the reference never exists in the learner's process.
* speed: the visible check first; the runner times the launch (events, outputs poisoned before each
  repetition) and the judge verifies the last repetition's outputs; then the runner launches it
  back to back with the judge's clock around the request, and a claim faster than that clock
  allows (less :data:`CLOCK_SLACK`) is graded at the judge's clock; the outputs of those runs are
  verified too. The peer is measured here, in the judge's own process, on the same inputs. A figure
  faster than this GPU's datasheet peak allows (the bytes at its memory bandwidth, the FLOPs at its
  tensor rate, :data:`PHYSICAL_SLACK` above) is refused: the one defence against a runner that lies
  about time in both its timings and its back-to-back runs.
* seeds: drawn from a secret of the grading run (:class:`RunSeeds`), per problem, size and kind of
  check (visible or hidden), so every student of one run is checked on the same hidden inputs and
  the judge makes each input and reference once (:class:`Cases`); a new run draws new ones.

:class:`GraderFacade` is what the name ``grader`` means inside a test cell evaluated by the judge.
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import math
import os
import secrets
import time
import types

import numpy as np

from .. import arrays, peers
from ..cases import Cases
from ..check import Observation, failure_message, verdict
from ..compare import compare, describe_size
from ..errors import CheckFailed
from ..formats import storage_dtype
from ..problem import Problem
from ..record import record
from ..score import speed_points
from ..timing import Measurement
from .remote import RemoteFunction

CLOCK_SLACK = 0.10       # a figure may be this much faster than the judge's clock (back-to-back runs): on an H100
                         # the references ran back to back at 0.91-1.06x their event times (results/grading/)
BURST_S = 0.25           # seconds of back-to-back launches the judge times
PHYSICAL_SLACK = 1.10    # a figure may be this much above the datasheet peak before it is refused


class RunSeeds:
    """Seeds of one grading run: HMAC of the run's secret ($GRADER_RUN_SECRET, hex, which the host
    draws once and hands to its workers; else one drawn in this process), the problem, the size, the
    kind of check and the position of the size in it. Nothing in a sandbox learns a seed before the
    request that uses it."""

    def __init__(self, secret: bytes | None = None):
        self.own = secret or secrets.token_bytes(32)

    @property
    def secret(self) -> bytes:
        env = os.environ.get("GRADER_RUN_SECRET", "")
        try:
            return bytes.fromhex(env) if len(env) >= 32 else self.own
        except ValueError:
            return self.own

    def seed(self, problem: str, size, kind: str, index: int) -> int:
        msg = f"{problem}|{size!r}|{kind}|{index}".encode()
        return int.from_bytes(hmac.new(self.secret, msg, hashlib.sha256).digest()[:4], "little") & 0x7FFFFFFF


SEEDS = RunSeeds()
CASES = Cases(int(float(os.environ.get("GRADER_JUDGE_CASES_GB", "4")) * 2**30))


def expected_bytes(problem: Problem, size, inputs: dict) -> int:
    """The most array bytes a reply carrying ``problem``'s outputs may hold: each output with its
    guard zone, in its storage dtype (a reply that announces more is refused before it is read)."""
    total = 0
    for shape, dtype in problem.outputs(size, inputs).values():
        n = int(np.prod(shape, dtype=np.int64)) + arrays.GUARD_ELEMENTS
        total += n * storage_dtype(dtype).itemsize
    return total + 4096


def physical_floor_s(problem: Problem, work: dict, device_name: str) -> tuple[float, str] | None:
    """The fewest seconds one run can take on this GPU at its datasheet peaks (grader.device), and
    how that was reckoned; None when the GPU's peaks are not known."""
    from ..device import published_peaks

    peaks = published_peaks(device_name or "")
    if not peaks:
        return None
    floors = []
    if work.get("bytes") and peaks.get("mem_GBps"):
        floors.append((work["bytes"] / (peaks["mem_GBps"] * 1e9 * PHYSICAL_SLACK),
                       f"{work['bytes'] / 1e6:,.0f} MB at {peaks['mem_GBps']} GB/s"))
    rate = peaks.get("fp8") if "fp8" in problem.name.lower() and peaks.get("fp8") else peaks.get("bf16")
    if work.get("flops") and rate:
        floors.append((work["flops"] / (rate * 1e12 * PHYSICAL_SLACK),
                       f"{work['flops'] / 1e12:,.2f} TFLOP at {rate} TFLOP/s"))
    return max(floors) if floors else None


def problem_ref(problem: Problem) -> list:
    """(module, attribute) of a course problem, to name it to the runner."""
    import sys

    for name, mod in list(sys.modules.items()):
        if name.startswith("grader.problems.") and mod is not None:
            for attr, value in vars(mod).items():
                if value is problem:
                    return [name, attr]
    raise CheckFailed(f"the problem `{problem.name}` is not one of the course's (grader.problems)")


def _observation(head: dict, got: dict, problem: Problem, size, inputs: dict) -> Observation:
    outs = {}
    for k, (shape, dtype) in problem.outputs(size, inputs).items():
        a = got.get(f"out:{k}")
        if a is None:
            continue
        want = storage_dtype(dtype)
        if a.dtype.itemsize != want.itemsize:
            raise CheckFailed(f"`{k}` came back as {a.dtype}, not {want}")
        outs[k] = a.reshape(-1).view(want)
    changed = head.get("inputs_changed", [])
    scratch = head.get("scratch_bytes")          # counted in the learner's process: forgeable, like its timing (docs/GRADING.md)
    return Observation(outputs=outs, launched=bool(head.get("launched")), returned=bool(head.get("returned")),
                       error=str(head["error"])[:3000] if head.get("error") else None,
                       inputs_changed=[str(c) for c in changed][:20] if isinstance(changed, list) else [],
                       scratch_bytes=scratch if isinstance(scratch, int) and not isinstance(scratch, bool) else None)


class Judged:
    """The judge's check and speed for one notebook's runner."""

    def __init__(self, remote, simulator: bool, cc: tuple | None, device_name: str = ""):
        self.remote, self.simulator, self.cc, self.device_name = remote, simulator, cc, device_name
        self.seconds: dict = {}           # where the graded cells' time went: cases, runner, compare, timing, …

    @contextlib.contextmanager
    def spent(self, what: str):
        start = time.monotonic()
        try:
            yield
        finally:
            self.seconds[what] = self.seconds.get(what, 0.0) + time.monotonic() - start

    def _launch(self, launch) -> RemoteFunction:
        if not isinstance(launch, RemoteFunction):
            raise CheckFailed("the test expects a function your notebook defines (did its cell run?)")
        return launch

    def check(self, launch, problem: Problem, sizes: list | None = None, seed: int | None = None,
              hidden: bool = False, quiet: bool = False):
        why = problem.unavailable(self.simulator, self.cc)
        if why:
            print(f"{problem.name}: correctness not graded: {why}.")
            return 0.0
        launch, ref = self._launch(launch), problem_ref(problem)
        checked = tuple(sizes) if sizes is not None else \
            (problem.hidden(self.simulator) if hidden else problem.visible(self.simulator))
        kind = "hidden" if hidden else ("visible" if sizes is None else "sizes")
        for index, size in enumerate(checked):
            s = SEEDS.seed(problem.name, size, kind, index) if seed is None else seed
            with self.spent("cases"):
                inputs, want = CASES.get(problem, size, s)
            with self.spent("runner"):
                head, got = self.remote.case(launch.name, ref, size, s, expected_bytes(problem, size, inputs))
            with self.spent("compare"):
                failures = verdict(problem, size, inputs, _observation(head, got, problem, size, inputs), want)
            if failures:
                raise CheckFailed(failure_message(problem, size, s, failures, hidden))
        if not quiet:
            label = "hidden sizes" if hidden else ", ".join(describe_size(s) for s in checked)
            print(f"✓ {problem.name} correct{' (simulator)' if self.simulator else ''}: {label}")
        return None

    def speed(self, launch, problem: Problem, points: float, *, target: float | None = None,
              floor: float | None = None, budget_s: float = 3.0) -> float:
        target = problem.target if target is None else target
        floor = problem.floor if floor is None else floor
        why = problem.unavailable(self.simulator, self.cc) or ("no GPU" if self.simulator else None)
        if why:
            return speed_points(Measurement(label=problem.name, note=why), target=target, floor=floor, points=points)
        launch = self._launch(launch)
        try:
            self.check(launch, problem, quiet=True)
        except CheckFailed as exc:
            raise CheckFailed(f"{problem.name}: no timed runs: the kernel must pass the correctness check first. {exc}") from None
        size = problem.bench_size
        s = SEEDS.seed(problem.name, size, "bench", 0)
        with self.spent("cases"):
            inputs, want = CASES.get(problem, size, s)
        expect = expected_bytes(problem, size, inputs)
        with self.spent("timing"):
            head, got = self.remote.time(launch.name, problem_ref(problem), size, s, budget_s, expect)
        times = head.get("times")
        if not isinstance(times, list) or not times or len(times) > 100_000 or \
                not all(isinstance(t, (int, float)) and math.isfinite(t) and t > 0 for t in times):
            raise CheckFailed(f"{problem.name}: the timed runs reported no usable times")
        with self.spent("compare"):
            self._verify(problem, size, inputs, want, got, "the timed runs")
        claimed = float(np.median(times))
        reps = int(min(1000, max(3, math.ceil(BURST_S / max(claimed, 1e-6)))))
        with self.spent("burst"):
            clock = self.remote.burst(reps) / reps
            got = self.remote.outputs(expect)
        with self.spent("compare"):
            self._verify(problem, size, inputs, want, got, "the judge's timed runs")
        work = problem.work(size)
        m = Measurement(label=problem.name, times_s=[float(t) for t in times], device=self.device_name,
                        bytes=work["bytes"], flops=work["flops"])
        floor_s = clock * (1 - CLOCK_SLACK)
        if claimed < floor_s:
            print(f"note: the reported timings ({claimed * 1e3:.3f} ms) are faster than the judge's clock allows "
                  f"({clock * 1e3:.3f} ms a run back to back): graded at {floor_s * 1e3:.3f} ms. The judge's clock "
                  "also counts the host: a launch function that spends longer in Python (allocating, converting "
                  "arguments) than its kernels run on the GPU is graded at the host's pace.")
            m.times_s = [floor_s]
        physical = physical_floor_s(problem, work, self.device_name)
        if physical and m.median_s < physical[0]:
            raise CheckFailed(
                f"{problem.name}: not scored: the timings say {m.median_s * 1e3:.4f} ms a run, faster than this GPU "
                f"can physically run it ({physical[0] * 1e3:.4f} ms: {physical[1]}, the datasheet peak of "
                f"{self.device_name}, {100 * (PHYSICAL_SLACK - 1):.0f}% allowed above it). The runner's timing "
                "cannot be trusted, so no speed points are given.")
        if problem.peer is not None:
            with self.spent("peers"):
                m.peer_name, m.peer_value = peers.measure(problem.peer, self._peer_inputs(problem, size, inputs), budget_s)
        earned = speed_points(m, target=target, floor=floor, points=points)
        record("speed", by="judge", problem=problem.name, points=earned, max_points=points, target=target, floor=floor,
               judge_clock_ms=clock * 1e3, events_ms=claimed * 1e3, **m.as_dict())
        return earned

    def _peer_inputs(self, problem: Problem, size, inputs: dict):
        return peers.inputs_for(arrays.device_args(inputs, problem.arrays), size, problem.work(size))

    def _verify(self, problem, size, inputs, want, got: dict, what: str) -> None:
        for k, (shape, dtype) in problem.outputs(size, inputs).items():
            n = int(np.prod(shape, dtype=np.int64))
            a = got.get(f"out:{k}")
            if a is None or a.size < n or a.dtype.itemsize != storage_dtype(dtype).itemsize:
                raise CheckFailed(f"{problem.name}: {what} left no readable `{k}`")
            flat = a.reshape(-1).view(storage_dtype(dtype))
            failures = compare(k, flat[:n].reshape(shape), np.asarray(want[k]), *problem.tolerances(size, dtype), dtype=dtype)
            if failures:
                raise CheckFailed(f"{problem.name}: {what} gave a wrong answer at size {size}:\n" + "\n".join(failures))


class GraderFacade(types.SimpleNamespace):
    """``grader`` in a test cell the judge evaluates: its own check and speed, a compile that runs
    sandboxed, everything else the real package's."""

    def __init__(self, judged: Judged, compile_cuda):
        import grader

        super().__init__(check=judged.check, speed=judged.speed, SIMULATOR=judged.simulator,
                         cuda=types.SimpleNamespace(compile_cuda=compile_cuda, sass=grader.cuda.sass))
        self._real = grader

    def __getattr__(self, name):
        if name in ("measure", "bench", "ladder_plot", "sweep_plot", "sweep"):
            return lambda *a, **k: None          # demonstrations: not part of a grade
        return getattr(self._real, name)
