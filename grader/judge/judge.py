"""The judge: grades one notebook from outside the learner's process.

:func:`grade` builds the plan (grader.judge.plan), compiles the ``%%cuda`` cells itself
(grader.judge.build), starts the runner in its sandbox and, while it imports, measures the speed
cells' peers before any learner code runs (the runner waits for the word to run its cells), then
evaluates each graded cell *as the source notebook has it* (hidden
tests included) in its own namespace: ``grader`` is the judge's (grader.judge.verbs), ``P`` the
course's problems, a compiled cell its own build, and every name the notebook defines a proxy to
the runner. A cell that raises earns 0 with the reason; one whose last line gives a number earns
that number (within its points); any other earns its points — nbgrader's rule, applied here.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import io
import re
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CheckFailed
from . import plan as plans
from .remote import FailedModule, Remote, RemoteFunction, RunnerGone

OUTPUT_CHARS = 20_000
UNTOUCHED = "not implemented yet: every exercise cell of this notebook is still the release's stub"


@dataclass
class Verdict:
    grade_id: str
    score: float
    max_score: float
    reason: str = ""         # why points were lost ("" when none were)
    output: str = ""         # what the cell printed, as the judge ran it


@dataclass
class NotebookGrade:
    notebook: str
    verdicts: list = field(default_factory=list)
    notes: list = field(default_factory=list)       # about the submission's structure and its cells' errors
    log: str = ""                                   # what the notebook's own code printed
    seconds: float = 0.0
    plan: object = None                             # what was graded (grader.judge.plan.Plan)
    timings: dict = field(default_factory=dict)     # seconds: build, peers, start (runner + its cells), tests, outputs
    runner_gone: str = ""                           # why the learner's process stopped answering ("" if it never did)
    unreadable: str = ""                            # why the submitted file could not be read as a notebook
    speed_cells: dict = field(default_factory=dict)  # grade_id -> the problem its speed cell times
    outputs: dict | None = None                     # the runner's cells' outputs (grader.judge.feedback validates)


def _free_names(source: str) -> set[str]:
    tree = ast.parse(source)
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    stored |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    stored |= {a.arg for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda)) for a in n.args.args}
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded - stored - set(dir(builtins))


def _module_names(plan) -> dict[str, dict]:
    """Module name -> its %%cuda cell, for the cells of the plan."""
    from ..cuda.magic import parse_magic_line

    out = {}
    for cell in plan.cuda:
        try:
            out[parse_magic_line(cell["line"])["name"]] = cell
        except Exception:          # a line the magic cannot read: the runner reports its error
            continue
    return out


def _speed_problems(plan, P) -> list:
    """The problems the plan's speed cells time (their peers are measured before the runner starts)."""
    return [problem for problems in _speed_cells(plan, P).values() for problem in problems]


def _speed_cells(plan, P) -> dict:
    """grade_id -> the problems its cell times with ``grader.speed`` (cells that time none left out)."""
    found = {}
    for test in plan.tests:
        names = re.findall(r"grader\.speed\(\s*\w+\s*,\s*P\.(\w+)", test["source"])
        problems = [getattr(P, n) for n in names if P is not None and hasattr(P, n)]
        if problems:
            found[test["grade_id"]] = problems
    return found


def evaluate(test: dict, ns: dict) -> Verdict:
    """Run one graded cell's source in ``ns``; its verdict by nbgrader's rule."""
    source, points = test["source"], test["points"]
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    out = io.StringIO()
    value, reason = None, ""
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(tree, f"<test {test['grade_id']}>", "exec"), ns)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), f"<test {test['grade_id']}>", "eval"), ns)
    except CheckFailed as exc:
        reason = str(exc)
    except AssertionError as exc:         # the lesson's own words: no exception name before them
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith("<test")]
        lines = source.splitlines()
        line = lines[frames[-1].lineno - 1].strip() if frames and 0 < (frames[-1].lineno or 0) <= len(lines) else ""
        reason = str(exc) or (f"this check failed: {line}" if line else "a check of this cell failed")
    except Exception as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith("<test")]
        where = f" (line {frames[-1].lineno})" if frames else ""
        reason = f"{type(exc).__name__}{where}: {exc}"
    text = out.getvalue()[-OUTPUT_CHARS:]
    if reason:
        return Verdict(test["grade_id"], 0.0, points, reason[:OUTPUT_CHARS], text)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        score = min(max(float(value), 0.0), points) if value == value else 0.0
        return Verdict(test["grade_id"], score, points, "" if score >= points else (text.strip().splitlines() or ["partial credit"])[-1], text)
    return Verdict(test["grade_id"], points, points, "", text)


