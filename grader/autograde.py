"""Releasing lessons and grading them.

The repo root is an nbgrader course directory (nbgrader_config.py): ``solutions/`` is the source,
``course/`` the release, submissions and the gradebook live under ``.nbgrader/``.

* :func:`release` — regenerate course/ from solutions/ (nbgrader generate_assignment: no learner
  code runs).
* :func:`grade_notebook` — ``python -m grader grade NB``: a learner grades their own notebook.
* :func:`autograde_assignment` — ``python -m grader autograde ASSIGNMENT``: an instructor grades every
  collected submission and writes the gradebook, and per student a ``grading.json`` beside the
  autograded notebooks: what the judge found (cells, reasons, notes, its speed measurements), read
  by ``python -m grader report`` (grader.report).
* :func:`grade_student` — the unit of work of a class: one student's submission (a :class:`StudentJob`
  of bytes, made by :func:`collect`) graded into a :class:`StudentResult`, writing nothing; run here
  one after another, or as one Dask task per student (grader.cluster).

Both grade through the judge (grader.judge): each submission's code runs in its own sandbox, and
points come from a process that runs none of it. ``nbgrader autograde`` itself, which would run
every submission in the instructor's own process, is switched off in this course
(grader.nbgrader_settings).
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .paths import CHAPTERS, PACKAGE, chapters_in, repo_root  # noqa: F401  (chapters_in: callers)

ANSI = re.compile(r"\x1b\[[0-9;]*m")

SCRATCH_CONFIG = '''\
import os
c = get_config()
here = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.root = here
c.CourseDirectory.course_id = "gpu-kernels"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "course"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(here, "gradebook.db")
from grader.nbgrader_settings import apply
apply(c)
'''


def nbgrader(args: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE.parent), full_env.get("PYTHONPATH", "")]))
    # nbgrader runs `alembic` (its database migrations) as a program: it must be on PATH even when
    # this Python is called by its full path from an environment that was never activated
    full_env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), full_env.get("PATH", "")])
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True)


def release(root: Path | None = None, chapters: list[str] | None = None) -> list[Path]:
    """Regenerate course/<chapter>/ from solutions/<chapter>/ with nbgrader generate_assignment."""
    root = root or repo_root()
    (root / ".nbgrader").mkdir(exist_ok=True)
    written = []
    for ch in chapters or chapters_in(root):
        r = nbgrader(["generate_assignment", ch, "--force"], cwd=root)
        if r.returncode != 0:
            raise RuntimeError(f"nbgrader generate_assignment {ch} failed:\n{r.stdout}\n{r.stderr}")
        written += sorted((root / "course" / ch).glob("*.ipynb"))
    written += release_readables(root)
    return written


def release_readables(root: Path) -> list[Path]:
    """Copies a learner's lab (opened on course/) can open: the headers the compiled cells include
    (course/include/) and the glossary (course/GLOSSARY.md). Generated like the notebooks."""
    out, include = [], root / "course" / "include"
    include.mkdir(parents=True, exist_ok=True)
    for header in sorted((PACKAGE / "include").glob("*.cuh")):
        target = include / header.name
        target.write_text(f"// generated from grader/include/{header.name} by `python -m grader release`: "
                          "read it here, edit it there\n" + header.read_text())
        out.append(target)
    glossary = PACKAGE.parent / "docs" / "GLOSSARY.md"
    if glossary.is_file():
        target = root / "course" / "GLOSSARY.md"
        target.write_text(glossary.read_text())
        out.append(target)
    return out


def make_scratch_course(chapter: str, where: Path, root: Path | None = None, lessons: list[str] | None = None) -> Path:
    """A throwaway course directory holding one chapter's sources (only ``lessons``, notebook file
    names, where given), released (its own gradebook)."""
    root = root or repo_root()
    if lessons is None:
        shutil.copytree(root / "solutions" / chapter, where / "solutions" / chapter)
    else:
        (where / "solutions" / chapter).mkdir(parents=True)
        for name in lessons:
            shutil.copy(root / "solutions" / chapter / name, where / "solutions" / chapter / name)
    (where / "nbgrader_config.py").write_text(SCRATCH_CONFIG)
    r = nbgrader(["generate_assignment", chapter, "--force"], cwd=where)
    if r.returncode != 0:
        raise RuntimeError(f"nbgrader generate_assignment failed:\n{r.stdout}\n{r.stderr}")
    return where


@dataclass
class CellGrade:
    notebook: str
    cell: str
    score: float
    max_score: float
    reason: str = ""


@dataclass
class Graded:
    """One student's grades for one assignment."""
    student: str
    cells: list = field(default_factory=list)       # CellGrade
    notes: list = field(default_factory=list)       # "<notebook>: <note>"
    seconds: float = 0.0


