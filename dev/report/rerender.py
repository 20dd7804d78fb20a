"""Draw docs/class_report_example/ again from the GPU run it records, without a GPU.

    python dev/report/rerender.py [OUTDIR]          (default: docs/class_report_example)

For a change to the report's page (grader/report_page.py), not to the grading: the five
submissions are collected again (dev/report/example_class.py), each student's ``grading.json`` is
the one the H100 run wrote (``class_grading.json`` beside the page), and the gradebook gets the
rows ``python -m grader autograde`` wrote from it (grader.judge.gradebook.save: a submission per
student, each graded cell's automatic score as the judge gave it). Then ``python -m grader report``
writes the page and its figures, which replace the committed ones; ``class_grading.json`` and
``example.log`` stay as the GPU run left them. Nothing is graded or timed here: a new GPU run is
``bash dev/report/example.sh`` on the device.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from example_class import CH, build  # noqa: E402


def gradebook_from(course: Path, gradings: dict) -> None:
    from nbgrader.api import Gradebook

    from grader.judge.gradebook import course_directory, save_grading

    cd = course_directory(course)
    with Gradebook(cd.db_url) as gb:
        for student, data in gradings.items():
            gb.update_or_create_student(student)
            gb.update_or_create_submission(CH, student, timestamp=data["graded_at"].replace("T", " "))
            for nb in data["notebooks"]:
                for c in nb["cells"]:
                    grade = gb.find_grade(c["grade_id"], Path(nb["notebook"]).stem, CH, student)
                    grade.auto_score = float(c["score"])
            gb.db.commit()
    for student, data in gradings.items():
        save_grading(cd, CH, student, data)


def main(out: Path) -> None:
    gradings = json.loads((out / "class_grading.json").read_text())
    with tempfile.TemporaryDirectory(prefix="class-report-") as work:
        course = build(Path(work) / "course")
        gradebook_from(course, gradings)
        report = Path(work) / "report"
        subprocess.run([sys.executable, "-m", "grader", "report", CH, "--course", str(course), "--out", str(report)],
                       cwd=ROOT, check=True)
        for old in [out / "report.html", *out.glob("*.png")]:
            old.unlink()
        for f in [report / "report.html", *report.glob("*.png")]:
            shutil.copy(f, out / f.name)
    print(f"drew {out / 'report.html'} again from {out / 'class_grading.json'}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "class_report_example").resolve())
