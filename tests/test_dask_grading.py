"""A class graded on a Dask cluster (grader.cluster): the same gradebook as grading one by one.

Six simulator submissions of chapter 01 (two honest, a wrong kernel, the attacker of
tests/test_class_batch.py, one that hangs, one that is slow to start) are graded one by one
(grader.autograde.autograde_assignment) in one copy of a scratch course, and on a local cluster of
2 CPU workers in another, while the worker grading the slow one is killed mid-task. Then:

* every student's gradebook rows equal the one-by-one rows, cell by cell; the hang got 0 with the
  judge's deadline as its reason (the host's short ``$GRADER_JUDGE_NOTEBOOK_S`` applied in a worker);
* the killed worker's submission was graded anyway, and each student was written once;
* re-running grades nothing; changing one submission regrades that one only.

The cheap checks beside them (content keys, Ctrl-C while a student is written, the Slurm and
Kubernetes recipes, the pinned GPU workers) also show that each check fails on a wrong
implementation.
"""
from __future__ import annotations

import json

import contextlib
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("distributed", reason="pip install '.[cluster]' (./course.sh test installs it)")

from grader import ledger  # noqa: E402
from grader.autograde import StudentResult, autograde_assignment, collect, make_scratch_course  # noqa: E402
from grader.cluster import grade_class, gpu_worker_spec  # noqa: E402
from tests.corpus import KERNEL  # noqa: E402
from tests.test_class_batch import CH, HONEST_B, LESSON, attacker, scores, submit  # noqa: E402

ENV = {"GRADER_SIM_TIMEOUT": "20"}
DEADLINE_S = "12"
WRONG = KERNEL.replace("a[i] + b[i]", "a[i] - b[i]")
HANG = "while True:\n    pass\n"
SLOW = "import time\ntime.sleep(4)\n" + KERNEL
STUDENTS = ["attacker", "hang", "honest-a", "honest-b", "slow", "wrong"]


def build_class(course: Path) -> None:
    for student, source in (("honest-a", KERNEL), ("honest-b", HONEST_B), ("wrong", WRONG), ("hang", HANG),
                            ("slow", SLOW)):
        submit(course, student, source)
    submit(course, "attacker", attacker(course), extra={"grader/__init__.py": "check = speed = print\n"})


@pytest.fixture(scope="module")
def deadlines():
    mp = pytest.MonkeyPatch()
    mp.setenv("GRADER_JUDGE_NOTEBOOK_S", DEADLINE_S)
    mp.setenv("GRADER_JUDGE_REQUEST_S", DEADLINE_S)
    yield
    mp.undo()


def kill_worker_running(address: str, student: str, done: dict) -> None:
    """Kill (SIGKILL) the worker process while it executes ``student``'s task, a second into it."""
    from distributed import Client

    def executing(dask_worker):
        return [str(ts.key) for ts in dask_worker.state.executing]

    with Client(address, timeout=30) as c:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not done.get("pid"):
            for addr, keys in c.run(executing).items():
                if any(f"grade-{student}-" in k for k in keys):
                    time.sleep(1.0)
                    pid = c.run(os.getpid, workers=[addr])[addr]
                    os.kill(pid, signal.SIGKILL)
                    done.update(pid=pid, worker=addr)
                    return
            time.sleep(0.2)


