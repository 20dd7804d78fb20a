"""Every case of tests/corpus through the real nbgrader autograde, graded exactly right.

All cases are submitted as separate students of a scratch course and graded by nbgrader
autograde, a few runs side by side (the simulator on the CPU; GRADER_TEST_GPU=1 on a GPU machine for the GPU
expectations and the GPU-only cases). The run must exit 0, the gradebook must keep a row
for every case, and every graded cell must get the case's score and show its reason.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from grader.autograde import autograde_many, make_scratch_course
from tests import corpus
from tests.conftest import ON_GPU

ROOT = Path(__file__).resolve().parent.parent
LESSON = ROOT / "solutions" / "01_elementwise" / "01_threads_and_blocks.ipynb"
CHAPTER = "01_elementwise"
SIM_ENV = {"GRADER_FORCE_SIM": "1", "NUMBA_ENABLE_CUDASIM": "1", "GRADER_SIM_TIMEOUT": "5"}
GPU_ENV = {"GRADER_GPU_TIMEOUT": "10"}


def make_submission(case, where: Path) -> Path:
    """The submission a case describes, written as the lesson's file name under ``where``."""
    where.mkdir(parents=True)
    out = where / LESSON.name
    if hasattr(case, "RAW"):
        out.write_text(case.RAW)
        return out
    nb = nbformat.read(LESSON, as_version=4)
    if hasattr(case, "SOURCE"):
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "v1_vector_add")
        cell.source = case.SOURCE
    if hasattr(case, "edit"):
        case.edit(nb)
    if ON_GPU:
        corpus.without_sweep(nb)
    nbformat.write(nb, out)
    return out


def expected(case, on_gpu: bool):
    if on_gpu:
        return getattr(case, "EXPECT_GPU", case.EXPECT) if hasattr(case, "EXPECT_GPU") else case.EXPECT
    return None if getattr(case, "GPU_ONLY", False) else case.EXPECT


def shard(cases: dict) -> dict:
    """CORPUS_SHARD="k/n": only the k-th of n slices of the cases (sorted by name), so a GPU run
    can be split across calls shorter than the whole corpus."""
    spec = os.environ.get("CORPUS_SHARD")
    if not spec:
        return cases
    k, n = (int(x) for x in spec.split("/"))
    return {name: cases[name] for name in sorted(cases)[k::n]}


def grade_corpus(tmp: Path, on_gpu: bool, batches: int):
    """Grade every case; the simulator's cases in ``batches`` nbgrader runs side by side."""
    cases = {name: c for name, c in corpus.cases().items() if expected(c, on_gpu) is not None}
    cases = shard(cases)
    env = GPU_ENV if on_gpu else SIM_ENV
    names = sorted(cases)
    groups = [names[k::batches] for k in range(batches)]

    def grade(k):
        course = make_scratch_course(CHAPTER, tmp / f"course{k}")
        subs = {n.replace("_", "-"): [make_submission(cases[n], tmp / "in" / n)] for n in groups[k]}
        return course, groups[k], autograde_many(subs, CHAPTER, course, env=env)

    with ThreadPoolExecutor(batches) as pool:      # each batch is an nbgrader subprocess
        return cases, list(pool.map(grade, range(batches)))


def compare(cases, runs, on_gpu: bool) -> list[str]:
    problems = []
    for name, case in cases.items():
        want = expected(case, on_gpu)
        got = {g.cell: g for g in runs[name.replace("_", "-")]}
        if set(got) != set(want):
            problems.append(f"{name}: graded cells {sorted(got)}, expected {sorted(want)}")
            continue
        for cell, (score, reason) in want.items():
            g = got[cell]
            if abs(g.score - score) > 1e-9 or reason not in g.reason or (not reason and g.reason):
                problems.append(f"{name}:{cell}: got {g.score:g} ({g.reason!r}), expected {score:g} ({reason!r})")
    return problems


def gradebook_rows(course: Path) -> set:
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        return {s.student.id for s in gb.assignment_submissions(CHAPTER)}


def _run(tmp_path, on_gpu, batches):
    cases, graded = grade_corpus(tmp_path, on_gpu, batches)
    runs = {}
    for course, names, batch in graded:
        some = next(iter(batch.values()))
        assert some.returncode == 0, some.log[-3000:]
        assert gradebook_rows(course) == {n.replace("_", "-") for n in names}   # a row per case
        runs.update(batch)
    problems = compare(cases, runs, on_gpu)
    assert not problems, "\n".join(problems)


@pytest.mark.skipif(ON_GPU, reason="the simulator's expectations")
def test_corpus_simulator(tmp_path):
    _run(tmp_path, on_gpu=False, batches=2)


@pytest.mark.gpu
def test_corpus_gpu(tmp_path):
    _run(tmp_path, on_gpu=True, batches=1)   # one GPU: one run at a time, timings undisturbed


def test_tamper_scan_flags_no_cell_of_the_course():
    """The source scan (FlagTampering) must not cost an honest learner: no editable cell of any
    solution or released lesson trips it, while the usual patches do."""
    from nbgrader.utils import is_locked

    from grader.nbgrader_settings import find_tampering

    for nb_path in sorted(ROOT.glob("solutions/*/*.ipynb")) + sorted(ROOT.glob("course/*/*.ipynb")):
        for cell in nbformat.read(nb_path, as_version=4).cells:
            if cell.cell_type == "code" and not is_locked(cell):
                assert find_tampering(cell.source) is None, (nb_path.name, find_tampering(cell.source))
    for src in ["grader.check = f", "P.vector_add.hidden_sizes = [1]", "time.perf_counter = f",
                "grader = Fake()", "setattr(grader, 'speed', f)", "import numpy as grader",
                "torch.cuda.Event = E", "sys.modules['grader'] = m", "f.__code__ = g.__code__"]:
        assert find_tampering(src), src
    for src in ["x = grader.check", "print(time.perf_counter())", "c[i] = a[i] + b[i]", "t = np.float32(1)"]:
        assert find_tampering(src) is None, src
