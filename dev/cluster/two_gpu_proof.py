"""A class graded on two GPUs against the same class on one (issue 36): throughput, the figures, and
proof that no GPU graded two students at once.

6 students hand in the reference solution of one lesson (default: 01.01). The class is graded through
the judge, with feedback, on a local Dask cluster with one worker per GPU (each pinned by
CUDA_VISIBLE_DEVICES: grader.cluster.local_cluster), first on 2 GPUs, then on 1, each in a fresh scratch
course. Printed: wall time and students per second on each, their ratio (goal ≥ 1.9), every student's
speed figures and points on each run, and for every GPU the students it graded with their start and
end: no two of one GPU overlap (each worker is single-threaded; checked here from the workers' own
clocks, not assumed).

    python dev/cluster/two_gpu_proof.py [--lesson CHAPTER/NOTEBOOK] [--students 6] [--only 1|2] [--out DIR]

On a machine with 2 GPUs (nvidia-h200-x2). ``--only 1`` grades the class on one GPU alone (a machine with
one GPU, or the second half of a run that did not fit one call): its wall time is then compared with a
2-GPU run of another call, which is a ratio across two machines, not one run. Needs dask[distributed] (pip install '.[cluster]').
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from grader.autograde import make_scratch_course  # noqa: E402
from grader.cluster import grade_class, local_cluster  # noqa: E402
from grader.cuda.toolchain import gpu_count  # noqa: E402


def course_for(chapter: str, lesson: str, students: list[str], where: Path) -> Path:
    course = make_scratch_course(chapter, where, lessons=[lesson])
    for student in students:
        folder = course / "submitted" / student / chapter
        folder.mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / chapter / lesson, folder / lesson)
    return course


def grade(gpus: int, chapter: str, lesson: str, students: list[str], tmp: Path) -> dict:
    course = course_for(chapter, lesson, students, tmp / f"{gpus}gpu")
    cluster = local_cluster(gpus=gpus)
    try:
        t0 = time.monotonic()
        run = grade_class(course, chapter, cluster=cluster, feedback=True, force=True)
        wall = time.monotonic() - t0
    finally:
        cluster.close()
    assert not run.failed, run.failed
    rows = {}
    for student, r in run.results.items():
        speed = {v.grade_id: (v.score, v.max_score) for g in r.grades for v in g.verdicts}
        figures = [rec for nb in r.grading.get("notebooks", []) for rec in nb.get("records", []) if rec.get("kind") == "speed"]
        rows[student] = {"device": r.device, "worker": r.worker, "span": list(r.span), "points": speed,
                         "figures": [(f["problem"], round(f["fraction"], 4), round(f.get("value", 0), 1)) for f in figures],
                         "seconds": round(r.graded.seconds, 2)}
    return {"gpus": gpus, "wall_s": wall, "students": rows}


def overlaps(run: dict) -> list[str]:
    """Students graded at the same time on the same GPU (by the workers' own clocks)."""
    by_device: dict = {}
    for student, row in run["students"].items():
        by_device.setdefault(row["device"], []).append((row["span"][0], row["span"][1], student))
    bad = []
    for device, spans in by_device.items():
        spans.sort()
        for (a0, a1, sa), (b0, b1, sb) in zip(spans, spans[1:]):
            if b0 < a1:
                bad.append(f"{device}: {sa} and {sb} overlap by {a1 - b0:.2f} s")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lesson", default="01_elementwise/01_threads_and_blocks.ipynb")
    ap.add_argument("--students", type=int, default=6)
    ap.add_argument("--only", type=int, choices=(1, 2), default=None, help="grade on this many GPUs only")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    sizes = (a.only,) if a.only else (2, 1)
    if gpu_count() < max(sizes):
        print(f"needs {max(sizes)} GPUs, this machine has {gpu_count()}")
        return 2
    chapter, lesson = a.lesson.split("/")
    students = [f"student-{i}" for i in range(a.students)]
    with tempfile.TemporaryDirectory(prefix="two-gpu-proof-") as tmp:
        runs = [grade(n, chapter, lesson, students, Path(tmp)) for n in sizes]
    if len(runs) == 2:
        two, one = runs
        ratio = one["wall_s"] / two["wall_s"]
        print(f"\n{len(students)} students × {a.lesson}: 2 GPUs {two['wall_s']:.1f} s, 1 GPU {one['wall_s']:.1f} s: "
              f"throughput ×{ratio:.2f} on two (goal ≥ 1.9)")
    else:
        ratio = None
        print(f"\n{len(students)} students × {a.lesson}: {sizes[0]} GPU(s) {runs[0]['wall_s']:.1f} s")
    for run in runs:
        print(f"\n{run['gpus']} GPU(s): student, device, worker, start–end (s from the first start), seconds, points, figures")
        t0 = min(r["span"][0] for r in run["students"].values())
        for student, r in sorted(run["students"].items()):
            print(f"  {student:<11} {r['device']:<48} {r['worker']:<18} {r['span'][0] - t0:7.2f}–{r['span'][1] - t0:7.2f}"
                  f" {r['seconds']:7.2f}  {sum(p for p, _ in r['points'].values()):g}/{sum(m for _, m in r['points'].values()):g}"
                  f"  {r['figures']}")
        bad = overlaps(run)
        print("  no two students graded at once on one GPU (workers' clocks)" if not bad else "  OVERLAP: " + "; ".join(bad))
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "two_gpu_proof.json").write_text(json.dumps({"runs": runs, "ratio": ratio}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
