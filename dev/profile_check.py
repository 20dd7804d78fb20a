"""grader.profile on the course's references, beside a direct Nsight Compute run of the same launch;
and the recorded profiles the lessons' "find the bottleneck" cells show without a GPU.

For each reference (01.03 transpose: copy-bound; 03.04 mma.sync GEMM; 04.03 FA2; 05.03 the
warp-specialized GEMM; 05.07 FA3-style attention): build its launch from the solution notebook's
kernel, ``grader.profile`` it at the problem's bench size (written to OUT/profiles/<key>.json: copy
them to results/profiles/), then — for the three of the issue (01.03, 05.03, 05.07) — profile the
same pickled launch with a direct ncu command using Nsight Compute's own sections (SpeedOfLight,
LaunchStats, Occupancy) plus the raw metrics that have no section figure, and print each figure
both ways: metric names, values, and whether they agree (configuration figures exactly, percentages
within 3 points, times within 10%: two runs of one kernel).

    python dev/profile_check.py --out $OUT [--budget 220] [--only 05_03_ws_gemm,...]
    python dev/profile_check.py --dry-run      # CPU: builds and pickles every launch, prints the ncu
                                               # commands, runs the comparison on recorded/constructed CSV

Writes OUT/profiles/*.json, OUT/profile_check.txt (the table, the commands), OUT/ncu_*.log.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if "--dry-run" not in sys.argv:
    os.environ["GRADER_TEST_GPU"] = "1"        # tests.conftest (compile_cell's helpers) would choose the simulator

import grader  # noqa: E402  (GPU or simulator first)
from grader import profiling as prof  # noqa: E402


@dataclass
class Ref:
    key: str            # results/profiles/<key>.json
    label: str
    build: object       # () -> (launch, problem)
    kernel: str | None  # ncu's kernel filter
    compare: bool       # a direct ncu run beside grader.profile


def _compiled(chapter, notebook, cell, kernel):
    from tests.cells import compile_cell
    from grader.notebooks import cell_source

    return compile_cell(cell_source(ROOT / "solutions" / chapter / notebook, cell), only=kernel)[kernel]


def _transpose():
    from grader.notebooks import run_cells
    from grader.problems import elementwise as PE

    ns = run_cells(ROOT / "solutions/01_elementwise/03_coalescing_and_transpose.ipynb",
                   ["l03_setup", "l03_make_transpose", "l03_choose"])
    return ns["launch_transpose"], PE.transpose


def _hgemm():
    from grader.problems import gemm as PG

    return PG.tiled_launch(_compiled("03_gemm", "04_mma_sync_pipeline.ipynb", "v_hgemm", "hgemm<V3>")), PG.hgemm_bf16


def _fa2():
    from grader.problems import attention as PA

    return PA.fa2_launch(_compiled("04_attention", "03_fa2_tensor_cores.ipynb", "v_fa2", "fa2<V3<128>>")), PA.fa2


def _ws():
    from grader.problems import hopper as PH

    return PH.ws_gemm_launch(_compiled(CH5, "03_pipelines.ipynb", "v_ws", "ws_gemm<Ws<128, 256, 4, 2, 8>>")), PH.ws_gemm


def _fa3():
    from grader.problems import flash3 as PF

    return PF.flash3_launch(_compiled(CH5, "07_flash3.ipynb", "v_flash3", "flash3<F3<128, 1, 1, 1>>")), PF.flash3


CH5 = "05_hopper_blackwell"
REFS = [Ref("01_03_transpose", "01.03 transpose (copy-bound)", _transpose, None, True),
        Ref("03_04_hgemm", "03.04 mma.sync GEMM", _hgemm, "hgemm", False),
        Ref("04_03_fa2", "04.03 FA2 on tensor cores", _fa2, "fa2", False),
        Ref("05_03_ws_gemm", "05.03 warp-specialized GEMM", _ws, "ws_gemm", True),
        Ref("05_07_flash3", "05.07 FA3-style attention", _fa3, "flash3", True)]

# (what grader.profile shows, its ncu metric) -> the direct run's figure (a section's display name or
# the same raw metric passed with --metrics) and how close two runs must agree
PAIRS = [("time (ns)", "gpu__time_duration.sum", "Duration", "rel", 0.10),
         ("DRAM % of peak", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM Throughput", "abs", 3.0),
         ("SM % of peak", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "Compute (SM) Throughput", "abs", 3.0),
         ("memory % of peak", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "Memory Throughput", "abs", 3.0),
         ("registers / thread", "launch__registers_per_thread", "Registers Per Thread", "abs", 0.0),
         ("block size", "launch__block_size", "Block Size", "abs", 0.0),
         ("grid size", "launch__grid_size", "Grid Size", "abs", 0.0),
         ("theoretical occupancy %", "sm__maximum_warps_per_active_cycle_pct", "Theoretical Occupancy", "abs", 0.01),
         ("achieved occupancy %", "sm__warps_active.avg.pct_of_peak_sustained_active", "Achieved Occupancy", "abs", 3.0),
         ("tensor pipe % of peak", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
          "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "abs", 3.0),
         ("shared ld wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
          "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "rel", 0.01),
         ("shared ld bank conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
          "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "rel", 0.05)]
STALL_PAIRS = [(f"stall: {s}", prof._STALL.format(s), prof._STALL.format(s), "rel", 0.15)
               for s in ("long_scoreboard", "barrier", "gmma", "wait", "short_scoreboard", "mio_throttle")]
_TIME = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}


def direct_command(ncu: str, payload: Path, kernel: str | None) -> list[str]:
    extra = sorted({d for _, _, d, _, _ in PAIRS + STALL_PAIRS if "__" in d})
    cmd = [ncu, "--target-processes", "all", "--clock-control", "none", "--profile-from-start", "off",
           "--launch-count", "8", "--section", "SpeedOfLight", "--section", "LaunchStats", "--section", "Occupancy",
           "--metrics", ",".join(extra), "--csv", "--print-units", "base"]
    if kernel:
        cmd += ["--kernel-name", f"regex:{kernel}"]
    return cmd + [sys.executable, "-m", "grader.profiling", "--run", str(payload)]


def compare(p: prof.Profile, direct: list) -> list[tuple]:
    """Rows (figure, profile metric, value, direct figure, value, verdict) for the first kernel."""
    rows = []
    if not p.ok or not direct:
        return rows
    k, d = p.kernels[0], direct[0]
    for label, m, dm, how, tol in PAIRS + STALL_PAIRS:
        a = k.get(m)
        b = d.metrics.get(dm)
        if b is not None and dm == "Duration":
            b = (b[0] * _TIME.get(b[1], 1), "ns")
        b = None if b is None else b[0]
        if a is None or b is None:
            rows.append((label, m, a, dm, b, "n/a"))
            continue
        diff = abs(a - b) if how == "abs" else abs(a - b) / max(abs(b), 1e-12)
        ok = diff <= tol or (how == "rel" and abs(a - b) < 1e-9)
        rows.append((label, m, a, dm, b, "agree" if ok else f"DIFFER ({diff:.3g})"))
    return rows


def table(key, rows) -> str:
    out = [f"\n{key}", f"  {'figure':26} {'grader.profile metric':72} {'value':>14}   {'direct ncu figure':64} {'value':>14}  verdict"]
    for label, m, a, dm, b, v in rows:
        fa = "—" if a is None else f"{a:,.4g}"
        fb = "—" if b is None else f"{b:,.4g}"
        out.append(f"  {label:26} {m:72} {fa:>14}   {dm:64} {fb:>14}  {v}")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/profile_check")))
    ap.add_argument("--budget", type=float, default=220.0, help="seconds for everything (the lead's limit: 240)")
    ap.add_argument("--only", default="")
    ap.add_argument("--dry-run", action="store_true", help="CPU: build, pickle, print the commands, compare recorded CSV")
    a = ap.parse_args()
    start = time.time()
    out = a.out
    (out / "profiles").mkdir(parents=True, exist_ok=True)
    refs = [r for r in REFS if not a.only or r.key in a.only.split(",")]
    ncu = prof.find_ncu() or "ncu"
    report = [f"dev/profile_check.py {datetime.date.today()} ncu: {ncu}",
              f"mode: {grader.mode(compiled=True)}"]
    if not a.dry_run and grader.SIMULATOR:
        print("needs a GPU (use --dry-run on a CPU)")
        sys.exit(2)
    if not a.dry_run:
        try:
            report.append(subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1])
        except (OSError, IndexError):
            report.append("ncu --version failed")
    tables = []
    for r in refs:
        left = a.budget - (time.time() - start)
        if left < 25:
            report.append(f"{r.key}: skipped, {left:.0f} s of the budget left")
            continue
        t0 = time.time()
        try:
            launch, problem = r.build()
        except Exception as e:                                  # noqa: BLE001
            report.append(f"{r.key}: could not build the launch: {type(e).__name__}: {e}")
            continue
        size = problem.bench_size
        payload = prof.dumps((launch, problem, size))
        report.append(f"{r.key}: {r.label}, {problem.name} at {size}, launch pickled ({len(payload) / 1e6:.1f} MB), "
                      f"built in {time.time() - t0:.0f} s")
        with tempfile.TemporaryDirectory() as tmp:
            pkl = Path(tmp) / "launch.pkl"
            pkl.write_bytes(payload)
            dcmd = direct_command(ncu, pkl, r.kernel)
            if a.dry_run:
                report.append("  direct: " + " ".join(dcmd[:-5]) + " python -m grader.profiling --run launch.pkl")
                continue
            p = prof.profile(launch, problem, size, kernel=r.kernel, show=False, timeout=max(20, left - 10))
            report.append("  grader.profile: " + (str(p).splitlines()[0] if p.ok else str(p)))
            if p.ok:
                d = p.to_json()
                d["note"] = f"the course's reference, {p.device}, {problem.name} at {size}, {datetime.date.today()}"
                (out / "profiles" / f"{r.key}.json").write_text(json.dumps(d, indent=1))
                report += ["  " + ln for k in p.kernels for ln in k.lines()]
            (out / f"ncu_{r.key}_profile.log").write_text(" ".join(p.command) + "\n" + p.log)
            if r.compare and time.time() - start < a.budget - 20:
                res = subprocess.run(dcmd, capture_output=True, text=True, timeout=max(20, a.budget - (time.time() - start)),
                                     cwd=str(ROOT), env={**os.environ, "GRADER_FORCE_GPU": "1",
                                                           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")})
                (out / f"ncu_{r.key}_direct.log").write_text(" ".join(dcmd) + "\n" + res.stdout + res.stderr)
                direct = prof.parse_details_csv(res.stdout)
                report.append("  direct ncu: " + " ".join(dcmd[:-5]) + " python -m grader.profiling --run launch.pkl")
                if not direct:
                    report.append("  direct ncu measured nothing: " + (prof.diagnose(res.stdout + res.stderr) or res.stderr[-300:]))
                tables.append(table(r.key, compare(p, direct)))
    if a.dry_run:
        fixture = prof.parse_raw_csv((ROOT / "tests/ncu/raw_constructed.csv").read_text())
        real = prof.parse_details_csv((ROOT / "results/ch05/flash3_ncu_h100_2026-11-24_run1.csv").read_text())
        tables.append("(dry run: the comparison's code on a constructed raw CSV against a recorded details CSV of another "
                      "kernel — the values are not meant to agree)" + table("dry", compare(prof.Profile(kernels=fixture), real)))
    text = "\n".join(report + tables)
    (out / "profile_check.txt").write_text(text + "\n")
    print(text)
    print(f"\n{time.time() - start:.0f} s; profiles in {out / 'profiles'}")


if __name__ == "__main__":
    main()