@pytest.mark.cluster
def test_a_class_on_two_dask_workers_grades_as_one_by_one(tmp_path, deadlines):
    from distributed import LocalCluster

    base = make_scratch_course(CH, tmp_path / "base")
    build_class(base)
    serial, dask = tmp_path / "serial", tmp_path / "dask"
    shutil.copytree(base, serial)
    shutil.copytree(base, dask)

    t0 = time.monotonic()
    autograde_assignment(serial, CH, feedback=False, env=ENV)
    t_serial = time.monotonic() - t0

    lines: list[str] = []
    killed: dict = {}
    t0 = time.monotonic()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=0,
                      dashboard_address=None) as cluster:
        killer = threading.Thread(target=kill_worker_running, args=(cluster.scheduler_address, "slow", killed))
        killer.start()
        run = grade_class(dask, CH, cluster=cluster, feedback=False, env=ENV, out=lines.append)
        killer.join()
    t_dask = time.monotonic() - t0
    print(f"\none by one: {t_serial:.1f} s; 2 Dask workers (one killed): {t_dask:.1f} s")
    print("\n".join(lines))

    assert killed.get("pid"), "the worker grading `slow` was never seen running it"
    assert sorted(run.results) == STUDENTS and not run.failed
    assert run.attempts == {s: 1 for s in STUDENTS}                     # each written once
    assert run.results["slow"].worker.rsplit(":", 1)[1] != str(killed["pid"])
    for student in STUDENTS:                                             # the same rows, cell by cell
        assert scores(dask, student) == scores(serial, student), student
    assert sum(c.score for c in run.results["honest-a"].graded.cells) == 4.0
    assert sum(c.score for c in run.results["slow"].graded.cells) == 4.0
    assert all(c.score == 0 for c in run.results["attacker"].graded.cells)
    hang = {c.cell: c for c in run.results["hang"].graded.cells if c.notebook == LESSON}
    assert all(c.score == 0 for c in hang.values())
    assert f"{float(DEADLINE_S):g} s" in hang["test_vector_add_visible"].reason, hang["test_vector_add_visible"].reason
    assert {r.device for r in run.results.values()} == {"simulator (CPU)"}
    for student in STUDENTS:             # the class report's grading.json, written by the host as well
        from grader.judge.gradebook import course_directory, grading_path
        found = json.loads(grading_path(course_directory(dask), student, CH).read_text())
        cells = {c["grade_id"]: c["score"] for book in found["notebooks"] for c in book["cells"]}
        assert cells == {c.cell: c.score for c in run.results[student].graded.cells}, student
    assert any(line.startswith("[done 6/6") for line in lines) and "6 graded, 0 failed" in lines[-1]

    # again: nothing changed, nothing graded (no cluster even started)
    again = grade_class(dask, CH, cluster="local", feedback=False, env=ENV, out=lines.append)
    assert again.results == {} and sorted(again.skipped) == STUDENTS

    # one submission changed: only it is graded, and its new grade is written
    submit(dask, "wrong", KERNEL)
    third = grade_class(dask, CH, cluster="local", n_workers=1, feedback=False, env=ENV, out=lines.append)
    assert list(third.results) == ["wrong"] and sorted(third.skipped) == sorted(set(STUDENTS) - {"wrong"})
    assert scores(dask, "wrong") == scores(dask, "honest-a")


# ------------------------------------------------------------------------------ cheap checks
@pytest.fixture(scope="module")
def small_course(tmp_path_factory):
    course = make_scratch_course(CH, tmp_path_factory.mktemp("small") / "course")
    submit(course, "honest-a", KERNEL)
    submit(course, "honest-b", HONEST_B)
    return course


def test_the_content_key_covers_the_submission_the_lessons_the_options_and_the_grader(small_course, monkeypatch):
    _, jobs = collect(small_course, CH)
    job = jobs[0]
    base = ledger.content_key(job)
    assert base == job.key and base != jobs[1].key
    changed = {
        "submission": dict(job.__dict__, submitted={k: v + b" " for k, v in job.submitted.items()}),
        "lesson": dict(job.__dict__, lessons={k: (s + b" ", r) for k, (s, r) in job.lessons.items()}),
        "feedback": dict(job.__dict__, feedback=not job.feedback),
        "env": dict(job.__dict__, env={"GRADER_SIM_TIMEOUT": "1"}),
    }
    for what, fields in changed.items():
        assert ledger.content_key(type(job)(**fields)) != base, what
    monkeypatch.setattr(ledger, "grader_digest", lambda: "another grader")
    assert ledger.content_key(job) != base

    # a key that ignores the submission (the wrong implementation) would miss the change
    def ignores_submission(j):
        return ledger.content_key(type(j)(**dict(j.__dict__, submitted={})))

    assert ignores_submission(type(job)(**changed["submission"])) == ignores_submission(job)


def _result(course: Path, student: str) -> StudentResult:
    """A StudentResult with full points on every graded cell of two of the assignment's notebooks."""
    from nbgrader.api import Gradebook

    from grader.autograde import Graded
    from grader.judge.judge import NotebookGrade, Verdict

    grades = []
    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        for nb in sorted(gb.find_assignment(CH).notebooks, key=lambda n: n.name)[:2]:
            grades.append(NotebookGrade(nb.name + ".ipynb", [Verdict(g.name, g.max_score, g.max_score)
                                                              for g in nb.grade_cells]))
    return StudentResult(student, "k" * 64, Graded(student), grades, {g.notebook: {"cells": []} for g in grades})


