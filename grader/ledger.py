"""What the host knows about past gradings: content keys, and writing one student's grades whole.

* :func:`content_key` — the hash of what decides a grade: the submitted notebooks' bytes, the
  assignment's source and release notebooks, the grading options and the grader itself
  (:func:`grader_digest`: its version and every file of the package). Re-running
  ``python -m grader autograde`` grades only the submissions whose key changed.
* :func:`record` — the only way a class's grades are written: nbgrader's gradebook and autograded/
  (grader.judge.gradebook.save), then the key, in ``autograded/<student>/<assignment>/.grader-key``.
  Ctrl-C is held off while one student is written, so the gradebook holds each student whole or not
  at all; a student whose key was not written yet is graded again on the next run.

Only the host process calls these (one writer); workers only compute grades (grader.autograde).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import signal
import threading
from functools import lru_cache
from pathlib import Path

from .paths import PACKAGE

KEY_FILE = ".grader-key"


@lru_cache(maxsize=1)
def grader_digest() -> str:
    """The grader's version and a hash of every file of the package (what grades depend on)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("gpu-kernel-course")
    except PackageNotFoundError:
        ver = "unknown"
    h = hashlib.sha256(ver.encode())
    for p in sorted(PACKAGE.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".cuh", ".json", ".js"):
            h.update(p.relative_to(PACKAGE).as_posix().encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    return f"{ver}+{h.hexdigest()[:16]}"


def content_key(job) -> str:
    """The hash of a StudentJob's content: its submitted notebooks (bytes, or size when over the
    limit), the source and release notebooks, the options that change the result, and the grader."""
    h = hashlib.sha256()

    def put(*parts):
        for part in parts:
            data = part if isinstance(part, bytes) else str(part).encode()
            h.update(len(data).to_bytes(8, "little") + data)

    put("grader", grader_digest(), "assignment", job.assignment, "feedback", bool(job.feedback),
        "env", json.dumps(job.env, sort_keys=True))
    for name, (source, release) in sorted(job.lessons.items()):
        put("lesson", name, source, release)
        got = job.submitted.get(name)
        if got is None:
            put("absent")
        elif isinstance(got, int):
            put("oversize", got)
        else:
            put("submitted", got)
    return h.hexdigest()


def key_path(coursedir, student: str, assignment: str) -> Path:
    return Path(coursedir.format_path(coursedir.autograded_directory, student, assignment)) / KEY_FILE


def recorded_key(coursedir, student: str, assignment: str) -> str | None:
    try:
        return key_path(coursedir, student, assignment).read_text().strip() or None
    except OSError:
        return None


def needs_grading(coursedir, job) -> bool:
    """False when the gradebook already holds this exact content's grades."""
    return recorded_key(coursedir, job.student, job.assignment) != job.key


@contextlib.contextmanager
def interrupts_held():
    """Ctrl-C (SIGINT) waits until the block ends, then raises KeyboardInterrupt (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda *_: caught.append(True))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def record(coursedir, assignment: str, result) -> None:
    """Write one StudentResult: the gradebook's rows, autograded/ notebooks and grading.json, then its key."""
    from .judge.gradebook import save, save_grading, timestamp_of

    with interrupts_held():
        key_path(coursedir, result.student, assignment).unlink(missing_ok=True)
        save(coursedir, assignment, result.student, result.grades, result.notebooks,
             timestamp_of(coursedir, result.student, assignment))
        if result.grading:          # grading.json, read by the class report (grader.report)
            save_grading(coursedir, assignment, result.student, result.grading)
        path = key_path(coursedir, result.student, assignment)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(result.key + "\n")
        tmp.replace(path)
