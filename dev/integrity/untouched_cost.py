"""What grading an untouched notebook costs (issue 36: "an untouched stub ≤ 5 s on a GPU"): every
released lesson graded as its own submission through the judge, each timed, after the grader's
import (printed first). On a GPU machine the same shortcut applies: nothing is built or run.

    python dev/integrity/untouched_cost.py
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    t0 = time.monotonic()
    import grader
    from grader.judge.judge import grade
    from grader.judge.sandbox import choose

    box = choose()
    print(f"{grader.mode()}; the grader imported and the sandbox chosen in {time.monotonic() - t0:.2f} s", flush=True)
    seconds = []
    for release in sorted((ROOT / "course").glob("0*/*.ipynb")):
        source = ROOT / "solutions" / release.relative_to(ROOT / "course")
        t = time.monotonic()
        result = grade(source, release, release, box)
        seconds.append(time.monotonic() - t)
        got = sum(v.score for v in result.verdicts)
        out_of = sum(v.max_score for v in result.verdicts)
        print(f"{str(release.relative_to(ROOT)):60s} {seconds[-1]:6.2f} s  {got:g}/{out_of:g}  "
              f"{result.notes[-1][:70] if result.notes else ''}", flush=True)
    print(f"{len(seconds)} untouched notebooks: the slowest {max(seconds):.2f} s, all {sum(seconds):.2f} s")


if __name__ == "__main__":
    main()
