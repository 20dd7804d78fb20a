"""Running nbgrader: release course/ from solutions/, and autograde notebooks in a scratch course.

The repo root is an nbgrader course directory (see nbgrader_config.py):
``solutions/`` is nbgrader's source, ``course/`` its release. Grading a single
notebook (``python -m grader grade NB``) builds a throwaway course directory
with the same settings, so the learner's copy is graded exactly as an
instructor's ``nbgrader autograde`` would grade it: locked test cells
restored, hidden tests put back, each cell scored.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHAPTERS = ["01_elementwise", "02_reduce", "03_gemm", "04_attention", "05_hopper_blackwell"]
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


def repo_root() -> Path:
    """The course checkout: the folder holding solutions/ (the package's parent, else the cwd)."""
    for cand in (REPO, Path.cwd()):
        if (cand / "solutions").is_dir():
            return cand
    raise FileNotFoundError("cannot find the course's solutions/ folder: run from the course checkout")


def chapters_in(root: Path) -> list[str]:
    return [c for c in CHAPTERS if any((root / "solutions" / c).glob("*.ipynb"))]


def nbgrader(args: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    # the package must be importable from the scratch course's config
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full_env.get("PYTHONPATH", "")]))
    # nbgrader runs `alembic` (its database migrations) as a program: it must be on PATH even
    # when this Python is called by its full path from an environment that was never activated
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
    return written


def make_scratch_course(chapter: str, where: Path, root: Path | None = None) -> Path:
    """A throwaway course directory holding one chapter's sources, released."""
    root = root or repo_root()
    shutil.copytree(root / "solutions" / chapter, where / "solutions" / chapter)
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


def find_lesson(notebook: Path, root: Path | None = None) -> tuple[str, str]:
    """(chapter, lesson file name) of a learner's notebook, matched by file name."""
    root = root or repo_root()
    for ch in CHAPTERS:
        if (root / "solutions" / ch / notebook.name).exists():
            return ch, notebook.name
    raise FileNotFoundError(f"{notebook.name} is not a lesson of this course "
                            f"(looked in {root / 'solutions'}); keep the lesson's file name")


class GradeRun(list):
    """The per-cell grades of one nbgrader run, plus its exit status and log."""

    returncode: int = 0
    log: str = ""


def not_a_notebook(path: Path) -> str | None:
    """Why ``path`` cannot be graded as a notebook (invalid JSON or nbformat), or None if it can."""
    import nbformat

    try:
        nbformat.validate(nbformat.read(path, as_version=4))
    except Exception as exc:  # JSONDecodeError, NotJSONError, ValidationError, UnicodeDecodeError …
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"{type(exc).__name__}: {first}"[:200]
    return None


def _stand_in(course: Path, chapter: str, name: str, why: str) -> dict:
    """The released (untouched) lesson, marked at the top with why it replaces the submission."""
    import nbformat

    nb = nbformat.read(course / "course" / chapter / name, as_version=4)
    note = nbformat.v4.new_markdown_cell(
        f"**This submission could not be read as a notebook ({why}).** It was graded as the "
        "untouched lesson: every graded cell scores 0. Hand in the `.ipynb` file Jupyter saved.")
    nb.cells.insert(0, note)
    return nb


def autograde_many(submissions: dict[str, list[Path]], chapter: str, course: Path,
                   env: dict | None = None) -> dict[str, GradeRun]:
    """Autograde several students' notebooks in ONE nbgrader run; return each student's grades.

    A file that is not a valid notebook (broken JSON, not nbformat) would make nbgrader fail that
    student (exit status 1, no grades): it is replaced by the released lesson, marked with why, so
    the run still exits 0, the gradebook keeps the row (all 0), and the reason says what was wrong.
    """
    import nbformat

    unreadable: dict[tuple[str, str], str] = {}
    for student, notebooks in submissions.items():
        sub = course / "submitted" / student / chapter
        sub.mkdir(parents=True, exist_ok=True)
        for nb in notebooks:
            why = not_a_notebook(nb)
            if why is None:
                shutil.copy(nb, sub / nb.name)
            else:
                unreadable[(student, nb.name)] = why
                nbformat.write(_stand_in(course, chapter, nb.name, why), sub / nb.name)
    args = ["autograde", chapter, "--create", "--force"]
    if len(submissions) == 1:
        args.append(f"--student={next(iter(submissions))}")
    else:   # only this batch: leave the course's other submissions as they were graded
        others = sorted(p.name for p in (course / "submitted").iterdir() if p.name not in submissions)
        if others:
            args.append(f"--CourseDirectory.student_id_exclude={','.join(others)}")
    r = nbgrader(args, cwd=course, env=env)
    runs = {}
    for student, notebooks in submissions.items():
        graded = GradeRun()
        graded.returncode, graded.log = r.returncode, r.stdout + r.stderr
        for nb in notebooks:
            out = course / "autograded" / student / chapter / nb.name
            if not out.exists():
                reason = _first_error_line(r.stdout + r.stderr) or "nbgrader could not grade this notebook"
                graded += [CellGrade(nb.name, "(whole notebook)", 0.0, 0.0, reason)]
                continue
            rows = read_cell_grades(out)
            why = unreadable.get((student, nb.name))
            if why:
                for row in rows:
                    row.reason = f"not a valid notebook ({why}): graded as the untouched lesson"
            graded += rows
        runs[student] = graded
    return runs


