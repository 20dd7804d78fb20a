"""grader.profile (grader/profiling.py) on the CPU: Nsight Compute's CSV read back, the summary and
its plot, every path that measures nothing (no GPU, no ncu, counters restricted, metrics this ncu
does not know, no kernel profiled), the ncu command line, and a compiled cell pickled for the runner.

Fixtures: tests/ncu/*_constructed.* are CONSTRUCTED in ncu's documented layouts (not measurements);
results/ch05/flash3_ncu_h100_2026-11-24_run1.csv is a real `ncu --csv` export (H100) from the
course's own runs. The GPU side (figures against a direct ncu run) is dev/profile_check.py's.
"""
from __future__ import annotations

import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest

import grader  # noqa: F401  (simulator first)
from grader import profiling as prof
from tests.conftest import ROOT

HERE = Path(__file__).parent / "ncu"
RAW = (HERE / "raw_constructed.csv").read_text()


def test_raw_csv_is_read_with_units_and_thousands_separators():
    ks = prof.parse_raw_csv(RAW)
    assert [k.name.split("(")[0] for k in ks] == ["void wgmma_gemm<Wg<128, 256, 4>>", "transpose_tiled"]
    g = ks[0]
    assert g.get("gpu__time_duration.sum") == 216_320 and g.metrics["gpu__time_duration.sum"][1] == "nsecond"
    assert g.get("launch__shared_mem_per_block_dynamic") == 197_632
    assert g.duration_us == pytest.approx(216.32)
    assert g.dram_gbs == pytest.approx(610.73, rel=1e-3)
    assert g.stalls[0] == ("gmma", 6.71)


def test_the_summary_reads_each_figure():
    g, t = prof.parse_raw_csv(RAW)
    text = "\n".join(t.lines())
    assert "89.0 % of peak" in text and "memory-bound" in text                       # DRAM
    assert "long scoreboard 61.4" in text and "global (or local) memory loads" in text   # the top stall, explained
    ld, st = t.shared_wavefronts_per_request
    assert ld == pytest.approx(2_228_224 / 2_097_152) and st == pytest.approx(2_105_344 / 2_097_152)
    assert "1.06 / 1.00 wavefronts per load / store" in text and "139,264 bank-conflict wavefronts" in text
    assert "occupancy 87% achieved of 100% possible" in text and "limit: registers, 4 blocks/SM" in text
    g_text = "\n".join(g.lines())
    assert "tensor pipe" in g_text and "86.4 %" in g_text and "gmma 6.7" in g_text
    assert "168 / thread" in g_text and "limit: registers" in g_text


def test_the_plot_has_stalls_and_speed_of_light():
    p = prof.Profile(kernels=prof.parse_raw_csv(RAW), source="fixture")
    fig = p.plot()
    labels = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
    assert "long scoreboard" in labels and "gmma" in labels and "tensor pipe" in labels and "DRAM" in labels


def test_a_real_details_export_is_read():
    ks = prof.parse_details_csv((ROOT / "results/ch05/flash3_ncu_h100_2026-11-24_run1.csv").read_text())
    assert ks and ks[0].name.startswith("void flash3<F3<128, 1, 1, 1>>")
    k = ks[0]
    assert k.get("Duration") > 0 and "DRAM Throughput" in k.metrics
    assert k.get("smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio") is not None


def test_json_round_trip(tmp_path):
    p = prof.Profile(kernels=prof.parse_raw_csv(RAW), source="fixture", device="H100 (fixture)")
    path = p.save(tmp_path / "x.json")
    q = prof.Profile.from_json(__import__("json").loads(path.read_text()))
    assert [k.metrics for k in q.kernels] == [k.metrics for k in p.kernels] and q.device == "H100 (fixture)"


def test_without_a_gpu_one_line_says_why(capsys):
    from grader.problems import elementwise as P

    p = grader.profile(lambda *a: None, P.vector_add)
    assert not p.ok and p.unavailable == prof.NO_GPU
    assert capsys.readouterr().out.strip() == f"not profiled: {prof.NO_GPU}"


def test_without_ncu_one_line_says_how_to_get_it(monkeypatch):
    from grader.problems import elementwise as P

    monkeypatch.setattr(prof, "find_ncu", lambda: None)
    p = prof._run(lambda *a: None, P.vector_add, 1024, kernel=None, launch_count=2, ncu=None, timeout=30, simulator=False)
    assert p.unavailable == prof.NO_NCU and "nsight-compute" in p.unavailable


def test_find_ncu_honours_the_environment(tmp_path, monkeypatch):
    exe = _script(tmp_path / "myncu", "print('x')")
    monkeypatch.setenv("NCU", str(exe))
    assert prof.find_ncu() == str(exe)


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


