"""Where a graded notebook's runner spends its time on a GPU (issue 36): each given lesson is graded
through the judge as autograde grades it (GRADER_RUNNER=1), with the runner profiled
(GRADER_RUNNER_PROFILE=1): the judge's phases, then the runner's slowest functions (cumulative and
own time). ``--judge``: the judge's own process profiled too (peers, cases, references, comparisons).

    python dev/integrity/runner_profile.py [--judge] [CHAPTER/NOTEBOOK ...]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

DEFAULT = ["01_elementwise/04_vectors_half_precision_fusion.ipynb", "02_reduce/04_norms.ipynb",
           "04_attention/04_decoding.ipynb"]


def main(argv: list) -> None:
    from grader.judge.judge import grade
    from grader.judge.sandbox import choose
    from grader.judge.startup import print_profile, start_profile

    judge = "--judge" in argv
    argv = [a for a in argv if a != "--judge"]
    box = choose()
    for rel in argv or DEFAULT:
        src, rel_nb = ROOT / "solutions" / rel, ROOT / "course" / rel
        t0 = time.monotonic()
        profile = start_profile() if judge else None
        result = grade(src, rel_nb, src, box, env={"GRADER_RUNNER_PROFILE": "1"})
        if profile:
            print_profile(profile, lines=24, who="judge")
        print(f"== {rel}: {time.monotonic() - t0:.1f} s, {sum(v.score for v in result.verdicts):g}/"
              f"{sum(v.max_score for v in result.verdicts):g}")
        print("   " + ", ".join(f"{k} {v:.2f}" for k, v in result.timings.items()))
        print("\n".join("   " + ln for ln in result.log.splitlines() if ln.strip()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
