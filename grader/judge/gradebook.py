"""Writing grades where nbgrader keeps them: the gradebook, and autograded/<student>/<assignment>/
(the feedback notebooks, and ``grading.json``: the judge's findings, which grader.report reads).

Only the host process writes here, from the judge's verdicts; no learner code ever runs with access
to these files. The rows are the ones ``nbgrader autograde`` would write (a submission per student,
a grade per graded cell with its automatic score, a comment per answer cell), so nbgrader's
formgrader, ``generate_feedback`` and exports keep working.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path


def course_directory(root: Path):
    """nbgrader's CourseDirectory for the course at ``root``, configured by its nbgrader_config.py."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    coursedir = CourseDirectory(config=config)
    coursedir.root = str(root)
    return coursedir


def save(coursedir, assignment: str, student: str, grades: list, notebooks: dict, timestamp: str | None) -> None:
    """Record one student's graded notebooks: ``grades`` are NotebookGrade, ``notebooks`` maps a
    notebook file name to its feedback notebook (JSON)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(coursedir.db_url) as gb:
        gb.update_or_create_student(student)
        kwargs = {"timestamp": timestamp} if timestamp else {}
        gb.update_or_create_submission(assignment, student, **kwargs)
        for g in grades:
            notebook_id = Path(g.notebook).stem
            for v in g.verdicts:
                try:
                    grade = gb.find_grade(v.grade_id, notebook_id, assignment, student)
                except MissingEntry:
                    continue                        # a cell the released assignment does not grade
                grade.auto_score = float(v.score)
                grade.needs_manual_grade = grade.manual_score is not None
            try:
                submitted = gb.find_submission_notebook(notebook_id, assignment, student)
                for comment in submitted.comments:
                    comment.auto_comment = None
            except MissingEntry:
                pass
            gb.db.commit()
    out = Path(coursedir.format_path(coursedir.autograded_directory, student, assignment))
    out.mkdir(parents=True, exist_ok=True)
    for name, nb in notebooks.items():
        (out / name).write_text(json.dumps(nb, indent=1))
    stamp = Path(coursedir.format_path(coursedir.submitted_directory, student, assignment)) / "timestamp.txt"
    if stamp.is_file():
        shutil.copy(stamp, out / "timestamp.txt")


GRADING_JSON = "grading.json"


def grading_path(coursedir, student: str, assignment: str) -> Path:
    """``autograded/<student>/<assignment>/grading.json``: what the judge found for that student."""
    return Path(coursedir.format_path(coursedir.autograded_directory, student, assignment)) / GRADING_JSON


def save_grading(coursedir, assignment: str, student: str, data: dict) -> Path:
    """Write one student's ``grading.json`` (grader.autograde.grading_record), whole or not at all."""
    path = grading_path(coursedir, student, assignment)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{GRADING_JSON}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=float))
    tmp.replace(path)
    return path


def timestamp_of(coursedir, student: str, assignment: str) -> str | None:
    return coursedir.get_existing_timestamp(coursedir.format_path(coursedir.submitted_directory, student, assignment))
