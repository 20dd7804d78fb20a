"""Lesson 05.02 (WGMMA) on a Hopper GPU: the reference checked, the wrong kernels run, candidates timed.

    python dev/ch05_hopper/wgmma_gpu.py check          # the lesson's kernel at every visible and hidden size
    python dev/ch05_hopper/wgmma_gpu.py wrong NAME     # one mistake of tests/wrong/ch05_wgmma.py: caught?
    python dev/ch05_hopper/wgmma_gpu.py time [--quick] # the cell's configurations beside cuBLAS
    python dev/ch05_hopper/wgmma_gpu.py compile        # (CPU) every candidate compiles; registers, spills

The lesson's cell comes from solutions/05_hopper_blackwell/02_wgmma.ipynb (v_wgmma), compiled with
more ``wgmma_gemm<Wg<BM, BN, STAGES>>`` instantiations. Correctness is grader.check on ragged sizes
before any timing; timing is grader.measure (cuBLAS through torch.matmul on the same A and B, same run) at
4096³ and 8192³. Each step prints one line per candidate; wgmma_gpu.sh runs the steps, each in its
own process with a timeout.
"""
from __future__ import annotations

import re
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import grader  # noqa: E402
from grader.cuda import sass  # noqa: E402
from grader.notebooks import cell_source, run_source  # noqa: E402
from grader.problems import hopper as P  # noqa: E402
from grader.problems.gemm import Shape  # noqa: E402

NB = ROOT / "solutions" / "05_hopper_blackwell" / "02_wgmma.ipynb"
LESSON = "wgmma_gemm<Wg<128, 256, 4>>"
CONFIGS = [LESSON, "wgmma_gemm<Wg<128, 256, 3>>", "wgmma_gemm<Wg<128, 128, 4>>", "wgmma_gemm<Wg<128, 128, 3>>",
           "wgmma_gemm<Wg<64, 256, 4>>", "wgmma_gemm<Wg<64, 128, 2>>"]
SMOKE = [Shape(128, 256, 64), Shape(1000, 1032, 1016), Shape(1, 8, 8), Shape(200, 136, 8200)]


def lesson_module(kernels=(LESSON,)):
    src = cell_source(NB, "v_wgmma")
    flags = " ".join(f'-k "{k}"' for k in kernels)
    src = re.sub(r"^%%cuda \w+[^\n]*", f"%%cuda wg --arch sm_90a {flags}", src)
    ns: dict = {}
    run_source(src, "wg", ns)
    return ns["wg"]


def step_compile() -> None:
    mod = lesson_module(CONFIGS)
    for k in CONFIGS:
        r = sass.require(mod, k, present=["HGMMA", "UTMALDG.2D"], absent=["LDL", "STL"], raise_=False)
        print(f"{k:40s} {mod.launch_shape(k)}; registers {r.registers}, spills {r.spill_stores or 0}, "
              f"{'ok' if r.ok else r.problems}")


def step_check() -> None:
    mod = lesson_module()
    launch = P.wgmma_gemm_launch(mod[LESSON])
    grader.check(launch, P.wgmma_gemm)
    grader.check(launch, P.wgmma_gemm, hidden=True)
    print("CHECK: the reference passed every visible and hidden size")


def step_wrong(name: str) -> None:
    from tests.wrong import ch05_wgmma as W
    from tests.wrong import caught

    src = W.cpp_variant(cell_source(NB, "v_wgmma"), W.WGMMA_MISTAKES[name])
    ns: dict = {}
    run_source(re.sub(r"^%%cuda \w+", "%%cuda bad", src), "bad", ns)
    mod = ns["bad"]
    rubric = "passes"
    try:
        sass.require_wgmma(mod, W.KERNEL)
        sass.require_fence(mod, W.KERNEL, writes="HGMMA", fence="WARPGROUP.DEPBAR.LE", reader="UTMALDG")
    except sass.RubricFailed as e:
        rubric = "FAILS: " + str(e).splitlines()[-1].strip()
    why = caught(P.wgmma_gemm_launch(mod[W.KERNEL]), P.wgmma_gemm)
    values = "caught: " + why.splitlines()[0] if why else "NOT caught by the values"
    print(f"RESULT {name}: values {values} | rubric {rubric}")


def step_time(quick: bool) -> None:
    cands = []
    try:
        lm = lesson_module(CONFIGS)
        cands += [(k, P.wgmma_gemm_launch(lm[k])) for k in CONFIGS]
    except Exception:
        traceback.print_exc()
    try:                                              # a mistake that stays right: how slow is serialized?
        from tests.wrong import ch05_wgmma as W
        src = W.cpp_variant(cell_source(NB, "v_wgmma"), W.WGMMA_MISTAKES["final_wait_one"])
        ns: dict = {}
        run_source(re.sub(r"^%%cuda \w+", "%%cuda ser", src), "ser", ns)
        cands.append(("wrong final_wait_one (serialized)", P.wgmma_gemm_launch(ns["ser"][LESSON])))
    except Exception:
        traceback.print_exc()
    good = []
    for k, launch in cands:
        try:
            grader.check(launch, P.wgmma_gemm, sizes=SMOKE, quiet=True)
            good.append((k, launch))
        except Exception as e:
            print(f"{k}: WRONG, not timed: {str(e).splitlines()[0]}")
    for size in ([Shape(4096, 4096, 4096)] if quick else [Shape(4096, 4096, 4096), Shape(8192, 8192, 8192)]):
        for k, launch in good:
            if size.M > 4096 and k != LESSON:
                continue
            try:
                print(f"{size}: {grader.measure(launch, P.wgmma_gemm, k, size=size)}", flush=True)
            except Exception as e:
                print(f"{size}: {k} failed: {e}", flush=True)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "time"
    if what == "compile":
        step_compile()
    elif what == "check":
        step_check()
    elif what == "wrong":
        step_wrong(sys.argv[2])
    else:
        step_time("--quick" in sys.argv)