FAKE = """
import os, sys
args = sys.argv[1:]
log = os.environ["FAKE_NCU_LOG"]
open(log, "a").write(" ".join(args) + "\\n")
mode = os.environ.get("FAKE_NCU_MODE", "ok")
if "--import" in args:
    print(open(os.environ["FAKE_NCU_CSV"]).read())
    sys.exit(0)
if mode == "perm":
    print(open(os.environ["FAKE_NCU_PERM"]).read())
    sys.exit(1)
if mode == "unknown" and "sm__pipe_tensor_op_hmma_cycles_active" in " ".join(args):
    print("==ERROR== Failed to find metric sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active")
    sys.exit(1)
if mode == "none":
    print("==WARNING== No kernels were profiled.")
    sys.exit(0)
rep = args[args.index("--export") + 1]
open(rep + ".ncu-rep", "w").write("report")
"""


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    exe = _script(tmp_path / "ncu", FAKE)
    log = tmp_path / "calls.txt"
    monkeypatch.setenv("FAKE_NCU_LOG", str(log))
    monkeypatch.setenv("FAKE_NCU_CSV", str(HERE / "raw_constructed.csv"))
    monkeypatch.setenv("FAKE_NCU_PERM", str(HERE / "err_nvgpuctrperm_constructed.txt"))
    return exe, log


def _profile(exe, **kw):
    from grader.problems import elementwise as P

    return prof._run(lambda *a: None, P.vector_add, 1 << 20, kernel=kw.get("kernel"), launch_count=2, ncu=str(exe),
                     timeout=60, simulator=False)


def test_the_ncu_command_and_its_report(fake_ncu):
    exe, log = fake_ncu
    p = _profile(exe, kernel="vadd")
    assert p.ok and len(p.kernels) == 2, p.unavailable
    run, imp = log.read_text().splitlines()
    for flag in ("--target-processes all", "--clock-control none", "--profile-from-start off", "--launch-count 2",
                 "--kernel-name regex:vadd", "-m grader.profiling --run"):
        assert flag in run
    assert "gpu__time_duration.sum" in run and "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio" in run
    assert "--page raw --csv --print-units base" in imp


def test_restricted_counters_say_how_to_enable_them(fake_ncu, monkeypatch):
    exe, log = fake_ncu
    monkeypatch.setenv("FAKE_NCU_MODE", "perm")
    p = _profile(exe)
    assert p.unavailable == prof.PERMISSION_HELP
    for words in ("ERR_NVGPUCTRPERM", "NVreg_RestrictProfilingToAdminUsers=0", "CAP_SYS_ADMIN", "root"):
        assert words in p.unavailable
    assert str(p).count("\n") == 0                                  # one line, no traceback


def test_metrics_this_ncu_does_not_know_are_dropped_once(fake_ncu, monkeypatch):
    exe, log = fake_ncu
    monkeypatch.setenv("FAKE_NCU_MODE", "unknown")
    p = _profile(exe)
    calls = log.read_text().splitlines()
    assert p.ok and len(calls) == 3                                 # refused, again without it, the import
    assert "sm__pipe_tensor_op_hmma_cycles_active" in calls[0] and "sm__pipe_tensor_op_hmma_cycles_active" not in calls[1]


def test_no_kernel_profiled_says_so(fake_ncu, monkeypatch):
    exe, _ = fake_ncu
    monkeypatch.setenv("FAKE_NCU_MODE", "none")
    p = _profile(exe)
    assert "profiled no kernel" in p.unavailable


def test_a_compiled_cell_travels_by_value():
    import pickle

    from grader.cuda import compile_cuda

    m = compile_cuda('extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.f; }', name="pk", arch="sm_90a")
    kern = m["k"]
    launch = lambda x: kern[(1,), (32,)](x)                       # noqa: E731  (a closure over a compiled kernel)
    f2 = pickle.loads(prof.dumps(launch))
    k2 = f2.__closure__[0].cell_contents
    assert k2.symbol == kern.symbol and bytes(k2.module.cubin) == bytes(m.cubin) and k2 is not kern


def test_a_recorded_profile_is_found_or_named_missing(tmp_path):
    assert "no recorded profile" in prof.recorded("nope", root=tmp_path).unavailable
    (tmp_path / "results" / "profiles").mkdir(parents=True)
    prof.Profile(kernels=prof.parse_raw_csv(RAW)).save(tmp_path / "results" / "profiles" / "x.json")
    assert prof.recorded("x", root=tmp_path).ok


def test_inside_the_judge_nothing_is_profiled_or_sanitized(fake_ncu, monkeypatch):
    """Every judged run skips ncu and compute-sanitizer, the scoreboard's --in-notebook runs (which set
    GRADER_RUNNER=0 to time speed cells in the notebook) too: the runner's environment always says
    GRADER_IN_JUDGE=1, last."""
    from grader.cuda import sanitizer
    from grader.judge.remote import runner_env
    from grader.problems import elementwise as P

    env = runner_env({"GRADER_RUNNER": "0", "GRADER_JUDGED": "0", "GRADER_IN_JUDGE": "0"})
    assert env["GRADER_RUNNER"] == "0" and env["GRADER_IN_JUDGE"] == "1"
    exe, log = fake_ncu
    monkeypatch.setenv("GRADER_RUNNER", "0")
    assert _profile(exe).ok                                            # the learner's own lab: profiled
    for k, v in env.items():
        if k.startswith("GRADER_IN") or k == "GRADER_RUNNER":
            monkeypatch.setenv(k, v)
    p = _profile(exe)
    assert not p.ok and p.unavailable == prof.GRADING
    r = sanitizer._run(lambda *a: None, P.vector_add, 1024, "racecheck", 30, False, lambda x: b"")
    assert r.unavailable == sanitizer.GRADING
