"""The judge's builds of %%cuda cells: each cached file whole, a cell being built built once, and
BuildAhead filling the cache before the notebooks are graded (grader.judge.build). The sandboxed
compiler is replaced by a stand-in that counts its calls: what is tested is who builds, not NVRTC."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from grader.judge import build

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fake_compiler(monkeypatch, tmp_path):
    """compile_plan with its cache in tmp_path and a compiler that takes 0.3 s and fails every cell
    (a failure is cached like a cubin, and needs no GPU to load)."""
    import grader.cuda.toolchain as toolchain

    monkeypatch.setattr(toolchain, "cache_root", lambda: tmp_path / "cache")
    calls = []

    def compile_in_sandbox(todo, sandbox, inputs, arch, cache, cached, out, timeout_s):
        calls.append(sorted(c["key"] for c in todo))
        time.sleep(0.3)
        cache.mkdir(parents=True, exist_ok=True)
        for cell in todo:
            build._write_whole(cached(cell).with_suffix(".json"), json.dumps({"error": f"built {cell['key']}"}).encode())

    monkeypatch.setattr(build, "_build_in_sandbox", compile_in_sandbox)
    return calls


def test_a_cell_asked_for_twice_at_once_is_built_once(fake_compiler, tmp_path):
    cells = [{"line": "a", "body": "x", "key": "k1"}, {"line": "b", "body": "y", "key": "k2"}]
    got = []

    def grade(order):
        inputs = tmp_path / f"in{len(got)}{threading.get_ident()}"
        inputs.mkdir()
        got.append(build.compile_plan(order, None, inputs))

    threads = [threading.Thread(target=grade, args=(cells,)), threading.Thread(target=grade, args=(cells[::-1],))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake_compiler == [["k1", "k2"]]                      # one build; the other caller waited for it
    assert got[0] == got[1] == {"k1": "built k1", "k2": "built k2"}


def test_a_cached_file_is_replaced_whole(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("old")
    build._write_whole(path, b"new")
    assert path.read_bytes() == b"new" and [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_build_ahead_builds_what_grading_then_finds(fake_compiler, tmp_path):
    from grader.judge import plan as plans

    nb = ROOT / "solutions" / "03_gemm" / "05_cute.ipynb"
    release = ROOT / "course" / "03_gemm" / "05_cute.ipynb"
    cells = plans.build(nb, release, nb).cuda
    assert len(cells) >= 2
    with build.BuildAhead(None, workers=2, enabled=True) as ahead:
        ahead.add(nb, release, nb)                               # the solution: its cells are built
        ahead.add(nb, release, None)                             # untouched: nothing to build
    assert fake_compiler == [sorted(c["key"] for c in cells)]
    inputs = tmp_path / "grading"
    inputs.mkdir()
    build.compile_plan(cells, None, inputs)                      # the grading: every cell found built
    assert len(fake_compiler) == 1


def test_nothing_is_built_ahead_without_a_gpu(fake_compiler):
    from grader.backend import SIMULATOR

    if not SIMULATOR:
        pytest.skip("a GPU is here")
    nb = ROOT / "solutions" / "03_gemm" / "05_cute.ipynb"
    with build.BuildAhead(None) as ahead:
        ahead.add(nb, ROOT / "course" / "03_gemm" / "05_cute.ipynb", nb)
    assert fake_compiler == []
