"""The instructor's class report: what it knows, read from the instructor's side only.

``python -m grader report ASSIGNMENT`` (after ``python -m grader autograde ASSIGNMENT``) gathers,
per student and per graded cell, the points and why points were lost; per speed problem the
class's measured fractions of the peer; and the notebooks that did not grade, with why. It reads

* nbgrader's gradebook (``nbgrader.api.Gradebook``): the points. They are authoritative: where
  a student's ``grading.json`` gives another score (a manual grade, a later edit, a stale file),
  the report says so and shows the gradebook's;
* each student's ``autograded/<student>/<assignment>/grading.json``, which the instructor's own
  process writes while its judge grades (grader.autograde.grading_record): the reasons, the
  notes, and the speed records the judge made (``grader.record.collecting``). Records a learner's
  notebook printed or wrote are never read;
* ``results/scoreboard.json``: the reference solution's fraction per speed problem, with the
  device and date of the run that measured it.

:func:`gather` returns a :class:`ClassReport`; grader.report_page draws it as HTML and PNGs.
"""
from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

NOT_MEASURED_NO_GPU = "no GPU: speed not measured"
TOLERANCE = 1e-6


@dataclass
class Cell:
    notebook: str                     # the notebook's name without .ipynb, as nbgrader names it
    grade_id: str
    score: float | None               # the gradebook's (None: the gradebook has no such grade)
    max_score: float
    reason: str = ""                  # the judge's verdict: why points were lost
    judged: float | None = None       # the score grading.json gives (None: no grading.json)
    manual: bool = False              # the gradebook's score is a manual grade
    problem: str | None = None        # the problem a speed cell times

    @property
    def points(self) -> float:
        return self.score if self.score is not None else (self.judged or 0.0)


@dataclass
class Student:
    name: str
    cells: list = field(default_factory=list)          # Cell
    notes: list = field(default_factory=list)          # "<notebook>: <note>"
    notebooks: list = field(default_factory=list)      # {"notebook", "status", "why", "notes"}
    records: list = field(default_factory=list)        # the judge's speed records (grading.json)
    graded_at: str = ""
    device: str | None = None
    simulator: bool | None = None
    in_gradebook: bool = False
    grading: bool = False                               # a grading.json was found
    submitted: bool = False                             # a submitted/ folder was found

    @property
    def total(self) -> float:
        return sum(c.points for c in self.cells)

    @property
    def max_total(self) -> float:
        return sum(c.max_score for c in self.cells)


@dataclass
class Speed:
    """One speed problem across the class."""
    problem: str
    cells: list = field(default_factory=list)          # the grade ids that time it
    measured: list = field(default_factory=list)       # (student, record), best fraction first
    unmeasured: list = field(default_factory=list)     # (student, why)
    reference: dict | None = None                       # the scoreboard's judge record (+ device, date)
    reference_note: str = ""                            # why no reference line is drawn ("" when it is)
    no_gpu: bool = False                                # nobody measured, and the class was graded without a GPU

    @property
    def devices(self) -> list:
        return sorted({r.get("device") or "?" for _, r in self.measured})

    def common(self, key: str):
        values = [r.get(key) for _, r in self.measured if r.get(key) is not None]
        return Counter(values).most_common(1)[0][0] if values else None


@dataclass
class ClassReport:
    assignment: str
    course: str
    written: str
    students: list = field(default_factory=list)       # Student, by name
    columns: list = field(default_factory=list)        # (notebook, grade_id, max_score): the graded cells in order
    speeds: list = field(default_factory=list)         # Speed
    disagreements: list = field(default_factory=list)  # (student, notebook, grade_id, text)
    not_graded: list = field(default_factory=list)     # (student, notebook, status, why, notes)
    raised: list = field(default_factory=list)         # (student, note): answer cells that raised, graded all the same
    scoreboard: str = ""

    @property
    def devices(self) -> Counter:
        return Counter((s.device or ("no GPU (Numba's CUDA simulator)" if s.simulator else "?"))
                       for s in self.students if s.grading)

    @property
    def graded_dates(self) -> list:
        return sorted({s.graded_at[:10] for s in self.students if s.graded_at})


def stem(name: str) -> str:
    return name[:-6] if name.endswith(".ipynb") else name