def find_lesson(notebook: Path, root: Path | None = None) -> tuple[str, str]:
    """(chapter, lesson file name) of a learner's notebook, matched by file name."""
    root = root or repo_root()
    for ch in CHAPTERS:
        if (root / "solutions" / ch / notebook.name).exists():
            return ch, notebook.name
    raise FileNotFoundError(f"{notebook.name} is not a lesson of this course "
                            f"(looked in {root / 'solutions'}); keep the lesson's file name")


def grade_lesson(source_nb: Path, release_nb: Path, submission: Path | None, sandbox, *, feedback: bool,
                 gpu: bool | None = None, env: dict | None = None, records: list | None = None,
                 time_in_notebook: bool = False, shortcut: bool = True, progress=None):
    """(NotebookGrade, the executed notebook with the judge's verdicts) for one lesson.

    The runner's one execution of the notebook gives both the verdicts' definitions and the
    feedback's outputs (``feedback=False``: the feedback notebook keeps no outputs). ``records``: a
    list that receives what the executed notebook recorded (closing plots; with
    ``time_in_notebook``, its own speed cells too, timed in the learner's process beside the
    judge's) — for the course's own reference notebooks only."""
    from .judge import feedback as fb
    from .judge.judge import grade
    from .judge.sandbox import SCRATCH

    extra = dict(env or {})
    if records is not None:
        extra["GRADER_RECORD"] = f"{SCRATCH}/records.jsonl"
    if time_in_notebook:
        extra.update({"GRADER_JUDGED": "0", "GRADER_RUNNER": "0"})
    result = grade(source_nb, release_nb, submission, sandbox, gpu=gpu, env=extra, run_tests=time_in_notebook,
                   shortcut=shortcut, progress=progress)
    outputs, skipped, recorded = fb.clean_outputs(result.outputs) if feedback else ({}, [], [])
    result.outputs = None
    if records is not None:
        records += recorded
    nb = fb.feedback_notebook(release_nb, result.plan, outputs, skipped)
    return result, fb.merge(nb, release_nb, result, result.notes)


def _cells(result) -> list[CellGrade]:
    return [CellGrade(result.notebook, v.grade_id, v.score, v.max_score, v.reason) for v in result.verdicts]


def grade_notebook(notebook: Path, sandbox=None, feedback: bool = False) -> Graded:
    """Grade one learner notebook as the instructor's autograde would (``python -m grader grade``)."""
    from .judge.sandbox import choose

    from .judge.sandbox import hide

    notebook = notebook.absolute()
    chapter, name = find_lesson(notebook)
    root = repo_root()
    hide(root)
    hide(notebook.parent.resolve())
    result, _ = grade_lesson(root / "solutions" / chapter / name, root / "course" / chapter / name, notebook,
                             sandbox or choose(), feedback=feedback)
    return Graded(student="you", cells=_cells(result), notes=[f"{name}: {n}" for n in result.notes],
                  seconds=result.seconds)


@dataclass
class StudentJob:
    """One student's submission of one assignment, as bytes: everything a worker needs to grade it,
    on this machine or on any node of a cluster (no shared folder needed).

    ``lessons`` maps each lesson's file name to its (source, release) notebooks; ``submitted`` maps a
    handed-in lesson to its bytes, or to why it was refused before anything read it (a symbolic link,
    not a regular file, over the size limit: grader.judge.plan.read_submission). ``limits`` are the host's
    ``$GRADER_JUDGE_*`` deadlines, applied in the worker. ``key`` is the content hash (grader.ledger)."""
    student: str
    assignment: str
    lessons: dict
    submitted: dict
    feedback: bool = True
    env: dict = field(default_factory=dict)
    limits: dict = field(default_factory=dict)
    sandbox: object = None          # a sandbox object, or its name ("bwrap", "none"; None: the worker chooses)
    key: str = ""
    hidden: list = field(default_factory=list)    # course folders no sandbox may see (grader.judge.sandbox.hide)


