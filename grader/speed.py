"""speed: the graded speed cell of a lesson, in one call.

    grader.speed(launch_vector_add, problems.vector_add, points=1)

times the learner's launch function at the problem's benchmark size against the
problem's peer (measured in the same process), checks that the *timed* runs
produced the right answer (the output is poisoned before every repetition and
checked after the last), prints the figure beside the peer, and returns points
for nbgrader's partial credit.
"""
from __future__ import annotations

import warnings

import numpy as np

from ._mode import SIMULATOR
from .bench import Measurement, bench
from .check import CheckFailed, Problem, _device_output, _to_device_padded, check, compare, fresh_seed
from .record import record
from .score import speed_points


def _device_args(inputs: dict) -> list:
    """The launch function's arguments: arrays on the device (inside poisoned guard zones), scalars as they are."""
    return [(_to_device_padded(v)[1] if isinstance(v, np.ndarray) else v) for v in inputs.values()]


def speed(launch, problem: Problem, points: float, *, target: float | None = None,
          floor: float | None = None, budget_s: float = 3.0) -> float:
    __tracebackhide__ = True
    from .check import _explain_exception, refuse_if_context_lost
    from .integrity import GraderModified, verify

    target = problem.target if target is None else target
    floor = problem.floor if floor is None else floor
    verify(problem)
    if SIMULATOR:
        return speed_points(Measurement(label=problem.name), target=target, floor=floor, points=points)
    refuse_if_context_lost()
    _correct_first(launch, problem)
    try:
        return _timed(launch, problem, points, target, floor, budget_s)
    except (CheckFailed, GraderModified):
        raise
    except Exception as exc:      # a CUDA error (illegal address, out of memory): say so, in one line
        raise CheckFailed(f"{problem.name}: the timed runs failed: {_explain_exception(exc)}") from None


def _correct_first(launch, problem: Problem) -> None:
    """Speed is graded only for a kernel that passes the visible correctness check (fresh seeds).

    The timed size alone is a weak test: a kernel with no bounds guard is right at a benchmark
    size that is a multiple of its block, and one right only there would otherwise earn speed."""
    try:
        check(launch, problem, quiet=True)
    except CheckFailed as exc:
        raise CheckFailed(f"{problem.name}: no timed runs: the kernel must pass the correctness check "
                          f"first. {exc}") from None


def _timed(launch, problem: Problem, points: float, target: float, floor: float, budget_s: float) -> float:
    from .integrity import verify

    if SIMULATOR:
        return speed_points(Measurement(label=problem.name), target=target, floor=floor, points=points)
    from numba import cuda

    size = problem.bench_size
    inputs = problem.make_inputs(np.random.default_rng(fresh_seed()), size)
    args = _device_args(inputs)
    out_spec = problem.outputs(size, inputs)
    outs = {k: _device_output(shape, dtype) for k, (shape, dtype) in out_spec.items()}
    pristine = {k: cuda.to_device(flat.copy_to_host()) for k, (flat, _) in outs.items()}

    def repoison():
        for k, (flat, _) in outs.items():
            flat.copy_to_device(pristine[k])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = bench(lambda: launch(*args, *(view for _, view in outs.values())), label=problem.name,
                  bytes=problem.bytes_moved(size) if problem.bytes_moved else None,
                  flops=problem.flops(size) if problem.flops else None,
                  peer=problem.peer, peer_size=size, before_each=repoison, budget_s=budget_s)
    verify(problem)
    want = problem.reference(**inputs)
    for k, (shape, dtype) in out_spec.items():
        got = outs[k][1].copy_to_host()
        failures = compare(k, got, np.asarray(want[k]), *problem.tolerances(size, dtype), dtype=dtype)
        if failures:
            raise CheckFailed(f"{problem.name}: the timed runs gave a wrong answer "
                              f"at size {size}:\n" + "\n".join(failures))
    earned = speed_points(m, target=target, floor=floor, points=points)
    record("speed", problem=problem.name, points=earned, max_points=points, target=target,
           floor=floor, **m.as_dict())
    return earned


