"""Lesson 05.04's FP8 GEMM with the promotion one k tile behind (dev/ch05_hopper/fp8_variants/pipelined.cu)
on a Hopper GPU.

    python dev/ch05_hopper/fp8pipe_gpu.py check OKFILE                  # checked; the right ones' names to OKFILE
    python dev/ch05_hopper/fp8pipe_gpu.py time OKFILE [SIZES] [ROUNDS]  # those timed beside the lesson

Each consumer holds two 64 × 128 partials: k tile t + 1's wgmmas are issued before k tile t's
promotion, so the promotion runs under its own consumer's wgmmas as well as the other's. The first
kernel is checked at the smoke shapes and every visible and hidden size, the others at the smoke
shapes; MODE 1 (no promotion FMAs: wrong values) is timed only, as the ceiling of the tile and
pipeline. ``time`` times the right ones beside the lesson's kernel (tools/ch05_hopper/fp8_cell.cu) and
torch._scaled_mm tensorwise in one process, interleaved round by round.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fp8_gpu as G  # noqa: E402  (its module(), SMOKE, LESSON; puts the repo on sys.path)
from fp8n208_gpu import okfile_main, time_checked  # noqa: E402

import grader  # noqa: E402
from grader.problems import hopper_fp8 as F  # noqa: E402

SRC = G.ROOT / "dev" / "ch05_hopper" / "fp8_variants" / "pipelined.cu"
PIPE = "fp8_gemm_p<Fp8p<6, 1, 8, 2>>"
KERNELS = [PIPE, "fp8_gemm_p<Fp8p<6, 2, 8, 2>>", "fp8_gemm_p<Fp8p<6, 1, 8>>"]
TIMING_ONLY = ["fp8_gemm_p<Fp8p<6, 1, 8, 1>>"]      # wrong values by design: the ceiling without FMAs


def build() -> list[tuple[str, object]]:
    mod = G.module(KERNELS + TIMING_ONLY, "pipe", SRC.read_text())
    for k in KERNELS + TIMING_ONLY:
        print(f"BUILD {k}: {mod.resources[k]} ({mod.compiler})", flush=True)
    return [(k, F.fp8_gemm_launch(mod[k])) for k in KERNELS + TIMING_ONLY]


def step_check(okfile: str) -> None:
    for label, launch in build():
        if label in TIMING_ONLY:
            continue
        try:
            grader.check(launch, F.fp8_gemm, sizes=G.SMOKE, quiet=True)
            print(f"CHECK {label}: right at {len(G.SMOKE)} smoke shapes", flush=True)
            if label == PIPE:
                grader.check(launch, F.fp8_gemm)
                grader.check(launch, F.fp8_gemm, hidden=True)
                print(f"CHECK {label}: right at every visible and hidden size", flush=True)
            with open(okfile, "a") as f:
                f.write(label + "\n")
        except Exception as e:
            print(f"CHECK {label}: WRONG: {' | '.join(str(e).splitlines()[:3])[:500]}", flush=True)


def step_time(okfile: str, sizes, rounds: int) -> None:
    time_checked(build(), okfile, sizes, rounds, timing_only=TIMING_ONLY)


if __name__ == "__main__":
    okfile_main(step_check, step_time)
