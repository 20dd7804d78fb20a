"""Lesson 05.03 (pipelines and warp specialization) on a Hopper GPU: checked, wrong kernels run, timed.

    python dev/ch05_hopper/pipelines_gpu.py probe          # cluster occupancy of the lesson's kernels
    python dev/ch05_hopper/pipelines_gpu.py check          # the lesson's kernel at every visible and hidden size
    python dev/ch05_hopper/pipelines_gpu.py build          # the CUTLASS cell built by nvcc (cached), no GPU needed
    python dev/ch05_hopper/pipelines_gpu.py cutlass        # the CUTLASS cell: built (nvcc), checked likewise
    python dev/ch05_hopper/pipelines_gpu.py wrong NAME     # one mistake of tests/wrong/ch05_pipelines.py: caught?
    python dev/ch05_hopper/pipelines_gpu.py time [SIZES]   # the ladder and variants beside cuBLAS (4096,8192)
    python dev/ch05_hopper/pipelines_gpu.py ncu            # one launch each of the best kernel and cuBLAS (for ncu)
    python dev/ch05_hopper/pipelines_gpu.py compile        # (CPU) every candidate: registers, spills, setmaxnreg

The kernels come from solutions/05_hopper_blackwell/03_pipelines.ipynb (v_ws, compiled with more
``ws_gemm<Ws<...>>`` instantiations: stages, tile 128 × 128, cluster 1 or 2, tile order), 05.02's
reference from 02_wgmma.ipynb (the first rung of the ladder) and the CUTLASS cell (cutlass_cell, a
host library). Correctness is grader.check before any timing; timing is grader.measure (cuBLAS
through torch.matmul on the same A and B, same run). pipelines_gpu.sh runs each step in its own
process with a timeout.
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

NB = ROOT / "solutions" / "05_hopper_blackwell" / "03_pipelines.ipynb"
NB02 = ROOT / "solutions" / "05_hopper_blackwell" / "02_wgmma.ipynb"
LESSON = "ws_gemm<Ws<128, 256, 4, 2, 8>>"
LADDER = ["ws_gemm<Ws<128, 256, 4, 1, 0>>", "ws_gemm<Ws<128, 256, 4, 1, 8>>", LESSON]
VARIANTS = ["ws_gemm<Ws<128, 256, 3, 2, 8>>", "ws_gemm<Ws<128, 256, 4, 2, 16>>", "ws_gemm<Ws<128, 128, 6, 2, 8>>"]
# run 1 (2026-11-24) also timed <128, 256, 4, 2, 0>, <128, 256, 4, 1, 16> and <128, 128, 6, 1, 8>
SMOKE = [Shape(128, 256, 64), Shape(1000, 1032, 1016), Shape(1, 8, 8), Shape(200, 136, 8200), Shape(2304, 4104, 256)]


def lesson_module(kernels=(LESSON,), name="ws"):
    src = cell_source(NB, "v_ws")
    flags = " ".join(f'-k "{k}"' for k in kernels)
    src = re.sub(r"^%%cuda \w+[^\n]*", f"%%cuda {name} {flags}", src)
    ns: dict = {}
    run_source(src, name, ns)
    return ns[name]


def wgmma_launch():
    """05.02's reference kernel and its launch (the ladder's first rung)."""
    ns: dict = {}
    run_source(cell_source(NB02, "v_wgmma"), "wg", ns)
    return P.wgmma_gemm_launch(ns["wg"]["wgmma_gemm<Wg<128, 256, 4>>"])


def cutlass_launch():
    ns: dict = {}
    run_source(cell_source(NB, "cutlass_cell"), "cl", ns)
    return P.cutlass_gemm_launch(ns["cl"]), ns["cl"]


def step_compile() -> None:
    mod = lesson_module(LADDER + VARIANTS, "all")
    for k in LADDER + VARIANTS:
        r = sass.require(mod, k, present=["HGMMA", "UTMALDG.2D", "UTMASTG.2D"], absent=["LDL", "STL"], raise_=False)
        try:
            smr = sass.require_setmaxnreg(mod, k, threads=mod.launch_shape(k).threads)
        except sass.RubricFailed as e:
            smr = str(e).splitlines()[-1]
        print(f"{k:34s} {mod.launch_shape(k)}; registers {r.registers}, spills {r.spill_stores or 0}, "
              f"{'ok' if r.ok else r.problems}; setmaxnreg {smr}")


def step_probe() -> None:
    mod = lesson_module(LADDER + VARIANTS, "all")
    print("SMs:", grader.device.info().sm_count)
    for k in LADDER + VARIANTS:
        shape = mod.launch_shape(k)
        cl = max(shape.cluster, 1)
        try:
            n = mod[k].max_active_clusters(cl)
        except Exception as e:
            n = f"failed: {e}"
        print(f"PROBE {k}: clusters of {cl} resident at once: {n}")


def step_check() -> None:
    mod = lesson_module()
    launch = P.ws_gemm_launch(mod[LESSON])
    grader.check(launch, P.ws_gemm)
    grader.check(launch, P.ws_gemm, hidden=True)
    print("CHECK: the reference passed every visible and hidden size")
    all_mod = lesson_module(LADDER + VARIANTS, "all")
    for k in LADDER + VARIANTS:
        try:
            grader.check(P.ws_gemm_launch(all_mod[k]), P.ws_gemm, sizes=SMOKE, quiet=True)
            print(f"CHECK {k}: right at {len(SMOKE)} shapes")
        except Exception as e:
            print(f"CHECK {k}: WRONG: {str(e).splitlines()[0]}")


def step_cutlass() -> None:
    launch, lib = cutlass_launch()
    print("CUTLASS built:", lib, "from the cache" if lib.from_cache else f"in {lib.compile_seconds:.0f} s")
    grader.check(launch, P.ws_gemm)
    grader.check(launch, P.ws_gemm, hidden=True)
    print("CUTLASS: right at every visible and hidden size")


def step_wrong(name: str) -> None:
    from tests.wrong import ch05_pipelines as W

    src = W.cpp_variant(cell_source(NB, "v_ws"), W.PIPELINE_MISTAKES[name])
    src = re.sub(r"^%%cuda \w+[^\n]*", f'%%cuda bad -k "{W.KERNEL}"', src)
    ns: dict = {}
    run_source(src, "bad", ns)
    from grader.check import CheckFailed, check

    try:
        check(P.ws_gemm_launch(ns["bad"][W.KERNEL]), P.ws_gemm, sizes=[Shape(1000, 1032, 1016), Shape(2304, 4104, 256)],
              quiet=True)
        print(f"RESULT {name}: NOT caught by the values", flush=True)
    except CheckFailed as e:
        print(f"RESULT {name}: caught: {' | '.join(str(e).splitlines()[:2])[:400]}", flush=True)
    import os

    os._exit(0)                      # a kernel may still spin: leave without waiting for it


def step_time(sizes) -> None:
    cands = []
    for what, make in (("05.02 TMA+WGMMA (no specialization)", wgmma_launch),
                       ("CUTLASS collective builder", lambda: cutlass_launch()[0])):
        try:
            cands.append((what, make()))
        except Exception:
            traceback.print_exc()
    try:
        mod = lesson_module(LADDER + VARIANTS, "all")
        cands += [(k, P.ws_gemm_launch(mod[k])) for k in LADDER + VARIANTS]
    except Exception:
        traceback.print_exc()
    good = []
    for k, launch in cands:
        try:
            grader.check(launch, P.ws_gemm, sizes=SMOKE[:2], quiet=True)
            good.append((k, launch))
        except Exception as e:
            print(f"{k}: WRONG, not timed: {str(e).splitlines()[0]}", flush=True)
    for n in sizes:
        size = Shape(n, n, n)
        for k, launch in good:
            try:
                print(f"TIME {size}: {grader.measure(launch, P.ws_gemm, k, size=size)}", flush=True)
            except Exception as e:
                print(f"TIME {size}: {k} failed: {e}", flush=True)


def step_ncu() -> None:
    """One launch of the lesson's kernel and one cuBLAS matmul at 8192³ (run under ncu)."""
    import torch

    mod = lesson_module()
    launch = P.ws_gemm_launch(mod[LESSON])
    a = torch.randn(8192, 8192, device="cuda").to(torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda").to(torch.bfloat16)
    c = torch.empty(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(2):
        launch(a, b, c)                               # bf16 tensors: the maps read them as 16-bit
        torch.matmul(a, b)
    torch.cuda.synchronize()
    print("ncu step done")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "time"
    if what == "compile":
        step_compile()
    elif what == "probe":
        step_probe()
    elif what == "check":
        step_check()
    elif what == "build":
        lib = cutlass_launch()[1]
        print("CUTLASS built:", lib, "from the cache" if lib.from_cache else f"in {lib.compile_seconds:.0f} s")
    elif what == "cutlass":
        step_cutlass()
    elif what == "wrong":
        step_wrong(sys.argv[2])
    elif what == "ncu":
        step_ncu()
    else:
        step_time([int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "4096,8192").split(",")])
