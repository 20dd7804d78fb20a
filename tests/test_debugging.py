"""Lesson 05.04 (debugging) and grader.cuda.sanitize, on the CPU; its GPU behaviour marked ``gpu``.

CPU: the problems keep only what TMA can describe and are exact; the lesson's fixed kernels pass their
replays while the drafts fail them — the ring's draft as a hang naming the barrier, the parity and
what is still due (with the printf trace), the transpose's draft as reads before writes — and the
untouched release says "not implemented yet"; compute-sanitizer's reports are parsed with one
sentence per finding (tests/sanitizer/*_constructed.txt: CONSTRUCTED in its documented layouts), a
fake compute-sanitizer proves the command line, and no GPU or no tool give one line. GPU: the fixed
kernels are right, the draft traps in its own process, racecheck reports the draft transpose's race.
"""
from __future__ import annotations

import re
import stat
import sys
import textwrap
from pathlib import Path

import pytest

import grader  # noqa: F401  (simulator first)
from grader.cuda import sanitizer as S
from grader.errors import CheckFailed
from grader.notebooks import cell_source
from grader.problems import debugging as P
from tests.cells import compile_cell
from tests.conftest import solution

NB = solution("05_hopper_blackwell", "04_debugging.ipynb")
HERE = Path(__file__).parent / "sanitizer"
RING, TR = "ring_copy<Ring<2>>", "smem_transpose<Tr<32, 8>>"


def _module(cell):
    return compile_cell(cell_source(NB, cell))


def _stub(cell):
    src = re.sub(r"// BEGIN SOLUTION.*?// END SOLUTION", "// YOUR CODE HERE", cell_source(NB, cell), flags=re.S)
    return compile_cell(src)


def test_the_problems_are_exact_and_tma_shaped():
    assert all(n % 4 == 0 for _, n in P.ring_copy.sizes + P.ring_copy.hidden_sizes)
    assert any(m % 32 and n % 32 for m, n in P.ring_copy.sizes)             # ragged against the box
    for p in (P.ring_copy, P.smem_transpose):
        assert p.tolerances(p.sizes[0], "float32") == (0.0, 0.0) and not p.simulator
    assert P.ring_copy.arch == "sm_90" and P.smem_transpose.arch == "sm_80"


def test_the_fixed_ring_replays_to_a_copy(capsys):
    P.check_ring_replay(_module("ring")[RING])
    assert "every wait completes and y = x" in capsys.readouterr().out


def test_the_draft_ring_hangs_on_the_producers_parity():
    draft = _module("draft")[RING]
    with pytest.raises(CheckFailed, match=r"waits for the phase of parity 0 of the mbarrier empty\[0\]"):
        P.check_ring_replay(draft)
    text = P.replay_verdict(draft)
    assert "threads 32–159 wait for the phase of parity 0 of the mbarrier full[0]" in text
    assert "128 of 128 arrivals" in text and "traps after about two seconds" in text


def test_the_printf_trace_names_the_last_wait():
    ns = {}
    from grader.notebooks import run_cells

    ns = run_cells(NB, ["setup", "draft", "printf_replay"])
    text = P.replay_verdict(ns["traced_ring"][RING], printf_lines=10)
    assert "thread 0: producer: box 0 waits empty[0] for parity 0" in text
    assert "consumer warp 0: box 0 waits full[0] for parity 0" in text


def test_the_fixed_transpose_replays_and_the_draft_races():
    P.check_transpose_replay(_module("tr")[TR])
    with pytest.raises(CheckFailed, match="read shared memory no thread had written yet"):
        P.check_transpose_replay(_module("draft_tr")[TR])


@pytest.mark.parametrize("cell, check", [("ring", P.check_ring_replay), ("tr", P.check_transpose_replay)])
def test_the_untouched_exercise_is_not_implemented_yet(cell, check):
    with pytest.raises(CheckFailed, match="not implemented yet"):
        check(_stub(cell)[RING if cell == "ring" else TR])


