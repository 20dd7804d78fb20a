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

Only the submission's cell sources are read, never its metadata: a learner who edits cell metadata,
changes grade flags or duplicates ids changes nothing the grade depends on. The reading is linear
in the notebook's size and bounded (:data:`MAX_BYTES`).
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..cuda.magic import cell_key

MAX_BYTES = 64 * 2**20            # a submitted notebook larger than this is not read
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

    def to_json(self) -> str:
        return json.dumps({"notebook": self.notebook, "run": self.run, "cuda": self.cuda})


def _nbgrader(cell: dict) -> dict:
    md = cell.get("metadata", {}).get("nbgrader", {})
    return md if isinstance(md, dict) else {}


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def read_cells(path: Path, trusted: bool) -> list[dict]:
    """The cells of a notebook file as plain dicts; an untrusted file is read within limits and
    without nbformat's validation (which can be slow on hostile input)."""
    raw = Path(path).read_bytes() if trusted else _bounded_read(Path(path))
    try:
        nb = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Unreadable(f"it is not valid JSON ({str(exc)[:120]})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise Unreadable("it has no list of cells")
    return [c for c in nb["cells"] if isinstance(c, dict)]


def _bounded_read(path: Path) -> bytes:
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise Unreadable(f"it is {size / 2**20:.0f} MiB; notebooks over {MAX_BYTES // 2**20} MiB are not graded")
    return path.read_bytes()


def _imports(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [ast.get_source_segment(source, n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]


def build(source_nb: Path, release_nb: Path, submission: Path | None) -> Plan:
    """The plan for one lesson; ``submission`` None grades the untouched release."""
    plan = Plan(notebook=Path(release_nb).name)
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
    imports = []
    for cell in read_cells(release_nb, trusted=True):
        if cell.get("cell_type") != "code":
            continue
        md, cid, src = _nbgrader(cell), cell.get("id"), _source(cell)
        if md.get("grade"):
            continue                                        # tests: the judge's, from the source
        if md.get("solution"):
            if submission is not None and cid not in answers:
                plan.notes.append(f"your answer cell `{md.get('grade_id', cid)}` is missing from the "
                                  "notebook: graded as the untouched exercise")
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
    return plan