@dataclass
class StudentResult:
    """What grading a StudentJob gives back to the host: enough to write the gradebook."""
    student: str
    key: str
    graded: Graded
    grades: list                     # NotebookGrade per lesson (their plans dropped)
    notebooks: dict                  # lesson file name -> feedback notebook (JSON)
    device: str = ""                 # the GPU the speed cells ran on (and their peers), or the simulator
    worker: str = ""                 # host:pid of the process that graded it
    grader: str = ""                 # the grader package's digest there (grader.ledger.grader_digest)
    grading: dict = field(default_factory=dict)   # grading.json: what the judge found (grading_record)
    span: tuple = ()                 # (start, end) of this grading on the worker's clock (time.time())


def collect(course: Path, assignment: str, students: list[str] | None = None, *, feedback: bool = True,
            env: dict | None = None, sandbox=None) -> tuple[object, list[StudentJob]]:
    """(nbgrader's CourseDirectory, one StudentJob per collected submission of ``assignment``)."""
    from .judge.gradebook import course_directory
    from .judge.plan import MAX_BYTES, Unreadable, read_submission
    from .ledger import content_key

    cd = course_directory(course)
    source_dir = Path(cd.format_path(cd.source_directory, ".", assignment))
    release_dir = Path(cd.format_path(cd.release_directory, ".", assignment))
    lessons = {p.name: (p.read_bytes(), (release_dir / p.name).read_bytes())
               for p in sorted(source_dir.glob("*.ipynb"))}
    submitted_root = Path(cd.format_path(cd.submitted_directory, "*", assignment)).parent.parent
    found = sorted(p.name for p in submitted_root.iterdir() if (p / assignment).is_dir()) if submitted_root.is_dir() else []
    limits = {k: v for k, v in os.environ.items() if k.startswith("GRADER_JUDGE_")}
    limits["GRADER_RUN_SECRET"] = secrets.token_hex(32)   # this run's seeds: the same hidden cases for every student
    jobs = []
    for student in (students or found):
        folder = Path(cd.format_path(cd.submitted_directory, student, assignment))
        submitted = {}
        linked = _linked_component(folder, submitted_root)
        for name in lessons:
            sub = folder / name
            if linked:
                if os.path.lexists(sub):
                    submitted[name] = f"its folder {linked} is a symbolic link: only files inside the student's own folder are graded"
                continue
            if not os.path.lexists(sub):
                continue
            try:
                submitted[name] = read_submission(sub, MAX_BYTES)
            except Unreadable as exc:
                submitted[name] = str(exc)
        job = StudentJob(student, assignment, lessons, submitted, feedback, dict(env or {}), limits, sandbox,
                         hidden=[str(Path(course).resolve())])
        job.key = content_key(job)
        jobs.append(job)
    return cd, jobs


def _linked_component(folder: Path, top: Path) -> str:
    """The first component of ``folder`` below ``top`` that is a symbolic link ("" if none)."""
    try:
        rel = folder.relative_to(top)
    except ValueError:
        return str(folder)
    here = top
    for part in rel.parts:
        here = here / part
        if here.is_symlink():
            return str(here.relative_to(top))
    return ""


