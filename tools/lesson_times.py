"""Records each lesson's honest grading time in grader/data/lesson_times.json, from which the judge
derives how long a sandbox may run (grader.judge.sandbox.lesson_time_s: factor × time + slack).

    python tools/lesson_times.py gpu                 # from results/scoreboard.json's judge_seconds
    python tools/lesson_times.py sim [CHAPTER ...]   # grade each reference in the simulator, here

Run ``gpu`` after a scoreboard run on a GPU and ``sim`` on a CPU machine like CI's (2 cores); commit
the file with the run that produced it.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TABLE = ROOT / "grader" / "data" / "lesson_times.json"


def load() -> dict:
    try:
        return json.loads(TABLE.read_text())
    except (OSError, ValueError):
        return {"factor": 4, "slack_s": 60, "lessons": {}}


def save(table: dict) -> None:
    table["lessons"] = dict(sorted(table["lessons"].items()))
    TABLE.write_text(json.dumps(table, indent=1) + "\n")


def from_scoreboard(table: dict) -> None:
    data = json.loads((ROOT / "results" / "scoreboard.json").read_text())
    for chapter, entry in data["chapters"].items():
        for row in entry.get("judge_seconds", []):
            seconds = row.get("total") or sum(v for k, v in row.items() if k != "notebook" and "." not in k)
            table["lessons"].setdefault(row["notebook"], {})["gpu_s"] = round(seconds, 1)
            table["lessons"][row["notebook"]]["gpu_measured"] = f"{entry['device']}, {entry['date']}"


def in_simulator(table: dict, chapters: list[str]) -> None:
    import grader  # noqa: F401  (the simulator, before Numba loads)
    from grader.autograde import chapters_in, grade_lesson
    from grader.judge.sandbox import choose

    box = choose()
    for chapter in chapters or chapters_in(ROOT):
        for nb in sorted((ROOT / "solutions" / chapter).glob("*.ipynb")):
            start = time.monotonic()
            grade_lesson(nb, ROOT / "course" / chapter / nb.name, nb, box, feedback=True)
            seconds = time.monotonic() - start
            table["lessons"].setdefault(nb.name, {})["sim_s"] = round(seconds, 1)
            print(f"{chapter}/{nb.name}: {seconds:.1f} s", flush=True)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("gpu", "sim"):
        print(__doc__)
        return 2
    table = load()
    from_scoreboard(table) if argv[0] == "gpu" else in_simulator(table, argv[1:])
    table["about"] = ("Each lesson's reference graded through the judge: seconds on a GPU (gpu_s, the scoreboard's "
                      "judge_seconds) and in the simulator on a 2-core CPU (sim_s). A sandbox may run for factor × "
                      "this + slack_s (grader.judge.sandbox.lesson_time_s). Written by tools/lesson_times.py.")
    save(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
