"""The instructor's flow: a class graded in one batch by ``python -m grader autograde``.

Two honest students and an attacker, collected into a scratch nbgrader course. The honest students
get exactly the points they get when graded alone; the attacker — whose notebook tries to rewrite
the gradebook, other students' files, the solutions and the grader, from its cell and from a
detached process — gets 0 with its reason; and afterwards every file of the course directory is as
it was, except the attacker's own new gradebook rows and autograded notebook.
"""
from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from grader.autograde import autograde_assignment, make_scratch_course
from tests.corpus import KERNEL

ROOT = Path(__file__).resolve().parent.parent
CH = "01_elementwise"
LESSON = "01_threads_and_blocks.ipynb"

HONEST_B = KERNEL.replace("threads = 256", "threads = 128")          # another right kernel


def attacker(course: Path) -> str:
    targets = [course / "gradebook.db", course / "submitted" / "honest-a" / CH / LESSON,
               course / "solutions" / CH / LESSON, ROOT / "grader" / "check.py"]
    return f'''
import os, subprocess, sys
import grader
for path in {[str(t) for t in targets]!r} + [grader.__file__, os.path.join(os.path.dirname(grader.__file__), "score.py")]:
    try:
        with open(path, "a") as f:
            f.write("# owned")
        print("WROTE", path, file=sys.stderr)
    except OSError as exc:
        print("refused", path, exc, file=sys.stderr)
later = "sleep 3; for f in {' '.join(str(t) for t in targets)}; do echo owned >> $f; done"
subprocess.Popen(["sh", "-c", later], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
'''


def submit(course: Path, student: str, source: str, extra: dict | None = None) -> None:
    nb = nbformat.read(ROOT / "solutions" / CH / LESSON, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "v1_vector_add")
    cell.source = source
    folder = course / "submitted" / student / CH
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / LESSON)
    for rel, text in (extra or {}).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)


def fingerprint(course: Path, skip: tuple) -> dict:
    out = {}
    for p in sorted(course.rglob("*")):
        rel = p.relative_to(course).as_posix()
        if p.is_file() and not rel.startswith(skip):
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def scores(course: Path, student: str) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        sub = gb.find_submission(CH, student)
        return {g.name: (g.auto_score, g.max_score) for nb in sub.notebooks for g in nb.grades}


@pytest.fixture(scope="module")
def limits():
    mp = pytest.MonkeyPatch()
    for k, v in {"GRADER_JUDGE_NOTEBOOK_S": "60", "GRADER_JUDGE_REQUEST_S": "60"}.items():
        mp.setenv(k, v)
    yield
    mp.undo()


def test_a_class_batch_grades_honest_students_as_alone_and_contains_the_attacker(tmp_path, limits):
    env = {"GRADER_SIM_TIMEOUT": "20"}
    alone = {}
    for student, source in (("honest-a", KERNEL), ("honest-b", HONEST_B)):
        solo = make_scratch_course(CH, tmp_path / f"solo-{student}")
        submit(solo, student, source)
        autograde_assignment(solo, CH, feedback=False, env=env)
        alone[student] = scores(solo, student)

    course = make_scratch_course(CH, tmp_path / "class")
    submit(course, "honest-a", KERNEL)
    submit(course, "honest-b", HONEST_B)
    submit(course, "attacker", attacker(course), extra={"grader/__init__.py": "check = speed = print\n"})
    graded = autograde_assignment(course, CH, students=["honest-a", "honest-b"], feedback=False, env=env)
    before = fingerprint(course, skip=("gradebook.db",))
    rows_before = {s: scores(course, s) for s in ("honest-a", "honest-b")}

    graded.update(autograde_assignment(course, CH, students=["attacker"], feedback=True, env=env))
    time.sleep(5)                                     # the detached process would have fired by now
    after = fingerprint(course, skip=("gradebook.db", "autograded/attacker/"))

    for student in ("honest-a", "honest-b"):
        assert scores(course, student) == alone[student] == rows_before[student]
        assert sum(c.score for c in graded[student].cells) == 4.0          # 2 + 2, speed needs a GPU
    attack = {c.cell: c for c in graded["attacker"].cells}
    assert all(c.score == 0 for c in attack.values())
    assert "launch_vector_add" in attack["test_vector_add_visible"].reason    # it defines no kernel
    assert {k: v for k, v in before.items() if not k.startswith("autograded/attacker/")} == after
    assert scores(course, "attacker")["test_vector_add_visible"] == (0.0, 2.0)
    assert not (course / "autograded" / "attacker" / CH / "grader").exists()   # only notebooks are graded
    import json

    executed = json.loads((course / "autograded" / "attacker" / CH / LESSON).read_text())   # its code ran there too
    printed = "".join("".join(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", []))
    assert "refused" in printed and "WROTE" not in printed
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_a_forged_frame_and_a_linked_submission_cost_only_their_own_rows(tmp_path, limits):
    """A class run by the command line with two honest students, one whose cell forges a reply on
    the runner's pipe, and one whose handed-in notebook is a symbolic link to the solutions: every
    student has a row, the honest ones exactly their points alone, the run exits 0."""
    import os
    import subprocess
    import sys

    from tests.corpus import forged_frame

    env = {"GRADER_SIM_TIMEOUT": "20"}
    alone = {}
    solo = make_scratch_course(CH, tmp_path / "solo")
    for student, source in (("honest-a", KERNEL), ("honest-b", HONEST_B)):
        submit(solo, student, source)
    autograde_assignment(solo, CH, feedback=False, env=env)
    alone = {s: scores(solo, s) for s in ("honest-a", "honest-b")}

    course = make_scratch_course(CH, tmp_path / "class")
    submit(course, "a-forger", forged_frame.SOURCE)
    submit(course, "honest-a", KERNEL)
    link = course / "submitted" / "b-linker" / CH
    link.mkdir(parents=True)
    (link / LESSON).symlink_to(course / "solutions" / CH / LESSON)
    submit(course, "honest-b", HONEST_B)
    run_env = {**os.environ, **env, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "grader", "autograde", CH, "--course", str(course), "--no-feedback"],
                          cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for student in ("honest-a", "honest-b"):
        assert scores(course, student) == alone[student], student
    for student, why in (("a-forger", "malformed"), ("b-linker", "symbolic link")):
        rows = scores(course, student)
        assert rows and all(score == 0 for score, _ in rows.values()), (student, rows)
        import json

        grading = json.loads((course / "autograded" / student / CH / "grading.json").read_text())
        reasons = [c["reason"] for nb in grading["notebooks"] if nb["notebook"] == LESSON for c in nb["cells"]]
        assert reasons and all(why in r for r in reasons), (student, reasons)
    shutil.rmtree(tmp_path, ignore_errors=True)