def measure(launch, problem: Problem, label: str | None = None, *, size=None, peer="problem",
            budget_s: float = 2.0) -> Measurement:
    """Time ``launch`` at the problem's benchmark size (or ``size``) against a peer, ungraded.

    For the timing right after each version of a lesson: ``print(grader.measure(launch_v1, P.x, "v1"))``.
    peer: "problem" (the problem's own peer), "copy", a callable (e.g. a torch op) or None.
    Without a GPU nothing is allocated or timed and the measurement says so.
    """
    label = label or problem.name
    peer = problem.peer if peer == "problem" else peer
    if SIMULATOR:
        return Measurement(label=label)
    size = problem.bench_size if size is None else size
    inputs = problem.make_inputs(np.random.default_rng(0), size)
    args = _device_args(inputs)
    outs = [_device_output(shape, dtype)[1] for shape, dtype in problem.outputs(size, inputs).values()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bench(lambda: launch(*args, *outs), label=label, peer=peer, budget_s=budget_s, peer_size=size,
                     bytes=problem.bytes_moved(size) if problem.bytes_moved else None,
                     flops=problem.flops(size) if problem.flops else None)


def sweep(launch, problem: Problem, sizes: list, budget_s: float = 0.5) -> list:
    """GB/s (or TFLOP/s) of ``launch`` at each size, for a perf-vs-size plot. [] without a GPU."""
    if SIMULATOR:
        return []
    rows = []
    for size in sizes:
        inputs = problem.make_inputs(np.random.default_rng(0), size)
        args = _device_args(inputs)
        outs = [_device_output(shape, dtype)[1] for shape, dtype in problem.outputs(size, inputs).values()]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = bench(lambda: launch(*args, *outs), label=problem.name, peer=None, budget_s=budget_s,
                      bytes=problem.bytes_moved(size) if problem.bytes_moved else None,
                      flops=problem.flops(size) if problem.flops else None)
        rows.append((size, m.value))
    return rows


def sweep_plot(launch, problem: Problem, sizes: list, title: str = ""):
    """The closing plot: the learner's kernel against the copy bandwidth across sizes.

    On a GPU it measures now (and records the rows for the scoreboard). Without one it
    draws what the course's reference solution measured (results/scoreboard.json), saying so.
    """
    from . import device, plot
    from .record import record
    from .scoreboard import load_recorded

    if not SIMULATOR:
        rows = sweep(launch, problem, sizes)
        label, ceiling = device.peer(problem.peer or "copy")
        record("sweep", problem=problem.name, rows=rows, peer=label, peer_value=ceiling,
               device=device.info().name)
        return plot.perf_vs_size({"your " + problem.name: rows}, ceiling=ceiling, ceiling_label=label,
                                 title=title or f"{problem.name} on {device.info().name}")
    saved = load_recorded("sweep", problem.name)
    if saved is None:
        print("No GPU and no recorded results to show: run this lesson on a GPU for the plot.")
        return None
    print(f"No GPU here: showing the reference solution measured on {saved['device']} ({saved['date']}).")
    return plot.perf_vs_size({"reference " + problem.name: [tuple(r) for r in saved["rows"]]},
                             ceiling=saved["peer_value"], ceiling_label=saved["peer"],
                             title=title or f"{problem.name} on {saved['device']} (recorded)")


def ladder_plot(versions: dict, problem: Problem, title: str = "", size=None, extra: list | None = None):
    """The closing "% of the peer" ladder: each version's speed as a fraction of the problem's peer.

    versions: label -> launch function, timed now on a GPU (at the problem's benchmark size, or
    ``size``) and recorded for the scoreboard. ``extra``: (label, fraction) rows measured elsewhere
    (e.g. earlier lessons' kernels), drawn below. Without a GPU it draws the reference solution's
    recorded ladder (results/scoreboard.json), saying so.
    """
    from . import device, plot
    from .record import record
    from .scoreboard import load_recorded

    if not SIMULATOR:
        rows = []
        for label, launch in versions.items():
            m = measure(launch, problem, label, size=size)
            print(m)
            rows.append((label, m.fraction))
        rows += list(extra or [])
        record("ladder", problem=problem.name, rows=rows, peer=device.peer(problem.peer)[0],
               device=device.info().name)
        return plot.ladder(rows, title=title or f"{problem.name}: % of {device.peer(problem.peer)[0]} "
                           f"on {device.info().name}", target=problem.target)
    saved = load_recorded("ladder", problem.name)
    if saved is None:
        print("No GPU and no recorded results to show: run this lesson on a GPU for the ladder.")
        return None
    print(f"No GPU here: showing the reference solutions measured on {saved['device']} ({saved['date']}).")
    return plot.ladder([tuple(r) for r in saved["rows"]], target=problem.target,
                       title=title or f"{problem.name}: % of {saved['peer']} on {saved['device']} (recorded)")
