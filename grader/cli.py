"""``python -m grader``: doctor | grade NB | autograde ASSIGNMENT | report ASSIGNMENT | release | scoreboard"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .paths import COURSE_ENV, NOT_FOUND, find_course, is_course, repo_root


def course_for(notebook: Path, course: Path | None, named: str | None = None) -> tuple[Path | None, str]:
    """(the course folder to grade ``notebook`` against, or None and why): ``--course`` when given,
    else ``$GRADER_COURSE`` (``named``), else the nearest folder above the notebook holding
    solutions/ and course/, else the checkout the grader runs from (grader.paths.repo_root)."""
    if course is not None:
        if is_course(course):
            return course.resolve(), ""
        return None, f"--course {course}: no solutions/ and course/ folders there (name your clone of the course)"
    if named:
        if is_course(Path(named)):
            return Path(named).resolve(), ""
        return None, f"{COURSE_ENV}={named}: no solutions/ and course/ folders there"
    found = find_course(notebook.resolve().parent)
    if found is not None:
        return found, ""
    try:
        return repo_root(), ""
    except FileNotFoundError:
        return None, NOT_FOUND


def _sandbox(name: str | None):
    """The sandbox ``name`` asks for (grader.judge.sandbox.choose), or None after one line saying why
    it cannot be had (``--sandbox bwrap`` without a working bubblewrap)."""
    from .judge.sandbox import choose

    try:
        return choose(name)
    except RuntimeError as exc:
        print(f"python -m grader: {exc}. To grade your own notebook without isolation: --sandbox none",
              file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    import warnings

    # nbgrader 0.9's Gradebook.add_submission makes SQLAlchemy 2 warn "Object of type
    # <SubmittedAssignment> not in session" while it writes a submission's rows, which it writes all
    # the same: nbgrader's code, not an error of the grading (pyproject's pytest filter says the same)
    warnings.filterwarnings("ignore", message="Object of type <Submitted", module="nbgrader.api")
    p = argparse.ArgumentParser(prog="python -m grader", description="The GPU-kernel course's grader.")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("doctor", help="what this machine has for the course, with fixes")
    g = sub.add_parser("grade", help="grade your notebook as the instructor's autograde would")
    g.add_argument("notebook", type=Path, nargs="+")
    g.add_argument("--sandbox", choices=["bwrap", "none"], default=None,
                   help="where your code runs (default: bubblewrap if it works here, else none)")
    g.add_argument("--course", type=Path, default=None,
                   help="your copy of the course, the folder holding solutions/ and course/ (default: "
                        "$GRADER_COURSE, else the nearest such folder above the notebook, else the "
                        "checkout the grader runs from)")
    a = sub.add_parser("autograde", help="instructors: grade every collected submission, write the gradebook")
    a.add_argument("assignment")
    a.add_argument("--course", type=Path, default=Path.cwd(), help="the nbgrader course folder (default: here)")
    a.add_argument("--student", action="append", default=None, help="only these students (repeat)")
    a.add_argument("--sandbox", choices=["bwrap", "none"], default=None)
    a.add_argument("--no-feedback", action="store_true", help="skip the executed notebooks (points only)")
    a.add_argument("--force", action="store_true", help="grade again submissions unchanged since their last grading")
    a.add_argument("--dask", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="one task per student on a Dask cluster: 'local' (default: one worker per GPU, "
                        "or CPU workers running the simulator) or a scheduler's address (pip install '.[cluster]')")
    a.add_argument("--workers", type=int, default=None, help="with --dask local and no GPU: how many CPU workers")
    rp = sub.add_parser("report", help="instructors: the class report (HTML + PNGs) of an autograded assignment")
    rp.add_argument("assignment")
    rp.add_argument("--course", type=Path, default=Path.cwd(), help="the nbgrader course folder (default: here)")
    rp.add_argument("--out", type=Path, default=None, help="where to write it (default: <course>/reports/<assignment>/)")
    rp.add_argument("--scoreboard", type=Path, default=None,
                    help="the reference solutions' figures (default: the checkout's results/scoreboard.json)")
    r = sub.add_parser("release", help="regenerate course/ from solutions/ (instructors)")
    r.add_argument("chapters", nargs="*", help="chapter folders (default: all)")
    s = sub.add_parser("scoreboard", help="on a GPU: grade every reference solution against its peers")
    s.add_argument("chapters", nargs="*")
    s.add_argument("--out", type=Path, default=None, help="results folder (default: results/)")
    s.add_argument("--in-notebook", action="store_true",
                   help="also time the speed cells inside the notebook, beside the judge's figures")
    args = p.parse_args(argv)

    if args.cmd == "doctor":
        from .doctor import report

        text, ok = report()
        print(text)
        return 0 if ok else 1
    if args.cmd == "release":
        from .autograde import release

        for path in release(chapters=args.chapters or None):
            print(f"released {path}")
        return 0
    if args.cmd == "grade":
        from .autograde import format_table, grade_notebook

        box = _sandbox(args.sandbox)
        if box is None:
            return 2
        named = os.environ.get(COURSE_ENV)
        for nb in args.notebook:
            if not nb.is_file():
                print(f"{nb}: no such file")
                return 2
            course, why = course_for(nb, args.course, named)
            if course is None:
                print(f"{nb}: {why}")
                return 2
            os.environ[COURSE_ENV] = str(course)       # grader.paths.repo_root: this notebook's course
            print(f"== {nb}")
            try:
                graded = grade_notebook(nb, sandbox=box)
            except FileNotFoundError as exc:             # not a lesson of this course (find_lesson)
                print(f"{nb}: {exc}")
                return 2
            print(format_table(graded.cells, graded.notes))
        return 0
    if args.cmd == "autograde" and args.dask:
        if (args.sandbox or os.environ.get("GRADER_SANDBOX")) == "bwrap" and _sandbox("bwrap") is None:
            return 2                        # asked for here: say so before starting a cluster
        from .autograde import format_table
        from .cluster import grade_class

        run = grade_class(args.course.resolve(), args.assignment, students=args.student, cluster=args.dask,
                          n_workers=args.workers, sandbox=args.sandbox, feedback=not args.no_feedback,
                          force=args.force)
        for student, result in sorted(run.results.items()):
            print(f"\n== {student} ({result.device})\n{format_table(result.graded.cells, result.graded.notes)}")
        return 1 if run.failed else 0
    if args.cmd == "autograde":
        from .autograde import autograde_assignment, format_table

        box = _sandbox(args.sandbox)
        if box is None:
            return 2

        def show(graded):
            total = sum(c.score for c in graded.cells)
            maxi = sum(c.max_score for c in graded.cells)
            print(f"{graded.student:<24} {total:6.2f} / {maxi:<6g} ({graded.seconds:.0f} s)", flush=True)

        results = autograde_assignment(args.course.resolve(), args.assignment, students=args.student,
                                       sandbox=box, feedback=not args.no_feedback, on_result=show,
                                       force=args.force, progress=lambda line: print(line, flush=True))
        for student, graded in results.items():
            print(f"\n== {student}\n{format_table(graded.cells, graded.notes)}")
        return 0
    if args.cmd == "report":
        from .report import gather
        from .report_page import write

        course = args.course.resolve()
        report = gather(course, args.assignment, scoreboard=args.scoreboard)
        if not report.columns and not any(s.grading or s.in_gradebook for s in report.students):
            print(f"{args.assignment}: no such assignment in {course} (no source notebooks, no submissions, "
                  "no gradebook rows)")
            return 2
        path = write(report, args.out or course / "reports" / args.assignment)
        print(f"{len(report.students)} students, {len(report.not_graded)} notebook(s) not graded, "
              f"{len(report.disagreements)} disagreement(s) between the gradebook and the judge's records")
        print(f"wrote {path}")
        return 0
    if args.cmd == "scoreboard":
        from .scoreboard import run

        run(chapters=args.chapters or None, out_dir=args.out, in_notebook=args.in_notebook)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
