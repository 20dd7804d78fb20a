"""Lesson 05.04's FP8 kernel: variants of one source (dev/ch05_hopper/fp8_explore.cu, the lesson's cell
with two more template parameters) checked, timed beside torch._scaled_mm and profiled, on a Hopper GPU.

    python dev/ch05_hopper/fp8_explore.py check            # the promoting variants at a few shapes
    python dev/ch05_hopper/fp8_explore.py time 4096,8192   # every variant beside cuBLAS fp8 (tensorwise)
    python dev/ch05_hopper/fp8_explore.py once KERNEL|cublas [N]   # launches at N³ (for ncu)

Fp8<BM, BN, STAGES, CLUSTER, GROUP_M, SUB, MODE, PWARP, PING, PREF>: PREF 1 loads the scales one
k tile ahead; SUB 3 runs the k tile in two column halves one after the other through one partial of
BN / 4 registers (so BN = 192 fits: 96 + 48); PWARP 1 (a producer warp, no setmaxnreg) was tried on the
CPU only: ptxas still allots 168 registers (3 warps on one scheduler's quarter of the register file). PING 1 makes the two consumer
warpgroups take turns issuing their k tile's wgmmas (named barriers), so one promotes while the tensor
core runs the other's; SUB 2 splits each consumer's 64 × 128 into two
64 × 64 halves with their own partials (one half's promotion overlaps the other's wgmmas); MODE 1 is a
ceiling, timing only: no promotion (wrong values with block scales), the wgmmas accumulate all of K."""
from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fp8_gpu as G  # noqa: E402

import grader  # noqa: E402
from grader.problems import hopper_fp8 as F  # noqa: E402
from grader.problems.gemm import Shape  # noqa: E402

SRC = Path(__file__).with_name("fp8_explore.cu")
LESSON = "fp8_gemm<Fp8<128, 128, 6, 2, 8>>"
PROMOTING = ["fp8_gemm<Fp8<128, 128, 6, 2, 8, 1, 0, 0, 1>>", "fp8_gemm<Fp8<128, 128, 6, 2, 8, 1, 0, 0, 1, 1>>",
             "fp8_gemm<Fp8<128, 192, 4, 2, 8, 3, 0, 0, 1>>", "fp8_gemm<Fp8<128, 192, 4, 1, 8, 3, 0, 0, 1>>"]
CEILINGS = ["fp8_gemm<Fp8<128, 192, 4, 2, 8, 1, 1>>"]
if os.environ.get("FP8X_ROUND") == "3":      # beside the final lesson: turns without its lean k loop, the ceiling
    PROMOTING = ["fp8_gemm<Fp8<128, 128, 6, 2, 8, 1, 0, 0, 1>>"]
    CEILINGS = ["fp8_gemm<Fp8<128, 128, 6, 2, 8, 1, 1>>"]
if os.environ.get("FP8X_ROUND") == "1":      # the first run's set
    PROMOTING = [LESSON, "fp8_gemm<Fp8<128, 128, 6, 2, 8, 2>>", "fp8_gemm<Fp8<128, 128, 6, 1, 8, 2>>",
                 "fp8_gemm<Fp8<128, 128, 6, 2, 8, 1, 0, 0, 1>>", "fp8_gemm<Fp8<128, 128, 6, 1, 8, 1, 0, 0, 1>>"]
    CEILINGS = ["fp8_gemm<Fp8<128, 128, 6, 2, 8, 1, 1>>", "fp8_gemm<Fp8<128, 256, 4, 2, 8, 1, 1>>"]


def module(kernels):
    return G.module(kernels, "fp8x", SRC.read_text())


def step_check():
    mod = module(PROMOTING)
    for k in PROMOTING:
        try:
            grader.check(F.fp8_gemm_launch(mod[k]), F.fp8_gemm, sizes=G.SMOKE + [Shape(999, 1000, 1024)], quiet=True)
            print(f"CHECK {k}: right at {len(G.SMOKE) + 1} shapes", flush=True)
        except Exception as e:
            print(f"CHECK {k}: WRONG: {str(e).splitlines()[0][:300]}", flush=True)


def step_time(sizes):
    mod = module(PROMOTING + CEILINGS)
    problem = G._cached_problem()
    for n in sizes:
        for k in PROMOTING + CEILINGS:
            try:
                m = grader.measure(F.fp8_gemm_launch(mod[k]), problem, k + (" CEILING" if k in CEILINGS else ""),
                                   size=Shape(n, n, n))
                print(f"TIME {n}: {m}", flush=True)
            except Exception as e:
                print(f"TIME {n}: {k} failed: {str(e)[:300]}", flush=True)


def step_once(what, n):
    import numpy as np
    import torch

    rng = np.random.default_rng(0)
    s = Shape(n, n, n)
    inp = F.fp8_gemm.make_inputs(rng, s)
    a, b = torch.from_numpy(inp["a"]).cuda(), torch.from_numpy(inp["b"]).cuda()
    sa, sb = torch.from_numpy(inp["sa"]).cuda(), torch.from_numpy(inp["sb"]).cuda()
    c = torch.empty((n, n), device="cuda", dtype=torch.bfloat16)
    if what == "cublas":
        one = torch.ones((), device="cuda")
        bt = b.view(torch.float8_e4m3fn).t()
        run = lambda: torch._scaled_mm(a.view(torch.float8_e4m3fn), bt, scale_a=one, scale_b=one,  # noqa: E731
                                       out_dtype=torch.bfloat16)
    else:
        mod = G.module([G.LESSON]) if what == "lesson" else module([what])    # "lesson": the notebook's cell
        launch = F.fp8_gemm_launch(mod[G.LESSON if what == "lesson" else what])
        run = lambda: launch(a, b, sa, sb, c)  # noqa: E731
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    print("ONCE done", what, flush=True)


if __name__ == "__main__":
    try:
        if sys.argv[1] == "check":
            step_check()
        elif sys.argv[1] == "time":
            step_time([int(x) for x in sys.argv[2].split(",")])
        else:
            step_once(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 4096)
    except Exception:
        traceback.print_exc()
        sys.exit(1)
