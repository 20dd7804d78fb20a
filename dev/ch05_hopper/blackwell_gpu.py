"""Lesson 05.09 (Blackwell) on whatever GPU is lent: prove the "needs sm_100" path, run what can run.

1. The device, its compute capability, and what the Blackwell problems say about it
   (``Problem.unavailable``: on an H100, "compiled and inspected only: running it needs a Blackwell
   GPU (B200/GB200, sm_100a); this GPU has compute capability 9.0").
2. The solution notebook graded through the judge (sandboxed runner, as ``python -m grader
   autograde``): every cell gets its verdict. Off Blackwell: the rubric and descriptor cells earn
   everything, the tcgen05 correctness and speed cells earn 0 saying "compiled and inspected only",
   the exp2 kernel's cell earns its point on any GPU from sm_80. On an sm_100 GPU every cell must earn
   its points (speed: a fraction of them, by the figure).
3. The released (untouched) notebook through the judge: every cell 0, each with a reason.
4. The ``gpu``-marked tests of tests/test_ch05_blackwell.py in a process of their own (the exp2 kernel
   on any sm_80+ GPU, a cluster launch with a tensor-map argument on any sm_90+ GPU, and on sm_100 the
   tcgen05 kernels and their mistakes, each possible hang bounded by GRADER_GPU_TIMEOUT).
5. On sm_100 only: both tcgen05 GEMMs beside cuBLAS (``grader.measure`` at 4096³), the figure the
   curriculum's goal is about (≥ 90% of cuBLAS).

Exit 1 if any expectation above fails. Run from the repo root on the device machine (after
``source .carry/dev_env.sh`` and ``export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap``; see
dev/ch05_hopper/gpu_run.sh): ``python dev/ch05_hopper/blackwell_gpu.py [OUTDIR]``.
"""
from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
CH, NB = "05_hopper_blackwell", "09_blackwell.ipynb"
NOT_HERE = "compiled and inspected only"


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    import grader
    from grader.autograde import grade_lesson
    from grader.cuda.toolchain import compute_capability
    from grader.judge.sandbox import choose
    from grader.problems import blackwell as P

    cc = compute_capability()
    if cc is None:
        print("no GPU: this script is for the device machine (exit 2)")
        return 2
    blackwell = cc == (10, 0)
    print(f"device: {grader.device.info().name}, compute capability {cc[0]}.{cc[1]}, {datetime.date.today()}")
    for problem in (P.umma_gemm, P.mxfp8_gemm, P.nvfp4_gemm, P.exp2_kernel):
        print(f"  {problem.name}: {problem.unavailable(False, cc) or 'runs here'}")
    failures = []

    result, _ = grade_lesson(ROOT / "solutions" / CH / NB, ROOT / "course" / CH / NB, ROOT / "solutions" / CH / NB,
                             choose(), feedback=False, gpu=True)
    print(f"\nthe solution through the judge ({result.seconds:.0f} s): "
          f"{sum(v.score for v in result.verdicts):g} of {sum(v.max_score for v in result.verdicts):g} points")
    for note in result.notes:
        print("  note:", note)
        failures.append(f"note: {note}")
    needs_blackwell = {"test_umma_visible", "test_umma_hidden", "speed_umma", "test_mxfp8", "test_nvfp4"}
    for v in result.verdicts:
        print(f"  {v.grade_id:<20} {v.score:>5g} / {v.max_score:<3g} {v.reason.splitlines()[0] if v.reason else ''}")
        if v.grade_id in needs_blackwell and not blackwell:
            if v.score != 0 or NOT_HERE not in v.reason or f"this GPU has compute capability {cc[0]}.{cc[1]}" not in v.reason:
                failures.append(f"{v.grade_id}: expected 0 and '{NOT_HERE} … this GPU has compute capability …'")
        elif v.grade_id == "test_exp2_gpu" and cc < (8, 0):
            continue
        elif v.grade_id == "speed_umma":
            if not v.score > 0:
                failures.append(f"{v.grade_id}: no speed points on Blackwell ({v.reason})")
        elif v.score != v.max_score:
            failures.append(f"{v.grade_id}: {v.score}/{v.max_score}: {v.reason}")

    untouched, _ = grade_lesson(ROOT / "solutions" / CH / NB, ROOT / "course" / CH / NB, None, choose(),
                                feedback=False, gpu=True)
    bad = [v.grade_id for v in untouched.verdicts if v.score != 0 or not v.reason]
    print(f"\nthe untouched release: {sum(v.score for v in untouched.verdicts):g} points"
          + (f"; cells that scored or gave no reason: {bad}" if bad else ", every cell with a reason"))
    failures += [f"untouched {g} scored or gave no reason" for g in bad]

    env = {**os.environ, "GRADER_GPU_TIMEOUT": "10", "GRADER_TEST_GPU": "1"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-m", "gpu", "tests/test_ch05_blackwell.py"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    print("\ngpu tests of tests/test_ch05_blackwell.py:\n" + "\n".join(r.stdout.strip().splitlines()[-15:]))
    if r.returncode != 0:
        failures.append("gpu tests failed")

    if blackwell:
        launch = {k: P.umma_gemm_launch(m) for k, m in _gemm_kernels().items()}
        for name, fn in launch.items():
            print(grader.measure(fn, P.umma_gemm, name))

    print("\n" + ("every expectation met" if not failures else "FAILED:\n  " + "\n  ".join(failures)))
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "blackwell_summary.txt").write_text("\n".join(failures) or "ok\n")
    return 1 if failures else 0


def _gemm_kernels():
    from grader.cuda import compile_cuda
    from grader.cuda.magic import parse_magic_line
    from grader.notebooks import cell_source

    first, _, body = cell_source(ROOT / "solutions" / CH / NB, "v_umma").partition("\n")
    args = parse_magic_line(first[len("%%cuda"):])
    module = compile_cuda(body, name="um", arch=args["arch"], kernels=args["kernels"])
    return {k: module[k] for k in args["kernels"]}


if __name__ == "__main__":
    sys.exit(main())
