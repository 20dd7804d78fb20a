"""scoreboard: every reference solution's graded kernels against their peers, on this GPU.

``python -m grader scoreboard`` autogrades each solution notebook (the course's
reference kernels) through nbgrader on the current GPU, with $GRADER_RECORD set
so every speed cell and closing sweep appends its measurement. It writes
``results/scoreboard.json`` (device, date, each figure beside its peer measured in
the same run, the points nbgrader gave) and ``results/scoreboard.png``.
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from .autograde import CellGrade, autograde, chapters_in, make_scratch_course, repo_root

RESULTS = "results"


def results_path(root: Path | None = None) -> Path:
    return (root or repo_root()) / RESULTS / "scoreboard.json"


def load_recorded(kind: str, problem: str) -> dict | None:
    """The last recorded row of ``kind`` for ``problem`` from results/scoreboard.json, with device and date."""
    try:
        data = json.loads(results_path().read_text())
    except (OSError, ValueError, FileNotFoundError):
        return None
    for row in reversed(data.get("records", [])):
        if row.get("kind") == kind and row.get("problem") == problem:
            return {**row, "device": data.get("device", "?"), "date": data.get("date", "?")}
    return None


def run(chapters: list[str] | None = None, out_dir: Path | None = None) -> dict:
    from . import device

    if device.info().simulator:
        raise SystemExit("scoreboard needs a GPU: speed is not measured in the simulator.")
    root = repo_root()
    out_dir = out_dir or root / RESULTS
    out_dir.mkdir(parents=True, exist_ok=True)
    records, cells = [], []
    with tempfile.TemporaryDirectory(prefix="scoreboard-") as tmp:
        rec = Path(tmp) / "records.jsonl"
        for ch in chapters or chapters_in(root):
            course = make_scratch_course(ch, Path(tmp) / ch, root)
            nbs = sorted((root / "solutions" / ch).glob("*.ipynb"))
            cells += autograde(nbs, ch, course, student="reference", env={"GRADER_RECORD": str(rec)})
        if rec.exists():
            records = [json.loads(line) for line in rec.read_text().splitlines() if line.strip()]
    data = {"device": device.info().name, "date": time.strftime("%Y-%m-%d"),
            "records": records, "cells": [c.__dict__ for c in cells]}
    (out_dir / "scoreboard.json").write_text(json.dumps(data, indent=1, default=float))
    _plot(data, out_dir / "scoreboard.png")
    print(format_scoreboard(data))
    return data


def format_scoreboard(data: dict) -> str:
    lines = [f"scoreboard on {data['device']}, {data['date']}",
             f"{'kernel':<28} {'figure':>14} {'peer (same run)':>26} {'ratio':>7} {'points':>9}"]
    for r in data["records"]:
        if r["kind"] != "speed":
            continue
        lines.append(f"{r['problem']:<28} {r['value']:>9.1f} {r['unit']:<7} {r['peer']:>16} "
                     f"{r['peer_value']:>9.1f} {100 * r['fraction']:>6.1f}% "
                     f"{r['points']:>4g}/{r['max_points']:g}")
    total = sum(c["score"] for c in data["cells"])
    maxi = sum(c["max_score"] for c in data["cells"])
    lines.append(f"nbgrader points of the reference solutions: {total:g} / {maxi:g}")
    lost = [c for c in data["cells"] if c["score"] < c["max_score"]]
    for c in lost:
        why = c["reason"].replace("\n", "\n        ")       # a reason may run over several lines
        lines.append(f"  lost: {c['notebook']} {c['cell']}: {c['score']:g}/{c['max_score']:g} {why}")
    return "\n".join(lines)


def _plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from .plot import ladder

    rows = [(r["problem"], r["fraction"]) for r in data["records"] if r["kind"] == "speed"]
    if rows:
        fig = ladder(rows, title=f"Reference solutions vs peer, {data['device']} ({data['date']})")
        fig.savefig(path, dpi=110)
