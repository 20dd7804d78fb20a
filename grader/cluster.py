"""Grading a class on a Dask cluster: one task per student, the host the only writer.

``python -m grader autograde ASSIGNMENT --dask [local|ADDRESS]`` (:func:`grade_class`):

* the cluster: ``local`` (:func:`local_cluster`) starts one worker per visible GPU, each pinned to its
  GPU by ``CUDA_VISIBLE_DEVICES`` (dask-cuda's LocalCUDACluster when it is installed, else Dask
  Nannies with that variable set), or, with no GPU, a few single-threaded worker processes running
  the simulator; an address connects to a running scheduler (Slurm, Kubernetes: grader.recipes);
* each task is :func:`grader.autograde.grade_student` — the same function a serial run calls: the
  student's notebooks, sent as bytes, graded through the sandbox and the judge on the worker's GPU,
  with the host's ``$GRADER_JUDGE_*`` deadlines; it returns the grades, the feedback notebooks and the
  device, and writes nothing;
* the host writes each result as it arrives (grader.ledger.record: the gradebook and autograded/,
  each student whole), skips submissions whose content key is unchanged, and prints a line per event
  and a summary table.

Faults: a worker that dies mid-task loses nothing (the scheduler runs the task again elsewhere; the
host records it once); a task that raises is retried (``retries``) and then listed as failed, not
written, and graded again next run; a hang is bounded by the judge's deadlines (0 with the reason);
Ctrl-C cancels what is left and leaves every student written whole or not at all.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path


def local_cluster(n_workers: int | None = None, gpus: int | None = None):
    """A cluster on this machine: one worker per GPU (pinned), or ``n_workers`` CPU workers (default:
    2, at most the CPU count) running the simulator. Single-threaded processes; no Dask memory limit
    (the judge bounds each sandbox's memory itself)."""
    from .backend import SIMULATOR
    from .cuda.toolchain import gpu_count

    gpus = (0 if SIMULATOR else gpu_count()) if gpus is None else gpus
    if gpus:
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            from distributed import Scheduler, SpecCluster

            return SpecCluster(workers=gpu_worker_spec(gpus), scheduler={"cls": Scheduler, "options":
                               {"dashboard_address": None}}, name="grader-gpus")
        return LocalCUDACluster(n_workers=n_workers or gpus, threads_per_worker=1, memory_limit=0,
                                dashboard_address=None)
    from distributed import LocalCluster

    n = n_workers or max(1, min(2, os.cpu_count() or 1))
    return LocalCluster(n_workers=n, threads_per_worker=1, processes=True, memory_limit=0,
                        dashboard_address=None)


def gpu_worker_spec(gpus: int) -> dict:
    """Dask worker specs: one single-threaded Nanny per GPU, pinned by CUDA_VISIBLE_DEVICES."""
    from distributed import Nanny

    return {f"gpu-{i}": {"cls": Nanny, "options": {"nthreads": 1, "memory_limit": 0, "name": f"gpu-{i}",
                                                    "env": {"CUDA_VISIBLE_DEVICES": str(i)}}}
            for i in range(gpus)}


@dataclass
class ClassRun:
    """What :func:`grade_class` did."""
    results: dict = field(default_factory=dict)      # student -> StudentResult (written)
    failed: dict = field(default_factory=dict)       # student -> why (not written)
    skipped: list = field(default_factory=list)      # unchanged since their last grading
    attempts: dict = field(default_factory=dict)     # student -> times the host recorded it (1)
    seconds: float = 0.0
    interrupted: bool = False
    started: float = 0.0                              # when the first task was submitted (for the estimate)


def _client(cluster, n_workers):
    """(client, cluster it owns or None) for ``cluster``: "local"/None, an address, a Cluster or a Client."""
    from distributed import Client

    if isinstance(cluster, Client):
        return cluster, None, False
    if cluster in (None, "local"):
        own = local_cluster(n_workers)
        return Client(own), own, True
    if isinstance(cluster, str):
        return Client(cluster), None, True
    return Client(cluster), None, True


def grade_class(course: Path, assignment: str, students: list[str] | None = None, *, cluster="local",
                n_workers: int | None = None, sandbox: str | None = None, feedback: bool = True,
                env: dict | None = None, force: bool = False, retries: int = 1, out=print,
                on_result=None) -> ClassRun:
    """Grade every collected submission of ``assignment`` as one Dask task per student; write each
    result from this process as it arrives. ``sandbox`` is a name the workers resolve ("bwrap",
    "none"; None: each worker's choice, ``$GRADER_SANDBOX`` first)."""
    from distributed import as_completed

    from .autograde import collect, grade_student
    from .ledger import grader_digest, needs_grading, record

    t0 = time.monotonic()
    cd, jobs = collect(course, assignment, students, feedback=feedback, env=env, sandbox=sandbox)
    run = ClassRun()
    todo = [j for j in jobs if force or needs_grading(cd, j)]
    run.skipped = [j.student for j in jobs if j not in todo]
    if run.skipped:
        out(f"unchanged since their last grading (not graded again): {', '.join(run.skipped)}")
    if not todo:
        return run
    client, own, close = _client(cluster, n_workers)
    futures = {}
    run.started = time.monotonic()
    try:
        workers = client.scheduler_info().get("workers", {})
        out(f"grading {len(todo)} submission(s) of {assignment} on {len(workers)} Dask worker(s) at "
            f"{client.scheduler.address}")
        for job in todo:
            fut = client.submit(grade_student, job, key=f"grade-{job.student}-{job.key[:12]}", retries=retries,
                                pure=False)
            futures[fut] = job
        mine = grader_digest()
        for fut in as_completed(list(futures)):
            job = futures[fut]
            if fut.status != "finished":
                try:
                    exc = fut.exception()
                except Exception as e:             # cancelled, or the scheduler gave up on it
                    exc = e
                run.failed[job.student] = f"{type(exc).__name__}: {exc}"[:300]
                out(_line(client, futures, run, job.student, "FAILED " + run.failed[job.student]))
                continue
            result = fut.result()
            if result.grader != mine:
                run.failed[job.student] = (f"worker {result.worker} runs another grader ({result.grader}; "
                                           f"this host: {mine}): not written")
                out(_line(client, futures, run, job.student, "FAILED " + run.failed[job.student]))
                continue
            record(cd, assignment, result)
            run.results[job.student] = result
            run.attempts[job.student] = run.attempts.get(job.student, 0) + 1
            total = sum(c.score for c in result.graded.cells)
            maxi = sum(c.max_score for c in result.graded.cells)
            out(_line(client, futures, run, job.student,
                      f"{total:.2f}/{maxi:g} on {result.device} ({result.worker}, {result.graded.seconds:.1f} s)"))
            if on_result:
                on_result(result)
    except KeyboardInterrupt:
        run.interrupted = True
        pending = [f for f in futures if not f.done()]
        client.cancel(pending)
        out(f"interrupted: {len(run.results)} student(s) written whole, {len(pending)} not graded "
            "(run the command again to grade them)")
        raise
    finally:
        run.seconds = time.monotonic() - t0
        if close:
            client.close()
        if own is not None:
            own.close()
    out(summary(run))
    return run


def _line(client, futures, run, student, what) -> str:
    """One progress line: done / running / failed over the class, and what each worker runs now."""
    done = len(run.results)
    try:
        processing = client.processing()
        names = {a: w.get("name", a) for a, w in client.scheduler_info().get("workers", {}).items()}
    except Exception:                       # the scheduler is busy or gone: the counts still tell
        processing, names = {}, {}
    keys = {f.key: j.student for f, j in futures.items()}
    per = [f"{names.get(a, a)}: {', '.join(keys.get(k, '?') for k in ks) or 'idle'}"
           for a, ks in sorted(processing.items())]
    running = sum(len(ks) for ks in processing.values())       # running, or queued on a worker behind one
    from .autograde import eta

    head = f"[done {done}/{len(futures)} · running {running} · failed {len(run.failed)}]"
    if getattr(run, "started", None):
        head += eta(run.started, done + len(run.failed), len(futures))
    return f"{head} {student}: {what}" + (f"   ({'; '.join(per)})" if per else "")


def summary(run: ClassRun) -> str:
    """The table at the end: one row per student, then the seconds each device spent."""
    rows = [("student", "points", "device", "worker", "seconds")]
    for student, r in sorted(run.results.items()):
        total = sum(c.score for c in r.graded.cells)
        maxi = sum(c.max_score for c in r.graded.cells)
        rows.append((student, f"{total:.2f} / {maxi:g}", r.device, r.worker, f"{r.graded.seconds:.1f}"))
    for student, why in sorted(run.failed.items()):
        rows.append((student, "FAILED", why[:60], "", ""))
    for student in run.skipped:
        rows.append((student, "unchanged", "", "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    per_device: dict = {}
    for r in run.results.values():
        per_device.setdefault(r.device, []).append(r.graded.seconds)
    lines.append(f"{len(run.results)} graded, {len(run.failed)} failed, {len(run.skipped)} unchanged "
                 f"in {run.seconds:.1f} s; " + "; ".join(f"{d}: {len(s)} in {sum(s):.1f} s"
                                                          for d, s in sorted(per_device.items())))
    return "\n".join(lines)
