"""Issue 19's two-GPU proof: a class graded across two GPUs, against the same class on one.

8 students hand in the reference solutions of chapters 01-03 (every notebook of each chapter). Each
chapter is graded on a local Dask cluster with 2 GPU workers (one per GPU, CUDA_VISIBLE_DEVICES),
then again on 1, each in a fresh scratch course. Printed: the devices used, wall time and
throughput ratio (goal >= 1.8x), and per speed figure the points and the judge's figure on each run
with their delta and the device of each.

    python dev/cluster/two_gpu_proof.py            # on a machine with 2 GPUs (nvidia-h200-x2)

Needs: pip install '.[cluster,gpu]' (dask-cuda optional). NOT RUN YET: no two-GPU machine was lent
when it was written.
"""
from __future__ import annotations

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

CHAPTERS = ["01_elementwise", "02_reduce", "03_gemm"]
STUDENTS = [f"student-{i}" for i in range(8)]


def course_for(chapter: str, where: Path) -> Path:
    course = make_scratch_course(chapter, where)
    for student in STUDENTS:
        folder = course / "submitted" / student / chapter
        folder.mkdir(parents=True)
        for nb in sorted((ROOT / "solutions" / chapter).glob("*.ipynb")):
            shutil.copy(nb, folder / nb.name)
    return course


def grade(gpus: int, tmp: Path) -> tuple[float, dict]:
    figures, seconds = {}, 0.0
    cluster = local_cluster(gpus=gpus)
    try:
        for chapter in CHAPTERS:
            course = course_for(chapter, tmp / f"{gpus}gpu-{chapter}")
            t0 = time.monotonic()
            run = grade_class(course, chapter, cluster=cluster, feedback=False, force=True)
            seconds += time.monotonic() - t0
            assert not run.failed, run.failed
            for student, r in run.results.items():
                for g in r.grades:
                    for v in g.verdicts:
                        if v.grade_id.startswith("speed"):
                            last = (v.output.strip().splitlines() or [""])[-1]
                            figures[(chapter, student, v.grade_id)] = (v.score, v.max_score, last, r.device)
    finally:
        cluster.close()
    return seconds, figures


def main() -> int:
    if gpu_count() < 2:
        print(f"needs 2 GPUs, this machine has {gpu_count()}")
        return 2
    with tempfile.TemporaryDirectory(prefix="two-gpu-proof-") as tmp:
        t2, f2 = grade(2, Path(tmp))
        t1, f1 = grade(1, Path(tmp))
    print(f"\n{len(STUDENTS)} students x {CHAPTERS}: 2 GPUs {t2:.1f} s, 1 GPU {t1:.1f} s, "
          f"throughput x{t1 / t2:.2f} (goal >= 1.8)")
    print("devices on 2 GPUs:", sorted({d for *_, d in f2.values()}))
    print("devices on 1 GPU: ", sorted({d for *_, d in f1.values()}))
    print(f"\n{'chapter':<16}{'student':<12}{'cell':<32}{'2 GPUs':>8}{'1 GPU':>8}{'delta':>8}  figure (2 GPUs | 1 GPU), device")
    for key in sorted(f2):
        s2, m, fig2, dev2 = f2[key]
        s1, _, fig1, dev1 = f1.get(key, (float("nan"), m, "", ""))
        print(f"{key[0]:<16}{key[1]:<12}{key[2]:<32}{s2:>8.2f}{s1:>8.2f}{s2 - s1:>+8.2f}  {fig2} | {fig1}, {dev2} | {dev1}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
