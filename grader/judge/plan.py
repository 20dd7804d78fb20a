"""What gets graded: the release notebook with the learner's answers put in, matched by cell id.

From three notebooks — the instructor's source (solutions/, with the hidden tests), its release
(course/) and the learner's submission — a :class:`Plan` says

* ``run``: the cells the sandboxed runner executes, in the release's order: each answer cell
  (nbgrader ``solution``) as the learner wrote it (found by cell id; the release's stub when it is
  missing), every other non-test cell as the release has it (only its definitions: imports,
  functions, classes, assignments; ``%%cuda`` cells whole);
* ``tests``: the graded cells as the source has them (hidden tests included), with their points;
* ``imports``: the source's import statements the judge runs to build its own namespace;
* ``cuda``: the ``%%cuda`` cells, which the judge compiles itself (outside the learner's process);
* ``notes``: what was wrong with the submission's structure, in words a learner understands.

Only the submission's cell sources are read, never its metadata or its outputs: a learner who edits
cell metadata, changes grade flags or duplicates ids changes nothing the grade depends on, and a
notebook saved with large outputs grades as its sources do (the outputs are dropped as they are
parsed). The file must be a regular file, opened without following a link, and at most
:data:`MAX_BYTES`; reading is linear in its size.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..cuda.magic import cell_key

MAX_BYTES = 256 * 2**20           # a submitted notebook larger than this is not read (outputs included)
MAX_CELL_CHARS = 2 * 2**20        # an answer cell larger than this is not run


class Unreadable(ValueError):
    """The submission is not a notebook the grader can read."""


@dataclass
class Plan:
    notebook: str
    run: list = field(default_factory=list)      # {"id", "source", "mode": "answer" | "given" | "cuda"}
    tests: list = field(default_factory=list)    # {"grade_id", "points", "source"}
    imports: str = ""
    cuda: list = field(default_factory=list)     # {"id", "line", "body", "key"}
    notes: list = field(default_factory=list)
    untouched: bool = False                      # every answer cell is the release's stub (or nothing was handed in)
    cells_s: float = 1e9                         # the runner's time for running given cells whole
    run_tests: bool = False                      # the runner runs the release's test cells too (in-notebook timing)

    def to_json(self) -> str:
        return json.dumps({"notebook": self.notebook, "run": self.run, "cuda": self.cuda, "cells_s": self.cells_s,
                           "run_tests": self.run_tests})


def _nbgrader(cell: dict) -> dict:
    md = cell.get("metadata", {}).get("nbgrader", {})
    return md if isinstance(md, dict) else {}


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _without_outputs(obj: dict) -> dict:
    """json object_hook: an output (or an output's data) is dropped as soon as it is parsed, so a
    notebook's outputs never all sit in memory at once."""
    if "output_type" in obj:
        return {}
    if "outputs" in obj:
        obj["outputs"] = []
    return obj


def read_cells(path: Path, trusted: bool) -> list[dict]:
    """The cells of a notebook file as plain dicts, outputs dropped; an untrusted file is read as a
    regular file only (no link followed), within limits, and without nbformat's validation (which can
    be slow on hostile input)."""
    raw = Path(path).read_bytes() if trusted else read_submission(Path(path))
    try:
        nb = json.loads(raw, object_hook=_without_outputs)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise Unreadable(f"it is not valid JSON ({str(exc)[:120]})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise Unreadable("it has no list of cells")
    return [c for c in nb["cells"] if isinstance(c, dict)]


def read_submission(path: Path, limit: int = MAX_BYTES) -> bytes:
    """A submitted file's bytes: a regular file, opened without following a link (``O_NOFOLLOW``),
    at most ``limit`` bytes; else :class:`Unreadable` saying why."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if os.path.islink(path):
            raise Unreadable("it is a symbolic link, not a notebook file: hand in the notebook itself") from None
        raise Unreadable(f"it cannot be opened ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("it is not a regular file")
        if st.st_size > limit:
            raise Unreadable(f"it is {st.st_size / 2**20:.0f} MiB; notebooks over {limit // 2**20} MiB are not graded "
                             "(clear the outputs and save it again)")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise Unreadable(f"it is over {limit // 2**20} MiB")
        return data
    finally:
        os.close(fd)


def _imports(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [ast.get_source_segment(source, n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]


def build(source_nb: Path, release_nb: Path, submission: Path | None, run_tests: bool = False) -> Plan:
    """The plan for one lesson; ``submission`` None grades the untouched release. ``run_tests``: the
    release's graded cells are run in the notebook too (timed there, beside the judge's figures)."""
    plan = Plan(notebook=Path(release_nb).name, run_tests=run_tests)
    answers: dict[str, str] = {}
    if submission is not None:
        counts: dict[str, int] = {}
        for cell in read_cells(submission, trusted=False):
            cid = cell.get("id")
            if isinstance(cid, str) and cell.get("cell_type") == "code":
                counts[cid] = counts.get(cid, 0) + 1
                answers.setdefault(cid, _source(cell))
        for cid, n in counts.items():
            if n > 1:
                plan.notes.append(f"the notebook's structure was changed: cell `{cid}` appears {n} times; "
                                  "the first one was graded")
    imports, stubs = [], []
    for cell in read_cells(release_nb, trusted=True):
        if cell.get("cell_type") != "code":
            continue
        md, cid, src = _nbgrader(cell), cell.get("id"), _source(cell)
        if md.get("grade"):
            if run_tests:                                   # the release's, timed in the notebook
                plan.run.append({"id": cid, "source": src, "mode": "test"})
            continue                                        # tests: the judge's, from the source
        if md.get("solution"):
            if submission is not None and cid not in answers:
                plan.notes.append(f"your answer cell `{md.get('grade_id', cid)}` is missing from the "
                                  "notebook: graded as the untouched exercise")
            stubs.append(src.strip() == answers.get(cid, src).strip())
            src = answers.get(cid, src)
            if len(src) > MAX_CELL_CHARS:
                plan.notes.append(f"your answer cell `{md.get('grade_id', cid)}` is over "
                                  f"{MAX_CELL_CHARS // 2**20} MiB: graded as the untouched exercise")
                src = _source(cell)
            mode = "answer"
        else:
            imports += _imports(src)
            mode = "given"
        if src.lstrip().startswith("%%cuda"):
            line, _, body = src.lstrip().partition("\n")
            plan.cuda.append({"id": cid, "line": line[len("%%cuda"):].strip(), "body": body,
                              "key": cell_key(line[len("%%cuda"):], body)})
            mode = "cuda"
        plan.run.append({"id": cid, "source": src, "mode": mode})
    for cell in read_cells(source_nb, trusted=True):
        md = _nbgrader(cell)
        if cell.get("cell_type") == "code" and md.get("grade"):
            plan.tests.append({"grade_id": md["grade_id"], "points": float(md.get("points", 0)),
                               "source": _source(cell)})
    plan.imports = "\n".join(dict.fromkeys(imports))
    plan.untouched = bool(stubs) and all(stubs)
    return plan
