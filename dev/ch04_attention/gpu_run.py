#!/usr/bin/env python3
"""Chapter 04 on a GPU through the grader: what `python -m grader scoreboard 04_attention` does,
one notebook at a time, keeping what each run leaves behind.

    python3 dev/ch04_attention/gpu_run.py OUT_DIR

Each solution notebook is autograded (nbgrader, as the instructor's autograde runs it) as its own
student, in the order 03, 04, 05, 02, 01 (the tensor-core lessons first), with $GRADER_RECORD set so
every speed cell and closing plot records its figure beside its peer from the same run. After each
notebook, OUT_DIR/scoreboard.json (the repo's results/scoreboard.json with chapter 04 merged in) and
the autograded notebook (with its outputs: every printed figure) are written, so a run cut short
keeps what it finished. The printed table is grader.scoreboard's.
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CHAPTER = "04_attention"
ORDER = ["03_fa2_tensor_cores.ipynb", "04_decoding.ipynb", "05_mla_decode.ipynb",
         "02_flash_attention_cuda_cores.ipynb", "01_naive_attention.ipynb"]


def main(out: Path) -> None:
    from grader import device, scoreboard
    from grader.autograde import autograde, make_scratch_course

    if device.info().simulator:
        raise SystemExit("needs a GPU")
    out.mkdir(parents=True, exist_ok=True)
    base = scoreboard.load(ROOT / "results" / "scoreboard.json")
    records, cells = [], []
    with tempfile.TemporaryDirectory(prefix="ch04-") as tmp:
        course = make_scratch_course(CHAPTER, Path(tmp) / CHAPTER, ROOT)
        for i, name in enumerate(ORDER):
            t0 = time.time()
            rec = Path(tmp) / f"{i}.jsonl"
            student = f"reference{i}"
            got = autograde([ROOT / "solutions" / CHAPTER / name], CHAPTER, course, student=student,
                            env={"GRADER_RECORD": str(rec)})
            if rec.exists():
                records += [json.loads(line) for line in rec.read_text().splitlines() if line.strip()]
            cells += [c.__dict__ for c in got]
            graded = course / "autograded" / student / CHAPTER / name
            if graded.exists():
                shutil.copy(graded, out / name)
            entry = {"device": device.info().name, "date": time.strftime("%Y-%m-%d"), "records": records,
                     "cells": cells, "note": "dev/ch04_attention/gpu_run.py: the chapter's solution notebooks "
                                             "autograded one by one on this GPU"}
            (out / "scoreboard.json").write_text(json.dumps(scoreboard.merge(base, CHAPTER, entry), indent=1, default=float))
            print(f"[{name}: {time.time() - t0:.0f} s, nbgrader exit {got.returncode}]", flush=True)
            for c in got:
                print(f"  {c.cell:<22} {c.score:5.2f} / {c.max_score:g}  {c.reason[:200]}", flush=True)
    print(scoreboard.format_chapter(CHAPTER, entry), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