def grade_student(job: StudentJob, progress=None) -> StudentResult:
    """Grade one student's submission (every lesson of the assignment) through the sandbox and the
    judge, and return the grades; writes nothing outside a temporary folder. The one unit of work of
    both ``autograde_assignment`` (here, one after another) and grader.cluster (a Dask task)."""
    import socket

    from .backend import SIMULATOR
    from .judge.build import BuildAhead
    from .judge.sandbox import choose, hide
    from .ledger import grader_digest
    from .record import collecting

    started = time.time()
    for folder in job.hidden:
        hide(folder)
    sandbox = job.sandbox if job.sandbox is not None and not isinstance(job.sandbox, str) else choose(job.sandbox)
    saved = {k: os.environ.get(k) for k in job.limits}
    os.environ.update(job.limits)                  # the host's deadlines bound this worker's judge
    try:
        graded, notebooks, results, measured, subs = Graded(job.student), {}, [], [], {}
        with tempfile.TemporaryDirectory(prefix="student-") as tmp, BuildAhead(sandbox) as ahead:
            for name, (source, release) in job.lessons.items():
                folder = Path(tmp) / Path(name).stem        # each notebook keeps the lesson's file name
                for part, data in (("source", source), ("release", release)):
                    (folder / part).mkdir(parents=True)
                    (folder / part / name).write_bytes(data)
                got = job.submitted.get(name)
                if got is not None and not isinstance(got, str):     # a str: refused when it was collected
                    (folder / "submitted").mkdir()
                    subs[name] = folder / "submitted" / name
                    subs[name].write_bytes(got)
                    ahead.add(folder / "source" / name, folder / "release" / name, subs[name])
            for name in job.lessons:
                folder = Path(tmp) / Path(name).stem
                sub, got = subs.get(name), job.submitted.get(name)
                with collecting() as rows:             # what this process's judge records, nothing else
                    if isinstance(got, str):            # refused when it was collected: say why, run nothing
                        from .judge.judge import refused

                        result = refused(folder / "source" / name, folder / "release" / name, got)
                        nb = _refused_feedback(folder / "release" / name, result)
                    else:
                        if progress:
                            progress(f"{job.student}: {name}")
                        result, nb = grade_lesson(folder / "source" / name, folder / "release" / name, sub,
                                                  sandbox, feedback=job.feedback, env=job.env,
                                                  progress=(lambda line: progress(f"    {line}")) if progress else None)
                measured.append(rows)
                if got is None:
                    result.notes.append("not handed in: graded as the untouched lesson")
                    for v in result.verdicts:
                        v.score, v.reason = 0.0, "the notebook was not handed in"
                result.plan = None                          # not needed past here, and not sent back
                results.append(result)
                notebooks[name] = nb
                graded.cells += _cells(result)
                graded.notes += [f"{name}: {n}" for n in result.notes]
                graded.seconds += result.seconds
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    device = device_name()
    grading = grading_record(job.student, job.assignment, results, measured,
                             handed_in=[name in job.submitted for name in job.lessons],
                             device=None if SIMULATOR else device, simulator=bool(SIMULATOR), sandbox=sandbox.name)
    return StudentResult(job.student, job.key, graded, results, notebooks, device,
                         f"{socket.gethostname()}:{os.getpid()}", grader_digest(), grading, (started, time.time()))


def failed_student(job: StudentJob, why: str) -> StudentResult:
    """A student whose grading failed: every cell of every lesson 0 with ``why`` (a row, not a gap)."""
    from .judge.judge import refused
    from .ledger import grader_digest

    graded, results, notebooks = Graded(job.student), [], {}
    with tempfile.TemporaryDirectory(prefix="student-") as tmp:
        for name, (source, release) in job.lessons.items():
            folder = Path(tmp) / Path(name).stem
            for part, data in (("source", source), ("release", release)):
                (folder / part).mkdir(parents=True)
                (folder / part / name).write_bytes(data)
            result = refused(folder / "source" / name, folder / "release" / name, why, unreadable=False)
            result.runner_gone = why
            notebooks[name] = _refused_feedback(folder / "release" / name, result)
            result.plan = None
            results.append(result)
            graded.cells += _cells(result)
            graded.notes += [f"{name}: {n}" for n in result.notes]
    grading = grading_record(job.student, job.assignment, results, [[] for _ in results],
                             handed_in=[name in job.submitted for name in job.lessons], device=None,
                             simulator=False, sandbox=str(getattr(job.sandbox, "name", job.sandbox)))
    return StudentResult(job.student, job.key, graded, results, notebooks, "", "", grader_digest(), grading)


def _refused_feedback(release_nb: Path, result) -> dict:
    from .judge import feedback as fb

    return fb.merge(fb.feedback_notebook(release_nb, result.plan), release_nb, result, result.notes)


def device_name() -> str:
    """The GPU this process grades on (CUDA_VISIBLE_DEVICES pins it), or the simulator."""
    from .backend import SIMULATOR

    if SIMULATOR:
        return "simulator (CPU)"
    from .device import info

    pinned = os.environ.get("CUDA_VISIBLE_DEVICES")
    return info().name + (f" [CUDA_VISIBLE_DEVICES={pinned}]" if pinned else "")