def autograde(notebooks: list[Path], chapter: str, course: Path, student: str = "learner",
              env: dict | None = None) -> GradeRun:
    """Submit ``notebooks`` as ``student`` in ``course`` and autograde them; return per-cell grades."""
    return autograde_many({student: list(notebooks)}, chapter, course, env=env)[student]


def _first_error_line(log: str) -> str:
    for line in log.splitlines():
        if "[ERROR]" in line or "Error" in line:
            return ANSI.sub("", line).strip()[:300]
    return ""


def read_cell_grades(autograded_nb: Path) -> list[CellGrade]:
    """Per graded cell: points (as nbgrader scored them) and the reason for lost points (a few lines)."""
    from nbgrader.utils import determine_grade, is_grade, is_solution

    nb = json.loads(autograded_nb.read_text())
    import nbformat

    nb = nbformat.reads(json.dumps(nb), as_version=4)
    rows = []
    exercise = None       # the nearest exercise cell above: the one a graded cell checks
    for cell in nb.cells:
        if cell.cell_type == "code" and is_solution(cell) and not is_grade(cell):
            exercise = cell
        if not is_grade(cell) or cell.cell_type != "code":
            continue
        score, max_score = determine_grade(cell)
        reason = _reason(cell, score, max_score)
        stub = _untouched_cpp_stub(exercise)
        if stub and _failed(cell):
            reason = stub
        rows.append(CellGrade(autograded_nb.name, cell.metadata.nbgrader["grade_id"], float(score or 0.0),
                              float(max_score), reason))
    return rows


def _failed(cell) -> bool:
    """The cell ended in an error (not a tampering verdict, which must stay as it is)."""
    return any(o.output_type == "error" and o.get("ename") != "GraderModified" for o in cell.get("outputs", []))


def _untouched_cpp_stub(cell) -> str | None:
    """"not implemented yet", when ``cell`` is a C++ exercise still exactly as released.

    A graded cell after an untouched ``%%cuda`` stub fails on what the stub lacks (a SASS
    rubric lists the missing instructions); the learner's next step is to write the kernel.
    Untouched = the released cell's checksum (nbgrader's, over source and grading metadata)."""
    from nbgrader.utils import compute_checksum

    from .nbgrader_settings import CPP_STUB

    if cell is None or CPP_STUB not in cell.source:
        return None
    if cell.metadata.get("nbgrader", {}).get("checksum") != compute_checksum(cell):
        return None
    first = cell.source.lstrip().splitlines()[0]
    where = f"the `{first.strip()}` cell" if first.startswith("%%cuda") else f"exercise `{cell.metadata.nbgrader['grade_id']}`"
    return f"not implemented yet: {where} still holds its `{CPP_STUB}` stub. Write the kernel there."


def _reason(cell, score, max_score) -> str:
    for out in cell.get("outputs", []):
        if out.output_type == "error":
            text = ANSI.sub("", "\n".join(out.get("traceback", [])) or f"{out.ename}: {out.evalue}")
            lines = [l for l in text.splitlines() if l.strip()]
            shown = lines[:4] + [l for l in lines[4:] if l.strip().startswith("hint:")][:1]
            return "\n".join(l.rstrip()[:300] for l in shown)
        if out.output_type == "stream" and out.name == "stderr":
            return "the cell wrote to stderr, which nbgrader scores 0: " + out.text.strip().splitlines()[0][:200]
    if score is not None and score < max_score:
        texts = [ANSI.sub("", o.get("text", "")) for o in cell.get("outputs", []) if o.output_type == "stream"]
        last = [l for t in texts for l in t.splitlines() if l.strip()]
        return last[-1][:300] if last else "partial credit"
    return ""


def grade_notebook(notebook: Path, env: dict | None = None) -> list[CellGrade]:
    """Grade one learner notebook exactly as the instructor's autograde would."""
    notebook = notebook.resolve()
    chapter, _ = find_lesson(notebook)
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        course = make_scratch_course(chapter, Path(tmp))
        return autograde([notebook], chapter, course, env=env)


REASON_WIDTH = 100     # the reasons are wrapped to this many columns, under their row


def format_table(rows: list[CellGrade]) -> str:
    """One row per graded cell (points); why points were lost, wrapped and indented beneath it."""
    import textwrap

    width = max([len(r.cell) for r in rows] + [4])
    lines = [f"{'cell':<{width}}   points    (why points were lost: indented under the row)"]
    total = maxi = 0.0
    for r in rows:
        total, maxi = total + r.score, maxi + r.max_score
        lines.append(f"{r.cell:<{width}}  {r.score:>5.2f} / {r.max_score:g}")
        for line in r.reason.splitlines():
            indent = "    " + line[:len(line) - len(line.lstrip())]
            lines += textwrap.wrap(line.strip(), REASON_WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                                   break_long_words=False, break_on_hyphens=False)
    lines.append(f"{'total':<{width}}  {total:>5.2f} / {maxi:g}")
    return "\n".join(lines)
