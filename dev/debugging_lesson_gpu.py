"""GPU: the runs lesson 05.04 shows to learners without a GPU, recorded (results/ch05/debugging/).

From the solution notebook's cells: the draft ring copy (the producer waits on the wrong parity) run in
its own process — the bounded wait's trap, and the same with printf before each wait (does device printf
survive a trap?); the draft transpose (no barrier) under racecheck, synccheck and memcheck; the fixed
kernels checked (grader.check) and the fixed transpose under racecheck (clean). Each report is written
as the lesson prints it (``str(report)``), with the device and date in hang.txt's first line.

    python dev/debugging_lesson_gpu.py --out $OUT      # writes OUT/debugging/*.txt, summary.json
    python dev/debugging_lesson_gpu.py --dry-run      # CPU: compiles the cells, pickles the launches

Copy OUT/debugging/{hang,racecheck,synccheck,memcheck}.txt to results/ch05/debugging/.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grader  # noqa: E402
from grader.cuda import sanitize  # noqa: E402
from grader.notebooks import run_cells  # noqa: E402
from grader.problems import debugging as P  # noqa: E402

NB = ROOT / "solutions/05_hopper_blackwell/04_debugging.ipynb"
RING, TR = "ring_copy<Ring<2>>", "smem_transpose<Tr<32, 8>>"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/debugging_gpu")))
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--budget", type=float, default=150.0)
    a = ap.parse_args()
    start = time.time()
    out = a.out / "debugging"
    out.mkdir(parents=True, exist_ok=True)
    if grader.SIMULATOR and not a.dry_run:
        print("needs a GPU (use --dry-run on a CPU)")
        sys.exit(2)
    ns = run_cells(NB, ["setup", "draft", "printf_replay", "ring", "launch_ring", "draft_tr", "tr", "launch_tr"])
    launch_draft = P.ring_copy_launch(ns["draft"][RING])
    launch_traced = P.ring_copy_launch(ns["traced_ring"][RING])
    launch_draft_tr = P.transpose_launch(ns["draft_tr"][TR])
    device = "CPU (dry run)" if grader.SIMULATOR else grader.device.info().name
    stamp = f"{device}, {datetime.date.today()}"
    runs = [("hang", launch_draft, P.ring_copy, (64, 64), None),
            ("printf", launch_traced, P.ring_copy, (64, 64), None),
            ("racecheck", launch_draft_tr, P.smem_transpose, (96, 64), "racecheck"),
            ("synccheck", launch_draft_tr, P.smem_transpose, (96, 64), "synccheck"),
            ("memcheck", launch_draft_tr, P.smem_transpose, (96, 64), "memcheck"),
            ("racecheck_fixed", ns["launch_tr"], P.smem_transpose, (96, 64), "racecheck")]
    summary = {"device": device, "date": str(datetime.date.today()), "runs": {}}
    lines = [f"dev/debugging_lesson_gpu.py on {stamp}; compute-sanitizer: {sanitize.__module__ and _tool()}"]
    for name, launch, problem, size, tool in runs:
        if a.dry_run:
            from grader.profiling import dumps

            lines.append(f"{name}: would run {tool or 'no tool'} on {problem.name} at {size} "
                         f"(launch pickled: {len(dumps((launch, problem, size)))} bytes)")
            continue
        if time.time() - start > a.budget:
            lines.append(f"{name}: skipped (budget)")
            continue
        t0 = time.time()
        rep = sanitize(launch, problem, size, tool=tool, show=False, timeout=90)
        secs = time.time() - t0
        text = str(rep)
        if name == "printf":
            text += "\n" + "\n".join(ln for ln in rep.text.splitlines() if "waits" in ln)[:4000]
        (out / f"{name}.txt").write_text(text + "\n")
        (out / f"{name}_full.log").write_text(rep.text)
        summary["runs"][name] = {"tool": tool, "size": list(size), "seconds": round(secs, 1), "outcome": rep.outcome,
                                 "findings": [f.headline for f in rep.findings], "summary": rep.summary}
        lines.append(f"{name:16} {secs:5.1f} s  {rep.outcome[:90]}  findings: {len(rep.findings)}  {rep.summary}")
    if not a.dry_run:
        from grader.check import check

        for label, launch, problem in (("ring (fixed)", ns["launch_ring"], P.ring_copy), ("tr (fixed)", ns["launch_tr"], P.smem_transpose)):
            try:
                check(launch, problem)
                lines.append(f"{label}: grader.check passed")
                summary["runs"][label] = "passed"
            except Exception as e:                       # noqa: BLE001
                lines.append(f"{label}: grader.check FAILED: {str(e)[:300]}")
                summary["runs"][label] = str(e)[:300]
        first = (out / "hang.txt").read_text() if (out / "hang.txt").exists() else ""
        (out / "hang.txt").write_text(f"(the draft ring copy at 64 × 64, in its own process, on {stamp})\n" + first)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    text = "\n".join(lines)
    (out / "debugging_lesson_gpu.txt").write_text(text + "\n")
    print(text)
    print(f"{time.time() - start:.0f} s; copy {out}/{{hang,racecheck,synccheck,memcheck}}.txt to results/ch05/debugging/")


def _tool():
    from grader.cuda.sanitizer import find_sanitizer

    return find_sanitizer() or "not found"


if __name__ == "__main__":
    main()