def _source_columns(cd, assignment: str) -> list:
    """(notebook, grade_id, points) of every graded cell of the instructor's source, in order."""
    import nbformat

    source = Path(cd.format_path(cd.source_directory, ".", assignment))
    cols = []
    for path in sorted(source.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            md = cell.metadata.get("nbgrader", {})
            if md.get("grade") and md.get("grade_id"):
                cols.append((path.stem, md["grade_id"], float(md.get("points", 0))))
    return cols


def _gradebook(cd, assignment: str) -> tuple[dict, set]:
    """({student: {(notebook, grade_id): (score, max, manual)}}, every student the gradebook knows)."""
    from nbgrader.api import Gradebook, MissingEntry

    out, roster = {}, set()
    with Gradebook(cd.db_url) as gb:
        roster = {s.id for s in gb.students}
        for student in sorted(roster):
            try:
                sub = gb.find_submission(assignment, student)
            except MissingEntry:
                continue
            out[student] = {(nb.name, g.name): (None if g.score is None else float(g.score), float(g.max_score),
                                                g.manual_score is not None)
                            for nb in sub.notebooks for g in nb.grades}
    return out, roster


def _read_grading(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("notebooks"), list) else None


def reference_for(problem: str, scoreboard: Path) -> dict | None:
    """The judge's last record of ``problem`` in the scoreboard, with its chapter's device and date."""
    from .scoreboard import load

    found = None
    for entry in load(scoreboard)["chapters"].values():
        for row in entry.get("records", []):
            if row.get("kind") == "speed" and row.get("by") == "judge" and row.get("problem") == problem:
                found = {**row, "device": row.get("device") or entry.get("device", "?"), "date": entry.get("date", "?")}
    return found


def gather(course: Path, assignment: str, scoreboard: Path | None = None) -> ClassReport:
    """Everything the report shows, from the gradebook, the grading.json files and the scoreboard."""
    from .judge.gradebook import course_directory, grading_path
    from .scoreboard import results_path

    course = Path(course).resolve()
    scoreboard = Path(scoreboard) if scoreboard else results_path()
    cd = course_directory(course)
    report = ClassReport(assignment, str(course), time.strftime("%Y-%m-%d %H:%M"), scoreboard=str(scoreboard))
    book, roster = _gradebook(cd, assignment)
    autograded = Path(cd.format_path(cd.autograded_directory, "*", assignment)).parent.parent
    submitted = Path(cd.format_path(cd.submitted_directory, "*", assignment)).parent.parent
    on_disk = {p.name for root in (autograded, submitted) if root.is_dir() for p in root.iterdir()
               if (p / assignment).is_dir()}
    columns = _source_columns(cd, assignment)
    gradings = {}
    for name in sorted(set(book) | roster | on_disk):
        gradings[name] = _read_grading(grading_path(cd, name, assignment))
    for data in gradings.values():                        # cells a grading.json knows that the source lacks
        for nb in (data or {}).get("notebooks", []):
            for c in nb.get("cells", []):
                key = (stem(nb["notebook"]), c["grade_id"])
                if key not in {(n, g) for n, g, _ in columns}:
                    columns.append((*key, float(c.get("max_score", 0))))
    report.columns = columns
    for name, data in gradings.items():
        report.students.append(_student(report, name, book.get(name), data, columns,
                                        (submitted / name / assignment).is_dir()))
    known = {(c.notebook, c.grade_id): c.problem for s in report.students for c in s.cells if c.problem}
    for s in report.students:                # a notebook that could not be read names no problem: the others do
        for c in s.cells:
            c.problem = c.problem or known.get((c.notebook, c.grade_id))
    report.speeds = _speeds(report, scoreboard)
    return report


def _student(report: ClassReport, name: str, rows: dict | None, data: dict | None, columns: list,
             submitted: bool) -> Student:
    s = Student(name, in_gradebook=rows is not None, grading=data is not None, submitted=submitted)
    judged, reasons, problems = {}, {}, {}
    if data:
        s.graded_at, s.device, s.simulator = data.get("graded_at", ""), data.get("device"), data.get("simulator")
        for nb in data["notebooks"]:
            book = stem(nb.get("notebook", "?"))
            for c in nb.get("cells", []):
                judged[(book, c["grade_id"])] = float(c["score"])
                reasons[(book, c["grade_id"])] = c.get("reason", "")
            problems.update({(book, gid): p for gid, p in nb.get("speed_cells", {}).items()})
            s.records += [{**r, "notebook": book} for r in nb.get("records", [])
                          if r.get("kind") == "speed" and r.get("by") == "judge"]
            s.notes += [f"{nb.get('notebook')}: {n}" for n in nb.get("notes", [])]
            s.notebooks.append({"notebook": book, "status": nb.get("status", "graded"), "why": nb.get("why", ""),
                                "notes": nb.get("notes", [])})
            if nb.get("status", "graded") != "graded":
                report.not_graded.append((name, book, nb["status"], nb.get("why", ""), nb.get("notes", [])))
            else:
                report.raised += [(name, f"{book}: {n}") for n in nb.get("notes", [])
                                  if n.startswith("cell `") and not n.startswith("cell `(notebook)`")]
    if rows is None and data is None:
        why = "collected, not autograded yet" if submitted else "no submission collected"
        report.not_graded.append((name, "(all)", "not graded", why, []))
        return s
    if rows is None:
        report.disagreements.append((name, "(all)", "", "the gradebook has no submission of this student, "
                                     "but grading.json has grades: the points shown are the judge's"))
    elif data is None:
        report.disagreements.append((name, "(all)", "", "no grading.json for this student: the points are the "
                                     "gradebook's, the reasons and speed figures are unknown (graded by another tool?)"))
    for book, gid, points in columns:
        key = (book, gid)
        score, max_score, manual = (rows or {}).get(key, (None, points, False))
        cell = Cell(book, gid, score, max_score, reasons.get(key, ""), judged.get(key), manual, problems.get(key))
        if rows is not None and key not in rows and key in judged:
            report.disagreements.append((name, book, gid, f"not in the gradebook; the judge gave {judged[key]:g}"))
        elif score is not None and cell.judged is not None and abs(score - cell.judged) > TOLERANCE:
            what = "a manual grade" if manual else "the gradebook's score"
            report.disagreements.append((name, book, gid, f"{what} is {score:g}, the judge's grading.json says "
                                         f"{cell.judged:g}: the report shows the gradebook's {score:g}"))
        s.cells.append(cell)
    return s


def _speeds(report: ClassReport, scoreboard: Path) -> list:
    problems: dict[str, Speed] = {}
    for s in report.students:
        for c in s.cells:
            if c.problem:
                sp = problems.setdefault(c.problem, Speed(c.problem))
                if c.grade_id not in sp.cells:
                    sp.cells.append(c.grade_id)
        for r in s.records:
            problems.setdefault(r.get("problem", "?"), Speed(r.get("problem", "?")))
    for name, sp in problems.items():
        for s in report.students:
            if not s.grading:
                continue
            mine = [r for r in s.records if r.get("problem") == name]
            if mine:
                sp.measured.append((s.name, mine[-1]))
                continue
            cell = next((c for c in s.cells if c.problem == name), None)
            if cell is None:
                continue
            why = NOT_MEASURED_NO_GPU if s.simulator else ((cell.reason.strip().splitlines() or ["not timed"])[0])
            sp.unmeasured.append((s.name, why))
        sp.measured.sort(key=lambda m: (-(m[1].get("fraction") or 0.0), m[0]))
        sp.no_gpu = not sp.measured and bool(sp.unmeasured) and all(w == NOT_MEASURED_NO_GPU for _, w in sp.unmeasured)
        sp.reference = reference_for(name, scoreboard)
        if sp.reference is None:
            sp.reference_note = f"no record of the reference solution for this problem in {scoreboard.name}"
        elif sp.measured and sp.reference["device"] not in sp.devices:
            sp.reference_note = (f"the reference solution was recorded on {sp.reference['device']} "
                                 f"({sp.reference['date']}), not on this class's device: not drawn")
        elif not sp.measured:
            sp.reference_note = (f"the reference solution: {100 * sp.reference['fraction']:.0f}% of its peer on "
                                 f"{sp.reference['device']} ({sp.reference['date']})")
    return [problems[k] for k in sorted(problems)]
