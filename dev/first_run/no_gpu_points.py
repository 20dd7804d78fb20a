"""What a machine without a GPU grades: every reference solution through the judge, per chapter.

    python dev/first_run/no_gpu_points.py [CHAPTER ...]      (default: every chapter)

Each solution notebook is graded as ``python -m grader grade`` grades a learner's (sandbox + judge,
Numba's simulator, compiled cells compiled for sm_90a and their SASS inspected), and its points are
summed per chapter: the README's "no GPU" column. Prints one line per lesson, then the table.
Runs on a CPU machine (it refuses a GPU one: there it would measure something else).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main(chapters: list[str]) -> None:
    from grader import device
    from grader.autograde import chapters_in, grade_lesson
    from grader.judge.sandbox import choose

    if not device.info().simulator:
        raise SystemExit("this counts what a machine without a GPU grades: run it on one")
    box, rows = choose(), []
    print(f"{time.strftime('%Y-%m-%d')}, no GPU (Numba's simulator; compile target sm_90a), sandbox {box.name}")
    for ch in chapters or chapters_in(ROOT):
        got = total = 0.0
        for nb in sorted((ROOT / "solutions" / ch).glob("*.ipynb")):
            start = time.monotonic()
            result, _ = grade_lesson(nb, ROOT / "course" / ch / nb.name, nb, box, feedback=False,
                                     env={"GRADER_SIM_TIMEOUT": "60"})
            g, t = sum(v.score for v in result.verdicts), sum(v.max_score for v in result.verdicts)
            got, total = got + g, total + t
            print(f"  {ch}/{nb.name}: {g:g} / {t:g} ({time.monotonic() - start:.0f} s)", flush=True)
        rows.append((ch, got, total))
    print(f"\n{'chapter':<22} {'points without a GPU':>22}")
    for ch, got, total in rows:
        print(f"{ch:<22} {got:>14g} / {total:g}")
    print(f"{'all':<22} {sum(r[1] for r in rows):>14g} / {sum(r[2] for r in rows):g}")


if __name__ == "__main__":
    main(sys.argv[1:])
