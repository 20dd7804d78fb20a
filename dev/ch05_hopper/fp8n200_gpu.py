"""Lesson 05.04's FP8 GEMM with 128 × 200 tiles beside 128 × 208 (dev/ch05_hopper/fp8_variants/n208.cu,
BN = 200 or 208), each also with ffma_yield.py's reuse_y4 cubin policy, on a Hopper GPU.

    python dev/ch05_hopper/fp8n200_gpu.py check OKFILE          # checked; the right ones' names to OKFILE
    python dev/ch05_hopper/fp8n200_gpu.py time OKFILE [SIZES] [ROUNDS]   # those timed beside the lesson

Why 200: at 8192³ a 208-wide tile gives 40 tile columns, the last 40% empty, and 2560 tiles = 19.4
waves of 132 SMs (20 in time); 200 gives 41 columns (the last 96% full), 2624 tiles = 19.9 waves, at
nearly the same per-tile cost (100 + 100 accumulator registers). The n200 kernel is checked at the
smoke shapes, shapes whose N meets all 16 positions of B's scale-block boundary (n0 % 128 in 8-column
steps), and every visible and hidden size; the others (n208 was checked in full before; the patched
cubins) at the smoke and boundary shapes. ``check`` runs in its own process (fp8n200_gpu.sh: a hang
there stops nothing else) and names the right kernels; ``time`` times only those, beside the lesson's
kernel (tools/ch05_hopper/fp8_cell.cu) and torch._scaled_mm tensorwise in one process, interleaved.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ffma_yield as Y  # noqa: E402
import fp8_gpu as G  # noqa: E402  (its module(), SMOKE, LESSON, _cached_problem; puts the repo on sys.path)
from fp8n208_gpu import okfile_main, time_checked  # noqa: E402

import grader  # noqa: E402
from grader.problems import hopper_fp8 as F  # noqa: E402
from grader.problems.gemm import Shape  # noqa: E402

SRC = G.ROOT / "dev" / "ch05_hopper" / "fp8_variants" / "n208.cu"
N200, N208 = "fp8_gemm_w<Fp8w<200, 4, 8>>", "fp8_gemm_w<Fp8w<208, 4, 8>>"
# N = 3200: 16 tile columns of 200, n0 % 128 = 0, 72, 16, 88, ... (all 16 boundary positions);
# 3208: one more, 8 wide; M not a multiple of 128
BOUNDARY = [Shape(256, 3200, 256), Shape(130, 3208, 384), Shape(64, 6400, 128)]
FULL = [N200]


def build() -> list[tuple[str, object]]:
    """(label, launch) of n200, n208 and each with reuse_y4 (the patched cubins)."""
    mod = G.module([N200, N208], "n200", SRC.read_text())
    out = []
    for k in (N200, N208):
        print(f"BUILD {k}: {mod.resources[k]} ({mod.compiler})", flush=True)
        out.append((k, F.fp8_gemm_launch(mod[k])))
    for k in (N200, N208):
        try:
            pm, changed, found = Y.patched_module(mod, k, "reuse_y4")
            print(f"PATCH {k} +reuse_y4: {changed} of {found} FFMAs changed", flush=True)
            if changed:
                out.append((k + " +reuse_y4", F.fp8_gemm_launch(pm[k])))
        except Exception as e:
            print(f"PATCH {k} +reuse_y4: failed: {str(e)[:300]}", flush=True)
    return out


def step_check(okfile: str) -> None:
    for label, launch in build():
        try:
            grader.check(launch, F.fp8_gemm, sizes=G.SMOKE + BOUNDARY, quiet=True)
            print(f"CHECK {label}: right at {len(G.SMOKE)} smoke and {len(BOUNDARY)} boundary shapes", flush=True)
            if label in FULL:
                grader.check(launch, F.fp8_gemm)
                grader.check(launch, F.fp8_gemm, hidden=True)
                print(f"CHECK {label}: right at every visible and hidden size", flush=True)
            with open(okfile, "a") as f:
                f.write(label + "\n")
        except Exception as e:
            print(f"CHECK {label}: WRONG: {' | '.join(str(e).splitlines()[:3])[:500]}", flush=True)


def step_time(okfile: str, sizes, rounds: int) -> None:
    time_checked(build(), okfile, sizes, rounds)


if __name__ == "__main__":
    okfile_main(step_check, step_time)
