"""scoreboard: every reference solution's graded kernels against their peers, on this GPU.

``python -m grader scoreboard [CHAPTER ...]`` grades each chapter's solution notebooks (the
course's reference kernels) on the current GPU through the judge, as a class is graded, with
``$GRADER_RECORD`` set so every speed cell (timed by the judge) and closing plot (drawn in the
executed notebook) appends its measurement, and merges the run into ``results/scoreboard.json``:
one entry per chapter, each with its own device and date, so a chapter can be re-measured alone
(the whole course takes longer than one sitting). It also draws ``results/scoreboard.png``.
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from .paths import chapters_in, repo_root, results_dir


def results_path(root: Path | None = None) -> Path:
    return results_dir(root) / "scoreboard.json"


def load(path: Path | None = None) -> dict:
    """{"chapters": {chapter: {"device", "date", "flush", "note"?, "records", "cells"}}} ({} if none
    yet). ``flush``: grader.timing.FLUSH when the chapter was measured ("read" since 2026-11-24)."""
    try:
        data = json.loads((path or results_path()).read_text())
    except (OSError, ValueError):
        return {"chapters": {}}
    return data if "chapters" in data else {"chapters": {}}


def merge(data: dict, chapter: str, entry: dict) -> dict:
    """``data`` with ``chapter``'s entry replaced by ``entry`` (other chapters kept as they were)."""
    chapters = dict(data.get("chapters", {}))
    chapters[chapter] = entry
    return {**data, "chapters": {c: chapters[c] for c in sorted(chapters)}}


def load_recorded(kind: str, problem: str) -> dict | None:
    """The last recorded row of ``kind`` for ``problem``, with its chapter's device and date."""
    for entry in load()["chapters"].values():
        for row in reversed(entry.get("records", [])):
            if row.get("kind") == kind and row.get("problem") == problem:
                return {**row, "device": entry.get("device", "?"), "date": entry.get("date", "?")}
    return None


def run(chapters: list[str] | None = None, out_dir: Path | None = None, note: str = "",
        in_notebook: bool = False) -> dict:
    """Grade the chapters' solutions on this GPU through the judge and merge each chapter into
    ``out_dir/scoreboard.json``. ``in_notebook``: also time the speed cells inside the executed
    notebook (the learner's process), recorded beside the judge's figures (``by``)."""
    import os

    from . import device, timing
    from .autograde import CellGrade, grade_lesson
    from .judge.build import BuildAhead
    from .judge.sandbox import choose

    if device.info().simulator:
        raise SystemExit("scoreboard needs a GPU: speed is not measured in the simulator.")
    root = repo_root()
    out_dir = out_dir or results_dir(root)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "scoreboard.json"
    data = load(path)
    box = choose()
    solutions = {ch: sorted((root / "solutions" / ch).glob("*.ipynb")) for ch in chapters or chapters_in(root)}
    with tempfile.TemporaryDirectory(prefix="scoreboard-") as tmp, BuildAhead(box) as ahead:
        for ch, notebooks in solutions.items():      # the compiled cells, built on the CPU while the GPU grades
            for nb in notebooks:
                ahead.add(nb, root / "course" / ch / nb.name, nb)
        began = time.monotonic()
        for ch, notebooks in solutions.items():
            chapter_began = time.monotonic()
            rec = Path(tmp) / f"{ch}.jsonl"
            os.environ["GRADER_RECORD"] = str(rec)              # the judge (this process) records here
            cells, records, seconds = [], [], []
            for k, nb in enumerate(notebooks):
                print(f"{ch} [{k + 1}/{len(notebooks)}] {nb.name}", flush=True)
                result, _ = grade_lesson(nb, root / "course" / ch / nb.name, nb, box, feedback=True,
                                         records=records, time_in_notebook=in_notebook,
                                         progress=lambda line: print(f"    {line}", flush=True))
                print(f"    {result.seconds:.1f} s: " + ", ".join(f"{k} {v:.1f}" for k, v in result.timings.items()),
                      flush=True)
                cells += [CellGrade(nb.name, v.grade_id, v.score, v.max_score, v.reason) for v in result.verdicts]
                seconds.append({"notebook": nb.name, "total": round(result.seconds, 2),
                                **{k: round(v, 2) for k, v in result.timings.items()}})
            os.environ.pop("GRADER_RECORD", None)
            judged = [json.loads(line) for line in rec.read_text().splitlines() if line.strip()] if rec.exists() else []
            entry = {"device": device.info().name, "date": time.strftime("%Y-%m-%d"), "sandbox": box.name,
                     "flush": timing.FLUSH,
                     "records": judged + records, "cells": [c.__dict__ for c in cells], "judge_seconds": seconds}
            if note:
                entry["note"] = note
            data = merge(data, ch, entry)
            path.write_text(json.dumps(data, indent=1, default=float))   # each chapter as soon as it is done
            print(format_chapter(ch, entry), flush=True)
            print(f"{ch}: {time.monotonic() - chapter_began:.1f} s wall ({time.monotonic() - began:.1f} s so far)",
                  flush=True)
    draw(data, out_dir / "scoreboard.png")
    return data


def format_chapter(chapter: str, entry: dict) -> str:
    flush = f", L2 flushed by a {entry['flush']}" if entry.get("flush") else ""
    lines = [f"{chapter} on {entry['device']}, {entry['date']}{flush}",
             f"{'kernel':<28} {'by':<9} {'figure':>14} {'peer (same run)':>26} {'ratio':>7} {'points':>9}"]
    for r in entry["records"]:
        if r["kind"] != "speed":
            continue
        lines.append(f"{r['problem']:<28} {r.get('by', ''):<9} {r['value']:>9.1f} {r['unit']:<7} {r['peer'][:24]:>24} "
                     f"{r['peer_value']:>9.1f} {100 * r['fraction']:>6.1f}% {r['points']:>4g}/{r['max_points']:g}")
    total = sum(c["score"] for c in entry["cells"])
    maxi = sum(c["max_score"] for c in entry["cells"])
    lines.append(f"nbgrader points of the reference solutions: {total:g} / {maxi:g}")
    for c in entry["cells"]:
        if c["score"] < c["max_score"]:
            reason = "\n        ".join(c["reason"].splitlines()[:6])
            lines.append(f"  lost: {c['notebook']} {c['cell']}: {c['score']:g}/{c['max_score']:g} {reason}")
    return "\n".join(lines)


def format_scoreboard(data: dict) -> str:
    return "\n\n".join(format_chapter(ch, e) for ch, e in data["chapters"].items())


def draw(data: dict, path: Path) -> None:
    from .plot import ladder

    rows = [(f"{r['problem']} ({e['device'].replace('NVIDIA ', '')})", r["fraction"])
            for e in data["chapters"].values() for r in e["records"]
            if r["kind"] == "speed" and r.get("by", "judge") == "judge"]
    if rows:
        dates = sorted({e["date"] for e in data["chapters"].values()})
        when = dates[0] if len(dates) == 1 else f"{dates[0]}…{dates[-1]}"
        fig = ladder(rows, title="", clip=350)
        ax = fig.axes[0]
        ax.axvline(100, color="0.6", lw=0.8, zorder=0)                 # the peer itself
        fig.suptitle(f"The reference solutions as a % of their peers ({when})", fontsize=10)  # over the labels too
        fig.tight_layout()
        fig.savefig(path, dpi=110)
