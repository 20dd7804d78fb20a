"""How noisy is a graded speed figure? Grade the lesson 01.01 reference N times in a row.

    python dev/integrity/noise.py [N=10]          # on a GPU

Each round grades solutions/01_elementwise/01_threads_and_blocks.ipynb, less its ungraded block-size
sweep, as the instructor's autograde does (grader.autograde.grade_lesson: the judge, in the sandbox
grader.judge.sandbox.choose picks; the solution handed in as the submission, as the scoreboard does).
Prints every
round's figure (GB/s, % of the copy peer, points), then the spread of the figure
((max − min) / median, and the interquartile range), and whether the speed points ever differed.
grader.score.NOISE (the grace band below a target) must stay above the spread seen here.
Writes the rows to $OUT/noise.json when OUT is set.

The figure is what the grader itself measured and recorded: the judge's speed record for the cell
speed_vector_add, collected in this process (grader.record.collecting).
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))              # run as a script: the repository's grader

from grader.autograde import grade_lesson  # noqa: E402
from grader.judge.sandbox import choose  # noqa: E402
from grader.record import collecting  # noqa: E402
from grader.score import NOISE  # noqa: E402

LESSON = ROOT / "solutions" / "01_elementwise" / "01_threads_and_blocks.ipynb"
RELEASE = ROOT / "course" / "01_elementwise" / "01_threads_and_blocks.ipynb"


def without_sweep(nb) -> None:
    """Drop lesson 01.01's ungraded block-size sweep (on a GPU it takes ~25 s and grades nothing)."""
    nb.cells = [c for c in nb.cells if "grader.sweep_plot(" not in c.source]


def main(rounds: int = 10) -> int:
    rows = []
    box = choose()
    with tempfile.TemporaryDirectory(prefix="noise-") as tmp:
        made = {}
        for part, path in (("source", LESSON), ("release", RELEASE)):   # without the block-size sweep (~25 s)
            made[part] = Path(tmp) / part / LESSON.name
            made[part].parent.mkdir()
            nb = nbformat.read(path, as_version=4)
            without_sweep(nb)
            nbformat.write(nb, made[part])
        for r in range(rounds):
            with collecting() as recs:
                result, _ = grade_lesson(made["source"], made["release"], made["source"], box, feedback=False)
            speed = next(v for v in result.verdicts if v.grade_id == "speed_vector_add")
            m = next((x for x in recs if x.get("kind") == "speed"), {})
            rows.append({"round": r, "points": speed.score, "value": m.get("value"),
                         "fraction": m.get("fraction"), "spread": m.get("spread"), "reason": speed.reason})
            print(f"round {r}: {m.get('value', float('nan')):8.1f} GB/s  "
                  f"{100 * (m.get('fraction') or float('nan')):5.1f}% of copy  "
                  f"in-run spread {100 * (m.get('spread') or float('nan')):.1f}%  points {speed.score:g}", flush=True)
    values = [r["value"] for r in rows if r["value"]]
    points = {r["points"] for r in rows}
    if values:
        med = statistics.median(values)
        q = statistics.quantiles(values, n=4) if len(values) >= 4 else [med, med, med]
        print(f"\nfigure: median {med:.1f} GB/s, range {100 * (max(values) - min(values)) / med:.2f}% "
              f"of the median, interquartile {100 * (q[2] - q[0]) / med:.2f}%  (grace band NOISE = {100 * NOISE:.0f}%)")
    print(f"speed points seen: {sorted(points)} -> {'STABLE' if len(points) == 1 else 'DIFFERED'}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "noise.json").write_text(json.dumps(rows, indent=1))
    return 0 if len(points) == 1 else 1


if __name__ == "__main__":
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__)
        sys.exit(0)
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10))
