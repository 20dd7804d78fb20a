"""speed: a figure beside its peer, measured in the same run — the graded speed cell and its kin.

    grader.speed(launch_vector_add, P.vector_add, points=1)      # the graded cell
    print(grader.measure(launch_v1, P.vector_add, "v1"))        # after each version, ungraded
    grader.bench(lambda: kernel[blocks, 256](x, y), label="v2", bytes=8 * n)   # any launch
    grader.ladder_plot({"v1": launch_v1, "v2": launch_v2}, P.vector_add)        # the closing plot

The candidate and its peer (grader.peers) are timed by the same bench on the same inputs at the
same size. ``speed`` first runs the visible correctness check (a kernel right only at the benchmark
size earns nothing), poisons the outputs before every timed repetition, checks the last one, and
prints the fraction of the peer and the points it is worth (grader.score).

In a notebook these are feedback: points come from the judge (grader.judge.verbs times the graded
cells itself). Inside the judge's runner (``GRADER_RUNNER=1``), which executes the notebook once for
both the grade and the learner's feedback, the graded speed cells say the judge times them, and the
demonstrations (measure, ladders, sweeps) are timed with a short budget each (``DEMO_BUDGET_S``):
their figures are feedback, and grading should cost little more than the graded kernels.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from . import arrays, peers, timing
from .timing import Measurement
from .check import explain, fresh_seed, not_here, refuse_if_context_lost
from .check import check as check_correct
from .compare import compare
from .errors import CheckFailed, GraderModified
from .judged import RUNNER                              # the judge's sandboxed runner: demonstrations timed briefly
from .backend import SIMULATOR
from .problem import Problem
from .record import record
from .score import speed_points

_NAMED_PEERS = {"copy": peers.copy, "read": peers.read_stream}
JUDGED = os.environ.get("GRADER_JUDGED") == "1"        # the graded run: the judge times speed cells
DEMO_BUDGET_S = float(os.environ.get("GRADER_DEMO_BUDGET_S", "0.3"))   # a demonstration's timing, in the runner
_demo_case: dict = {}          # the last demonstration's TimedCase, (problem, size) -> case: versions share it


def _peer(peer, problem: Problem | None):
    """A Peer from what a caller passed: "problem" (its own), "copy", "read", a Peer, or None."""
    if peer == "problem":
        return problem.peer if problem is not None else None
    if isinstance(peer, str):
        return _NAMED_PEERS[peer]()
    return peer


def _device_name() -> str:
    from . import device

    return device.info().name


def timed(fn, *, label: str, work: dict, peer=None, peer_inputs: dict | None = None, size=None,
          before_each=None, budget_s: float = 3.0, timer=None) -> Measurement:
    """Time ``fn`` and, in the same run, ``peer`` on ``peer_inputs`` (the candidate's device inputs).
    ``timer``: grader.timing's EventTimer with its adaptive head start unless a dev/ study passes
    another (the graded cells never do)."""
    m = Measurement(label=label, bytes=work.get("bytes"), flops=work.get("flops"))
    if SIMULATOR:
        m.note = "no GPU"
        return m
    reps = {}
    if RUNNER:                                  # a demonstration while graded: a short look, not a study
        budget_s = min(budget_s, DEMO_BUDGET_S)
        reps = {"warmup": 1, "min_reps": 3}
    m.device = _device_name()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.times_s = timing.time_call(fn, before_each=before_each, budget_s=budget_s, timer=timer, **reps)
    except NotImplementedError as exc:         # an exercise not written yet: one line, nothing timed
        m.note = explain(exc)
        return m
    if peer is not None:
        m.peer_name, m.peer_value = peers.measure(peer, peers.inputs_for(peer_inputs or {}, size, work), budget_s)
    return m


def bench(fn, *, label: str = "kernel", bytes: int | None = None, flops: int | None = None, peer="copy",
          before_each=None, budget_s: float = 3.0) -> Measurement:
    """Time any launch ``fn()`` that moves ``bytes`` (or computes ``flops``) against a peer that needs
    no inputs ("copy", "read", None). Without a GPU nothing is timed and the measurement says so."""
    return timed(fn, label=label, work={"bytes": bytes, "flops": flops}, peer=_peer(peer, None),
                 before_each=before_each, budget_s=budget_s)


class TimedCase:
    """One case of a problem on the device, as the timed runs use it: ``inputs`` (host), ``dev_in``
    (their device views), ``outs`` ({name: (flat, view)}, poisoned, each inside a guard zone),
    ``args`` (what the launch function takes: inputs, then output views) and, with ``repoisoned``,
    :meth:`repoison` (the outputs back to their poisoned state, before each timed repetition). The
    graded cell, the judge's runner and the dev/ scripts all time launches on one of these."""

    def __init__(self, problem: Problem, size, seed: int = 0, repoisoned: bool = False, inputs: dict | None = None):
        self.problem, self.size = problem, size
        self.inputs = problem.make_inputs(np.random.default_rng(seed), size) if inputs is None else inputs
        self.dev_in = arrays.device_args(self.inputs, problem.arrays)
        self.outs = {k: arrays.output(shape, dtype, problem.arrays)
                     for k, (shape, dtype) in problem.outputs(size, self.inputs).items()}
        self.args = list(self.dev_in.values()) + [view for _, view in self.outs.values()]
        # copies of the poisoned outputs (device memory as large as the outputs: only when asked)
        self._pristine = {k: arrays.clone(flat) for k, (flat, _) in self.outs.items()} if repoisoned else None

    def repoison(self) -> None:
        for k, (flat, _) in self.outs.items():
            arrays.copy_into(flat, self._pristine[k])

    def host_outputs(self) -> dict:
        """{name: the output's flat buffer on the host}, guard zones included (grader.arrays.to_host)."""
        return {k: arrays.to_host(flat, None) for k, (flat, _) in self.outs.items()}


def timed_checked(launch, problem: Problem, *, timer=None, seed: int = 0, budget_s: float = 3.0) -> Measurement:
    """The graded cell's timed runs, ungraded, for the dev/ studies of the timer: outputs re-poisoned
    before each run, ``timer`` (grader.timing), the last run's outputs judged by grader.check's
    verdict (CheckFailed if wrong) and the problem's peer on the same inputs. Check the kernel at
    the problem's sizes first, as grader.speed does."""
    from .check import Observation, verdict

    size = problem.bench_size
    case = TimedCase(problem, size, seed, repoisoned=True)
    m = timed(lambda: launch(*case.args), label=problem.name, work=problem.work(size), peer=problem.peer,
              peer_inputs=case.dev_in, size=size, before_each=case.repoison, budget_s=budget_s, timer=timer)
    spec = problem.outputs(size, case.inputs)
    obs = Observation(outputs={k: arrays.to_host(case.outs[k][0], dtype) for k, (_, dtype) in spec.items()},
                      launched=True)
    failures = verdict(problem, size, case.inputs, obs)
    if failures:
        raise CheckFailed(f"{problem.name}: the timed runs gave a wrong answer:\n" + "\n".join(failures))
    return m


def measure(launch, problem: Problem, label: str | None = None, *, size=None, peer="problem",
            budget_s: float = 2.0) -> Measurement:
    """Time ``launch`` at the problem's benchmark size (or ``size``) against a peer, ungraded.
    peer: "problem" (the problem's own), "copy", "read", a Peer or None."""
    label = label or problem.name
    size = problem.bench_size if size is None else size
    if SIMULATOR or not_here(problem):
        return Measurement(label=label)
    case = demo_case(problem, size)
    try:
        return timed(lambda: launch(*case.args), label=label, work=problem.work(size), peer=_peer(peer, problem),
                     peer_inputs=case.dev_in, size=size, budget_s=budget_s)
    except NotImplementedError as exc:       # an exercise not written yet: say so in one line, time nothing
        return Measurement(label=label, note=explain(exc))


def demo_case(problem: Problem, size) -> "TimedCase":
    """The inputs a demonstration times on: one case kept (the last problem and size), so the
    versions of a ladder share one upload instead of making the inputs once each."""
    key = (id(problem), repr(size))
    if key not in _demo_case:
        _demo_case.clear()                          # one at a time: a small GPU holds one large case
        _demo_case[key] = TimedCase(problem, size)
    return _demo_case[key]


def speed(launch, problem: Problem, points: float, *, target: float | None = None, floor: float | None = None,
          budget_s: float = 3.0) -> None:
    """The graded speed cell, as feedback: the figure beside its peer and the points it is worth
    (the judge's own measurement is what grades)."""
    __tracebackhide__ = True
    if RUNNER or JUDGED:
        print(f"{problem.name}: timed by the judge when the notebook is graded (its verdict is below).")
        return None
    _speed(launch, problem, points, target, floor, budget_s)      # prints the points: no bare number
    return None


def _speed(launch, problem: Problem, points: float, target, floor, budget_s: float) -> float:
    from .integrity import verify

    target = problem.target if target is None else target
    floor = problem.floor if floor is None else floor
    verify(problem)
    why = not_here(problem) or ("no GPU" if SIMULATOR else None)      # a compiled kernel says which GPU it needs
    if why:
        return speed_points(Measurement(label=problem.name, note=why), target=target, floor=floor, points=points)
    refuse_if_context_lost()
    try:
        check_correct(launch, problem, quiet=True)
    except CheckFailed as exc:
        if isinstance(exc, GraderModified):
            raise
        raise CheckFailed(f"{problem.name}: no timed runs: the kernel must pass the correctness check "
                          f"first. {exc}") from None
    try:
        return _timed_cell(launch, problem, points, target, floor, budget_s)
    except (CheckFailed, GraderModified):
        raise
    except Exception as exc:      # a CUDA error (illegal address, out of memory): say so, in one line
        raise CheckFailed(f"{problem.name}: the timed runs failed: {explain(exc)}") from None


def _timed_cell(launch, problem: Problem, points: float, target: float, floor: float, budget_s: float) -> float:
    from .integrity import verify

    size = problem.bench_size
    case = TimedCase(problem, size, fresh_seed(), repoisoned=True)
    inputs, outs = case.inputs, case.outs
    m = timed(lambda: launch(*case.args), label=problem.name, work=problem.work(size), peer=problem.peer,
              peer_inputs=case.dev_in, size=size, before_each=case.repoison, budget_s=budget_s)
    verify(problem)
    want = problem.reference(**inputs)
    for k, (shape, dtype) in problem.outputs(size, inputs).items():
        n = int(np.prod(shape, dtype=np.int64))
        got = arrays.to_host(outs[k][0], dtype)[:n].reshape(shape)
        failures = compare(k, got, np.asarray(want[k]), *problem.tolerances(size, dtype), dtype=dtype)
        if failures:
            raise CheckFailed(f"{problem.name}: the timed runs gave a wrong answer at size {size}:\n" + "\n".join(failures))
    earned = speed_points(m, target=target, floor=floor, points=points)
    record("speed", by="notebook", problem=problem.name, points=earned, max_points=points, target=target, floor=floor,
           **m.as_dict())
    return earned


# ---------------------------------------------------------------- closing plots
def sweep(launch, problem: Problem, sizes: list, budget_s: float = 0.5) -> list:
    """GB/s (or TFLOP/s) of ``launch`` at each size, for a perf-vs-size plot. [] without a GPU."""
    if SIMULATOR or not_here(problem):
        return []
    rows = []
    for size in sizes:
        case = demo_case(problem, size)
        try:
            m = timed(lambda: launch(*case.args), label=problem.name, work=problem.work(size), budget_s=budget_s)
        except NotImplementedError as exc:   # an exercise not written yet: stop, saying so once
            print(f"{problem.name}: not measured: {explain(exc)}")
            break
        rows.append((size, m.value))
    return rows


def _recorded(kind: str, problem: Problem):
    from .scoreboard import load_recorded

    saved = load_recorded(kind, problem.name)
    if saved is None:
        print(f"No GPU and no recorded results to show: run this lesson on a GPU for the {kind}.")
    else:
        print(f"No GPU here: showing the reference solution measured on {saved['device']} ({saved['date']}).")
    return saved


def sweep_plot(launch, problem: Problem, sizes: list, title: str = ""):
    """The closing plot: the learner's kernel against the copy bandwidth across sizes. Without a GPU
    it draws what the course's reference measured (results/scoreboard.json), saying so."""
    from . import plot

    if not SIMULATOR:
        rows = sweep(launch, problem, sizes)
        if not rows:
            print(f"{problem.name}: no size measured yet: nothing to draw.")
            return None
        label, ceiling = peers.ceiling("copy")
        record("sweep", problem=problem.name, rows=rows, peer=label, peer_value=ceiling, device=_device_name())
        return plot.perf_vs_size({"your " + problem.name: rows}, ceiling=ceiling, ceiling_label=label,
                                 title=title or f"{problem.name} on {_device_name()}")
    saved = _recorded("sweep", problem)
    if saved is None:
        return None
    return plot.perf_vs_size({"reference " + problem.name: [tuple(r) for r in saved["rows"]]},
                             ceiling=saved["peer_value"], ceiling_label=saved["peer"],
                             title=title or f"{problem.name} on {saved['device']} (recorded)")


def ladder_plot(versions: dict, problem: Problem, title: str = "", size=None, extra: list | None = None, peer="problem"):
    """The closing "% of the peer" ladder: each version as a fraction of the problem's peer (or
    ``peer``), timed now on a GPU and recorded for the scoreboard. ``versions``: label -> launch
    function, or label -> a Measurement taken earlier in the lesson. ``extra``: (label, fraction)
    rows measured elsewhere. Without a GPU: the reference solution's recorded ladder."""
    return _ladder_plot(versions, problem, title, size, extra, peer)


def _ladder_plot(versions: dict, problem: Problem, title: str, size, extra, peer):
    from . import plot

    if not SIMULATOR:
        rows, peer_label = [], None
        for label, version in versions.items():
            m = version if isinstance(version, Measurement) else measure(version, problem, label, size=size, peer=peer)
            print(m)
            if not m.measured:                   # e.g. a version not written yet: no bar
                continue
            rows.append((label, m.fraction))
            peer_label = peer_label or m.peer_name
        rows += [(label, f) for label, f in (extra or []) if label and f == f]   # measured rows only
        if not rows:
            print("No version measured yet: nothing to draw.")
            return None
        record("ladder", problem=problem.name, rows=rows, peer=peer_label, device=_device_name())
        return plot.ladder(rows, title=title or f"{problem.name}: % of {peer_label} on {_device_name()}",
                           target=problem.target)
    saved = _recorded("ladder", problem)
    if saved is None:
        return None
    return plot.ladder([tuple(r) for r in saved["rows"]], target=problem.target,
                       title=title or f"{problem.name}: % of {saved['peer']} on {saved['device']} (recorded)")