@pytest.fixture
def default_sigint():
    """Python's own SIGINT handler (KeyboardInterrupt) for the test, whatever an earlier test's
    cluster or library installed (in one CI run the unheld case then saw no KeyboardInterrupt)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("held", [True, False])
def test_ctrl_c_while_a_student_is_written_leaves_it_whole(small_course, monkeypatch, held, default_sigint):
    """SIGINT arrives between the two notebooks of a student's rows: held, the student is written
    whole and then KeyboardInterrupt is raised; not held (the wrong implementation), half is."""
    from nbgrader.api import Gradebook

    import grader.judge.gradebook as gradebook

    real = gradebook.save
    student = f"ctrl-c-{held}"
    submit(small_course, student, KERNEL)

    def interrupted_save(cd, assignment, who, grades, notebooks, stamp):
        real(cd, assignment, who, grades[:1], notebooks, stamp)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
        real(cd, assignment, who, grades[1:], notebooks, stamp)

    monkeypatch.setattr(gradebook, "save", interrupted_save)
    if not held:
        monkeypatch.setattr(ledger, "interrupts_held", contextlib.nullcontext)
    result = _result(small_course, student)
    cd = collect(small_course, CH, [student])[0]
    with pytest.raises(KeyboardInterrupt):
        ledger.record(cd, CH, result)
    with Gradebook("sqlite:///" + str(small_course / "gradebook.db")) as gb:
        got = {nb.name: sum(g.auto_score or 0 for g in nb.grades)
               for nb in gb.find_submission(CH, student).notebooks}
    want = {g.notebook[:-6]: sum(v.score for v in g.verdicts) for g in result.grades}
    whole = all(got[name] == points for name, points in want.items())
    assert whole is held
    assert (ledger.recorded_key(cd, student, CH) == result.key) is held   # not held: graded again next run


def test_gpu_workers_are_pinned_one_gpu_each():
    spec = gpu_worker_spec(2)
    assert [w["options"]["env"]["CUDA_VISIBLE_DEVICES"] for w in spec.values()] == ["0", "1"]
    assert all(w["options"]["nthreads"] == 1 for w in spec.values())


def test_the_slurm_recipe_asks_for_one_gpu_per_job():
    pytest.importorskip("dask_jobqueue")
    from grader.recipes import slurm_cluster

    cluster = slurm_cluster(queue="gpu", account="course", cores=8, memory="64GB")
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    print(script)
    directives = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert directives.count("#SBATCH --gres=gpu:1") == 1
    assert "#SBATCH -p gpu" in directives and "#SBATCH -A course" in directives
    assert "#SBATCH --cpus-per-task=8" in directives                  # CPUs for the judge, its sandbox, nvcc
    assert script.count("--nthreads") == 1 and "--nthreads 1 " in script   # one task at a time per GPU


def test_the_kubernetes_pod_asks_for_one_gpu_and_mounts_only_the_submission():
    from grader.recipes import SCRATCH_MOUNT, worker_deployment, worker_network_policy, worker_pod

    pod = worker_pod("registry.example/gpu-course:1", "tcp://grader-scheduler:8786")
    spec = pod["spec"]
    (container,) = spec["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["resources"]["requests"]["nvidia.com/gpu"] == 1
    assert spec["volumes"] == [{"name": "submission", "emptyDir": {"sizeLimit": "20Gi"}}]
    assert container["volumeMounts"] == [{"name": "submission", "mountPath": SCRATCH_MOUNT}]
    assert {"name": "TMPDIR", "value": SCRATCH_MOUNT} in container["env"]   # the task writes its student there
    assert spec["automountServiceAccountToken"] is False and "serviceAccountName" not in spec
    assert not any(k in str(spec) for k in ("hostPath", "secret", "configMap", "persistentVolumeClaim"))
    dep = worker_deployment("registry.example/gpu-course:1", "tcp://grader-scheduler:8786", replicas=8)
    assert dep["spec"]["replicas"] == 8 and dep["spec"]["template"]["spec"]["volumes"] == spec["volumes"]
    policy = worker_network_policy({"app": "grader-scheduler"})
    assert policy["spec"]["egress"] == [{"to": [{"podSelector": {"matchLabels": {"app": "grader-scheduler"}}}]}]


def test_the_command_line_takes_dask(monkeypatch, small_course):
    from grader import cli

    seen = {}

    def fake(course, assignment, **kw):
        seen.update(kw, course=course, assignment=assignment)
        from grader.cluster import ClassRun

        return ClassRun()

    monkeypatch.setattr("grader.cluster.grade_class", fake)
    assert cli.main(["autograde", CH, "--course", str(small_course), "--dask", "--workers", "2", "--force"]) == 0
    assert seen["cluster"] == "local" and seen["n_workers"] == 2 and seen["force"] is True
    assert cli.main(["autograde", CH, "--course", str(small_course), "--dask", "tcp://10.0.0.1:8786"]) == 0
    assert seen["cluster"] == "tcp://10.0.0.1:8786"
