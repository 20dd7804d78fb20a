"""Every case of tests/corpus graded through the judge, each in its own sandbox, exactly right.

Simulator on the CPU; GRADER_TEST_GPU=1 on a GPU machine for the GPU expectations and the GPU-only
cases (CORPUS_SHARD="k/n" grades the k-th of n slices, to split a GPU run). Every graded cell must
get the case's score and show its reason. The host's deadlines are short here so that the hanging
cases end quickly; a real grade uses the defaults (grader/judge/remote.py).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from grader.autograde import grade_lesson
from grader.judge.sandbox import choose
from tests import corpus
from tests.conftest import ON_GPU

ROOT = Path(__file__).resolve().parent.parent
LESSON = ROOT / "solutions" / "01_elementwise" / "01_threads_and_blocks.ipynb"
RELEASE = ROOT / "course" / "01_elementwise" / "01_threads_and_blocks.ipynb"
SIM_ENV = {"GRADER_SIM_TIMEOUT": "5"}
GPU_ENV = {"GRADER_GPU_TIMEOUT": "10"}
HOST_LIMITS = {"GRADER_JUDGE_NOTEBOOK_S": "20", "GRADER_JUDGE_REQUEST_S": "20", "GRADER_JUDGE_MEMORY_GB": "3"}


def make_submission(case, where: Path) -> Path:
    """The submission a case describes, written as the lesson's file name under ``where``."""
    where.mkdir(parents=True)
    out = where / LESSON.name
    if hasattr(case, "LINK_TO"):
        out.symlink_to(case.LINK_TO)
        return out
    for rel, text in getattr(case, "FILES", {}).items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_text(text)
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
    if hasattr(case, "edit_json"):
        import json

        data = json.loads(out.read_text())
        case.edit_json(data)
        out.write_text(json.dumps(data))
    return out


def expected(case, on_gpu: bool):
    if on_gpu:
        return getattr(case, "EXPECT_GPU", case.EXPECT) if hasattr(case, "EXPECT_GPU") else case.EXPECT
    return None if getattr(case, "GPU_ONLY", False) else case.EXPECT


def shard(cases: dict) -> dict:
    spec = os.environ.get("CORPUS_SHARD")
    if not spec:
        return cases
    k, n = (int(x) for x in spec.split("/"))
    return {name: cases[name] for name in sorted(cases)[k::n]}


def grade_case(name, case, tmp: Path, on_gpu: bool):
    sub = make_submission(case, tmp / name)
    result, nb = grade_lesson(LESSON, RELEASE, sub, choose(), feedback=getattr(case, "FEEDBACK", False),
                              env=GPU_ENV if on_gpu else SIM_ENV)
    assert "BEGIN HIDDEN TESTS" not in json.dumps(nb), f"{name}: the hidden tests reached its feedback"
    return result


def host_fingerprint() -> dict:
    """What a sandbox must never change on the host: every file of the course checkout (content) and
    of the Python environment's package folders (size and time; compiled caches left out)."""
    out = {}
    for top in ("solutions", "course", "grader", "tests", "results", "nbgrader_config.py"):
        path = ROOT / top
        files = [path] if path.is_file() else sorted(path.rglob("*"))
        for f in files:
            if f.is_file() and "__pycache__" not in f.parts and ".ipynb_checkpoints" not in f.parts:
                out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()
    for site_dir in {p for p in sys.path if p.endswith("site-packages")}:
        for dirpath, dirnames, filenames in os.walk(site_dir):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for fn in filenames:
                st = os.lstat(os.path.join(dirpath, fn))
                out[os.path.join(dirpath, fn)] = (st.st_size, st.st_mtime_ns)
    return out


def compare(name, case, result, on_gpu: bool) -> list[str]:
    want = expected(case, on_gpu)
    got = {v.grade_id: v for v in result.verdicts}
    if set(got) != set(want):
        return [f"{name}: graded cells {sorted(got)}, expected {sorted(want)}"]
    problems = []
    for cell, (score, reason) in want.items():
        v = got[cell]
        if abs(v.score - score) > 1e-9 or reason not in v.reason or (not reason and v.reason):
            problems.append(f"{name}:{cell}: got {v.score:g} ({v.reason[:300]!r}), expected {score:g} ({reason!r})")
    if hasattr(case, "after"):
        try:
            case.after(result)
        except AssertionError as exc:
            problems.append(f"{name}: {exc}")
    return problems


def _run(tmp_path, monkeypatch, on_gpu: bool, workers: int):
    for k, v in HOST_LIMITS.items():
        monkeypatch.setenv(k, v)
    cases = shard({n: c for n, c in corpus.cases().items() if expected(c, on_gpu) is not None})
    before = host_fingerprint()
    with ThreadPoolExecutor(workers) as pool:          # each case is its own sandbox
        results = dict(zip(cases, pool.map(lambda n: grade_case(n, cases[n], tmp_path, on_gpu), cases)))
    problems = [p for n in cases for p in compare(n, cases[n], results[n], on_gpu)]
    after = host_fingerprint()
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f"the host's files changed while the corpus was graded: {changed[:20]}"
    assert not problems, "\n".join(problems)


@pytest.mark.skipif(ON_GPU, reason="the simulator's expectations")
def test_corpus_simulator(tmp_path, monkeypatch):
    _run(tmp_path, monkeypatch, on_gpu=False, workers=2)


@pytest.mark.gpu
def test_corpus_gpu(tmp_path, monkeypatch):
    _run(tmp_path, monkeypatch, on_gpu=True, workers=1)    # one GPU: one at a time, timings undisturbed


def test_every_case_says_what_it_proves():
    for name, case in corpus.cases().items():
        assert case.__doc__ and hasattr(case, "EXPECT") and hasattr(case, "STATUS"), name