def grade(source_nb: Path, release_nb: Path, submission: Path | None, sandbox, *, gpu: bool | None = None,
          env: dict | None = None, run_tests: bool = False, shortcut: bool = True, progress=None) -> NotebookGrade:
    """Grade one submitted notebook (None: the untouched release). Never raises for anything the
    submission does: a failure of grading itself is every cell's 0 with the reason.

    ``shortcut``: a notebook whose exercise cells are all the release's stubs earns 0 on every graded
    cell without being built or run (tests/test_notebooks.py grades every untouched release the long
    way and proves that is what it earns). ``progress``: called with a line as each phase and graded
    cell is done (the scoreboard and autograde print them)."""
    t0 = time.monotonic()
    result = NotebookGrade(notebook=Path(release_nb).name)
    try:
        plan = plans.build(source_nb, release_nb, submission, run_tests=run_tests)
    except plans.Unreadable as exc:
        return refused(source_nb, release_nb, str(exc))
    result.plan = plan
    result.notes += plan.notes
    if plan.untouched and shortcut:            # nothing to build or run: the release earns 0 everywhere
        why = UNTOUCHED
        result.verdicts = [Verdict(t["grade_id"], 0.0, t["points"], why) for t in plan.tests]
        result.notes.append("every exercise cell is as released: nothing was built or run")
        result.seconds = time.monotonic() - t0
        return result
    try:
        _grade(plan, result, sandbox, gpu, env, progress or (lambda line: None))
    except Exception as exc:                  # the grader's own failure: every cell 0, with why
        why = f"grading failed: {type(exc).__name__}: {str(exc)[:300]}"
        done = {v.grade_id for v in result.verdicts}
        result.verdicts += [Verdict(t["grade_id"], 0.0, t["points"], why) for t in plan.tests
                            if t["grade_id"] not in done]
        result.notes.append(why)
        result.runner_gone = result.runner_gone or why
    result.seconds = time.monotonic() - t0
    return result


def refused(source_nb: Path, release_nb: Path, why: str, unreadable: bool = True) -> NotebookGrade:
    """The grade of a submission that is not read (a link, not a regular file, too large, not a
    notebook) or whose grading failed: every graded cell 0, saying why; nothing of it ran."""
    if unreadable:
        why = f"this submission could not be read as a notebook: {why}"
    result = NotebookGrade(notebook=Path(release_nb).name, plan=plans.build(source_nb, release_nb, None))
    result.verdicts = [Verdict(t["grade_id"], 0.0, t["points"], why) for t in result.plan.tests]
    result.notes.append(why)
    if unreadable:
        result.unreadable = why
    return result