def autograde_assignment(course: Path, assignment: str, students: list[str] | None = None, sandbox=None,
                         feedback: bool = True, env: dict | None = None, on_result=None,
                         force: bool = False, progress=None) -> dict[str, Graded]:
    """Grade every collected submission of ``assignment`` in the nbgrader course at ``course``, one
    after another in this process, and write the gradebook (one writer: this process). A notebook a
    student did not hand in scores 0. A submission whose content key (grader.ledger) is the one
    recorded at its last grading is skipped unless ``force``; grader.cluster does the same on Dask."""
    from .judge.sandbox import choose
    from .ledger import needs_grading, record

    cd, jobs = collect(course, assignment, students, feedback=feedback, env=env, sandbox=sandbox or choose())
    out = {}
    todo = [job for job in jobs if force or needs_grading(cd, job)]
    if progress and len(todo) < len(jobs):
        progress(f"{len(jobs) - len(todo)} submission(s) unchanged since their last grading: not graded again")
    start = time.monotonic()
    for k, job in enumerate(todo):
        if progress:
            progress(f"[{k + 1}/{len(todo)}] {job.student}{eta(start, k, len(todo))}")
        try:
            result = grade_student(job, progress=progress)
        except Exception as exc:              # one student's failure is that student's row, never the batch's
            result = failed_student(job, f"grading failed: {type(exc).__name__}: {str(exc)[:300]}")
        record(cd, assignment, result)
        out[job.student] = result.graded
        if on_result:
            on_result(result.graded)
    return out


def eta(start: float, done: int, total: int, workers: int = 1) -> str:
    """", about N min left" once something is done (the mean time so far, over the workers)."""
    if done <= 0 or done >= total:
        return ""
    left = (time.monotonic() - start) / done * (total - done)
    return f"  (about {left / 60:.0f} min left)" if left >= 90 else f"  (about {left:.0f} s left)"


GRADING_FORMAT = 1


def grading_record(student: str, assignment: str, results: list, records: list, handed_in: list, *,
                   device: str | None, simulator: bool, sandbox: str) -> dict:
    """What ``grading.json`` holds for one student: per notebook its status, each graded cell's
    points and reason, the notes, the seconds, which cells time which problem, and the records
    the judge made while grading it (``records[i]`` for ``results[i]``; its speed measurements)."""
    books = []
    for result, rows, given in zip(results, records, handed_in):
        if not given:
            status, why = "not handed in", "the notebook was not handed in"
        elif result.unreadable:
            status, why = "unreadable", result.unreadable
        elif result.runner_gone:
            status, why = "runner stopped", result.runner_gone
        else:
            status, why = "graded", ""
        books.append({"notebook": result.notebook, "status": status, "why": why,
                      "cells": [{"grade_id": v.grade_id, "score": float(v.score), "max_score": float(v.max_score),
                                 "reason": ANSI.sub("", v.reason)} for v in result.verdicts],
                      "speed_cells": dict(result.speed_cells), "records": list(rows), "notes": list(result.notes),
                      "seconds": round(result.seconds, 2)})
    return {"format": GRADING_FORMAT, "written_by": "python -m grader autograde (the instructor's process)",
            "student": student, "assignment": assignment, "graded_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "device": device, "simulator": simulator, "sandbox": sandbox,
            "seconds": round(sum(r.seconds for r in results), 2), "notebooks": books}


REASON_WIDTH = 100     # the reasons are wrapped to this many columns, under their row


def format_table(rows: list[CellGrade], notes: list | None = None) -> str:
    """One row per graded cell (points); why points were lost, wrapped and indented beneath it;
    then the notes on the submission (its structure, its cells' errors)."""
    import textwrap

    width = max([len(r.cell) for r in rows] + [4])
    lines = [f"{'cell':<{width}}   points    (why points were lost: indented under the row)"]
    total = maxi = 0.0
    for r in rows:
        total, maxi = total + r.score, maxi + r.max_score
        lines.append(f"{r.cell:<{width}}  {r.score:>5.2f} / {r.max_score:g}")
        for line in ANSI.sub("", r.reason).splitlines()[:12]:
            indent = "    " + line[:len(line) - len(line.lstrip())]
            lines += textwrap.wrap(line.strip(), REASON_WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                                   break_long_words=False, break_on_hyphens=False)
    lines.append(f"{'total':<{width}}  {total:>5.2f} / {maxi:g}")
    lines += [f"note: {n}" for n in notes or []]
    return "\n".join(lines)


def read_cell_grades(autograded_nb: Path) -> list[CellGrade]:
    """Per graded cell of an autograded notebook: the points nbgrader reads from its outputs."""
    import nbformat
    from nbgrader.utils import determine_grade, is_grade

    nb = nbformat.reads(json.dumps(json.loads(autograded_nb.read_text())), as_version=4)
    rows = []
    for cell in nb.cells:
        if cell.cell_type == "code" and is_grade(cell):
            score, max_score = determine_grade(cell)
            rows.append(CellGrade(autograded_nb.name, cell.metadata.nbgrader["grade_id"], float(score or 0.0),
                                  float(max_score)))
    return rows