# ---------------------------------------------------------------- compute-sanitizer's reports
def test_racecheck_finding_and_its_meaning():
    findings, summary = S.parse((HERE / "racecheck_transpose_constructed.txt").read_text())
    assert summary == "RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)" and len(findings) == 1
    f = findings[0]
    assert f.headline.startswith("Race reported between Write access") and "[7936 hazards]" in f.lines[0]
    assert "__syncthreads()" in f.meaning and "tr.cu:28" in str(f)


def test_memcheck_and_synccheck_findings_and_their_meanings():
    mem, msum = S.parse((HERE / "memcheck_oob_constructed.txt").read_text())
    assert msum == "ERROR SUMMARY: 1 error" and mem[0].headline == "Invalid __global__ write of size 4 bytes"
    assert "bounds guard" in mem[0].meaning and "by thread (8,3,0) in block (2,0,0)" in mem[0].lines
    assert not any("Host Frame" in ln for ln in mem[0].lines)           # backtraces left out
    syn, _ = S.parse((HERE / "synccheck_divergent_constructed.txt").read_text())
    assert syn[0].headline == "Barrier error detected. Divergent thread(s) in block"
    assert "every thread must reach every barrier" in syn[0].meaning


def test_without_a_gpu_or_the_tool_one_line(monkeypatch, capsys):
    rep = S.sanitize(lambda *a: None, P.smem_transpose, (4, 4), tool="racecheck")
    assert rep.unavailable == S.NO_GPU and capsys.readouterr().out.strip() == f"not run: {S.NO_GPU}"
    monkeypatch.setattr(S, "find_sanitizer", lambda: None)
    from grader.profiling import dumps

    rep = S._run(lambda *a: None, P.smem_transpose, (4, 4), "memcheck", 30, False, dumps)
    assert rep.unavailable == S.NO_TOOL
    with pytest.raises(ValueError):
        S.sanitize(lambda *a: None, P.smem_transpose, tool="helgrind")


def test_a_fake_sanitizer_gets_the_launch_in_its_own_process(tmp_path, monkeypatch):
    log = tmp_path / "args.txt"
    fake = tmp_path / "compute-sanitizer"
    fake.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""
        import sys
        open({str(log)!r}, "w").write(" ".join(sys.argv[1:]))
        print(open({str(HERE / 'racecheck_transpose_constructed.txt')!r}).read())
    """))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(S, "find_sanitizer", lambda: str(fake))
    from grader.profiling import dumps

    rep = S._run(lambda *a: None, P.smem_transpose, (4, 4), "racecheck", 60, False, dumps)
    args = log.read_text()
    assert args.startswith("--tool racecheck --report-api-errors no --print-limit 50 ") and "-m grader.profiling --once" in args
    assert len(rep.findings) == 1 and rep.outcome == "the launch finished" and not rep.clean
    assert "Race reported" in str(rep) and "→ a thread read shared memory" in str(rep)


# ---------------------------------------------------------------- on a GPU
@pytest.mark.gpu
def test_gpu_the_fixed_kernels_are_right():
    from grader.check import check

    check(P.ring_copy_launch(_module("ring")[RING]), P.ring_copy)
    check(P.transpose_launch(_module("tr")[TR]), P.smem_transpose)


@pytest.mark.gpu
def test_gpu_the_draft_traps_in_its_own_process_and_racecheck_finds_the_race():
    rep = S.sanitize(P.ring_copy_launch(_module("draft")[RING]), P.ring_copy, (64, 64), tool=None, show=False)
    assert "failed" in rep.outcome, rep.text[-2000:]
    rep = S.sanitize(P.transpose_launch(_module("draft_tr")[TR]), P.smem_transpose, (96, 64), tool="racecheck",
                     show=False)
    assert any("Race reported" in f.headline for f in rep.findings), rep.text[-2000:]