def _grade(plan, result: NotebookGrade, sandbox, gpu: bool | None, env: dict | None, progress) -> None:
    import grader

    from ..backend import SIMULATOR
    from ..cuda import toolchain
    from .build import compile_plan
    from .bounds import default_bounds, lesson_time_s
    from .sandbox import grader_bytecode, host_folder, remove_host_folder
    from .verbs import GraderFacade, Judged

    gpu = (not SIMULATOR) if gpu is None else gpu
    grader_bytecode()
    wall_s, cells_s, why = lesson_time_s(result.notebook, simulator=not gpu)
    plan.cells_s = 0.6 * cells_s               # then the remaining given cells run only for their definitions
    inputs = host_folder()
    try:
        mark = time.monotonic()
        if plan.cuda:
            progress(f"building {len(plan.cuda)} %%cuda cell(s)")
        built = compile_plan(plan.cuda, sandbox, inputs)
        result.timings["build"] = time.monotonic() - mark
        ns: dict = {"__name__": "__judge__"}
        exec(compile(plan.imports or "", "<imports>", "exec"), ns)
        P = ns.get("P")
        result.speed_cells = {gid: problems[0].name for gid, problems in _speed_cells(plan, P).items()}
        mark = time.monotonic()
        progress("running the notebook in its sandbox")
        # the runner starts (its interpreter, imports and shell) while the judge measures the peers on a
        # GPU nothing else uses yet; it runs no cell before remote.start
        with _closing(Remote(plan, sandbox, inputs, gpu, default_bounds(wall_s, why, cells_s), env=env)) as remote:
            peers_began = time.monotonic()
            if gpu:
                for problem in _speed_problems(plan, P):
                    _prewarm_peer(problem)
            result.timings["peers"] = time.monotonic() - peers_began
            from .. import peers

            remote.start(peers.exported() if gpu else [])   # the demonstrations show the judge's own figures
            try:
                errors = remote.hello()
            except RunnerGone as exc:
                errors = {"(notebook)": str(exc)}
            result.timings["start"] = time.monotonic() - mark - result.timings["peers"]
            mark = time.monotonic()
            result.notes += [f"cell `{cid}` raised {err}" for cid, err in errors.items()]
            device = grader.device.info().name if gpu else ""
            judged = Judged(remote, simulator=not gpu, cc=toolchain.compute_capability() if gpu else None,
                            device_name=device)
            ns["grader"] = GraderFacade(judged, _sandboxed_compile(sandbox, inputs))
            ns["display"] = lambda *a, **k: None
            cells = _module_names(plan)
            for test in plan.tests:
                if remote.dead:                      # the learner's process is gone: say why, once per cell
                    result.verdicts.append(Verdict(test["grade_id"], 0.0, test["points"], remote.dead))
                    continue
                wanted = _free_names(test["source"]) - set(ns)
                for name in sorted(wanted & set(cells)):
                    got = built.get(cells[name]["key"])
                    ns[name] = got if not isinstance(got, str) else FailedModule(name, got)
                rest = sorted(wanted - set(cells))
                if rest:
                    try:
                        kinds = remote.resolve(rest)
                    except RunnerGone:
                        kinds = {}
                    for name, kind in kinds.items():
                        if kind == "function":
                            ns[name] = RemoteFunction(remote, name)
                result.verdicts.append(evaluate(test, ns))
                v = result.verdicts[-1]
                first = v.reason.strip().splitlines()[0][:120] if v.reason.strip() else ""
                progress(f"{'✓' if v.score >= v.max_score else '✗'} {v.grade_id}: {v.score:g}/{v.max_score:g}"
                         + (f"  {first}" if first and v.score < v.max_score else ""))
            result.timings["tests"] = time.monotonic() - mark
            result.timings.update({f"tests.{k}": v for k, v in judged.seconds.items()})
            mark = time.monotonic()
            result.outputs = remote.notebook()
            spent = (result.outputs or {}).get("seconds")
            if isinstance(spent, dict):                # the slowest cells, for where "start" went
                top = sorted(((float(v), str(k)[:60]) for k, v in spent.items() if isinstance(v, (int, float))),
                             reverse=True)[:3]
                result.timings.update({f"cell.{k}": v for v, k in top})
            phases = (result.outputs or {}).get("phases")
            if isinstance(phases, dict):                 # the runner's start: interpreter and imports, setup, cells
                result.timings.update({f"start.{k}": float(phases[k]) for k in ("imports", "setup", "waited", "cells")
                                       if isinstance(phases.get(k), (int, float)) and not isinstance(phases.get(k), bool)
                                       and 0 <= phases[k] < 1e6})
            result.runner_gone = remote.dead or ""
            result.log = remote.close()
            result.timings["outputs"] = time.monotonic() - mark
    finally:
        remove_host_folder(inputs)


def _sandboxed_compile(sandbox, inputs: Path):
    """``grader.cuda.compile_cuda`` as a graded cell calls it inside the judge: built in the sandbox."""
    from .build import compile_plan

    def compile_cuda(source, name=None, arch=None, options=(), kernels=None, **_):
        from ..cuda.magic import cell_key

        line = " ".join([name or "cell"] + ([f"--arch {arch}"] if arch else []) +
                        [f"-k '{k}'" for k in kernels or []] + [f"--opt={o}" for o in options])
        module = compile_plan([{"line": line, "body": source, "key": cell_key(line, source)}], sandbox, inputs)
        got = next(iter(module.values()))
        if isinstance(got, str):
            from ..cuda.compiler import CompileError

            raise CompileError(got, name=name or "cell")
        return got
    return compile_cuda


def _prewarm_peer(problem) -> None:
    """Measure a problem's peer at its benchmark size now, in the judge's process, before the
    learner's code runs on this GPU (the speed cell then finds it measured), on the speed cell's own
    benchmark case (grader.judge.verbs.CASES: made once). Once per process."""
    from .. import arrays, peers

    if problem.peer is None or problem.unavailable(False, __import__("grader").cuda.toolchain.compute_capability()):
        return
    from .verbs import CASES, SEEDS

    size = problem.bench_size
    work = problem.work(size)
    if peers.measured(problem.peer, size, work):
        return
    inputs, _ = CASES.get(problem, size, SEEDS.seed(problem.name, size, "bench", 0))   # the speed cell's own case
    dev = arrays.device_args(inputs, problem.arrays)
    peers.measure(problem.peer, peers.inputs_for(dev, size, work))


@contextlib.contextmanager
def _closing(remote: Remote):
    try:
        yield remote
    finally:
        remote.box.close()              # the sandbox's processes and its cgroup, whatever happened
