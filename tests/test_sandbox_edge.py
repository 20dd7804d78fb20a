"""The boundary between the sandbox and the host (docs/GRADING.md, "The boundary"): bounds derived
from the lesson, the physical floor of a speed figure, and isolation that does not depend on the
folder the grader was started from. The attacks themselves are cases of tests/corpus/."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import grader  # noqa: F401  (simulator first)
from grader.autograde import make_scratch_course
from grader.errors import CheckFailed
from grader.judge import bounds as sandbox_bounds
from grader.judge.verbs import PHYSICAL_SLACK, Judged, physical_floor_s
from grader.problems import elementwise as P
from tests.conftest import ROOT
from tests.corpus import KERNEL

CH, LESSON = "01_elementwise", "01_threads_and_blocks.ipynb"


def test_the_time_bound_comes_from_the_lessons_recorded_time(monkeypatch):
    monkeypatch.delenv("GRADER_JUDGE_NOTEBOOK_S", raising=False)
    monkeypatch.delenv("GRADER_JUDGE_WALL_S", raising=False)
    table = json.loads((ROOT / "grader" / "data" / "lesson_times.json").read_text())
    row = table["lessons"][LESSON]
    wall, cells, why = sandbox_bounds.lesson_time_s(LESSON, simulator=False)
    assert wall == cells == table["factor"] * row["gpu_s"] + table["slack_s"] < 900
    assert "the reference's" in why and "on a GPU" in why
    wall, cells, why = sandbox_bounds.lesson_time_s("not_a_lesson.ipynb", simulator=True)
    assert cells == 900 and "no time is recorded" in why
    monkeypatch.setenv("GRADER_JUDGE_NOTEBOOK_S", "20")
    assert sandbox_bounds.lesson_time_s(LESSON, simulator=True)[:2] == (60, 20)


def test_every_lesson_has_a_recorded_time_on_both():
    table = json.loads((ROOT / "grader" / "data" / "lesson_times.json").read_text())["lessons"]
    lessons = sorted(p.name for p in (ROOT / "solutions").glob("*/*.ipynb"))
    assert len(lessons) == len(set(lessons)), "lesson file names must be unique across chapters"
    missing = [n for n in lessons if not {"gpu_s", "sim_s"} <= set(table.get(n, {}))]
    assert not missing, f"no recorded time for {missing}: run tools/lesson_times.py"


class LyingRemote:
    """A runner that lies in its timings and in its back-to-back runs, with right outputs."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def _outputs(self, size, seed):
        from grader.arrays import poisoned

        inputs = P.vector_add.make_inputs(__import__("numpy").random.default_rng(seed), size)
        flat = poisoned((size,), __import__("numpy").float32)
        flat[:size] = inputs["a"] + inputs["b"]
        return {"out:c": flat}

    def case(self, name, ref, size, seed, expect_bytes):
        return {"launched": True}, self._outputs(size, seed)

    def time(self, name, ref, size, seed, budget_s, expect_bytes):
        self.size, self.seed = size, seed
        return {"times": [self.seconds] * 10}, self._outputs(size, seed)

    def burst(self, reps):
        return reps * self.seconds

    def outputs(self, expect_bytes):
        return self._outputs(self.size, self.seed)


@pytest.fixture()
def small(monkeypatch):
    from grader import peers

    monkeypatch.setattr(peers, "measure", lambda peer, ctx, budget_s=3.0: ("copy bandwidth", 4000.0))
    monkeypatch.setattr(Judged, "_peer_inputs", lambda self, problem, size, inputs: None)
    problem = P.vector_add.variant(bench_size=1 << 12, sizes=(1, 1000))
    monkeypatch.setattr(P, "vector_add", problem)
    return problem


def test_a_figure_faster_than_the_gpu_can_run_is_refused(small):
    from grader.judge.remote import RemoteFunction

    floor, how = physical_floor_s(small, small.work(small.bench_size), "NVIDIA H200")
    assert floor == pytest.approx(12 * 4096 / (4800e9 * PHYSICAL_SLACK)) and "4800 GB/s" in how
    judged = Judged(LyingRemote(seconds=floor / 3), simulator=False, cc=(9, 0), device_name="NVIDIA H200")
    with pytest.raises(CheckFailed, match="not scored: .* faster than this GPU can physically run it"):
        judged.speed(RemoteFunction(judged.remote, "launch_vector_add"), small, points=1)
    honest = Judged(LyingRemote(seconds=floor * 2), simulator=False, cc=(9, 0), device_name="NVIDIA H200")
    assert honest.speed(RemoteFunction(honest.remote, "launch_vector_add"), small, points=1) > 0
    assert physical_floor_s(small, small.work(small.bench_size), "a GPU nobody knows") is None


SNOOP = KERNEL + '''
import os
for path in {paths!r}:
    print("EXISTS", path, os.path.exists(path))
    try:
        print("LISTED", path, os.listdir(path)[:5])
    except OSError:
        pass
'''


def test_isolation_is_the_same_from_a_parent_folder(tmp_path):
    """`autograde --course course` started from the course's parent folder: the sandbox sees none of
    the course (solutions, gradebook, other submissions), nor the parent, nor the checkout."""
    parent = tmp_path / "parent"
    course = make_scratch_course(CH, parent / "course")
    secrets = [course / "solutions" / CH / LESSON, course / "gradebook.db", course / "submitted" / "other",
               parent / "course", parent, ROOT / "solutions", ROOT / "course", Path("../course/solutions").as_posix(),
               "course/solutions"]
    for student, source in (("snoop", SNOOP.format(paths=[str(p) for p in secrets])), ("other", KERNEL)):
        folder = course / "submitted" / student / CH
        folder.mkdir(parents=True)
        nb = nbformat.read(ROOT / "solutions" / CH / LESSON, as_version=4)
        next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "v1_vector_add").source = source
        nbformat.write(nb, folder / LESSON)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GRADER_SIM_TIMEOUT": "20", "GRADER_JUDGE_NOTEBOOK_S": "120"}
    done = subprocess.run([sys.executable, "-m", "grader", "autograde", CH, "--course", "course"], cwd=parent,
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    executed = json.loads((course / "autograded" / "snoop" / CH / LESSON).read_text())
    printed = "".join("".join(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", []))
    assert printed.count("EXISTS") == len(secrets), printed[-3000:]
    seen = [line for line in printed.splitlines() if line.startswith("EXISTS") and line.endswith("True")]
    listed = [line for line in printed.splitlines() if line.startswith("LISTED") and not line.endswith("[]")]
    assert not seen and not listed, (seen, listed)
