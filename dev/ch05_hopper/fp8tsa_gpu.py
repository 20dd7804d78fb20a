"""Lesson 05.04's FP8 GEMM with the scales loaded by TMA into each ring slot
(dev/ch05_hopper/fp8_variants/tma_scales.cu) on a Hopper GPU.

    python dev/ch05_hopper/fp8tsa_gpu.py check OKFILE                  # checked; the right ones' names to OKFILE
    python dev/ch05_hopper/fp8tsa_gpu.py time OKFILE [SIZES] [ROUNDS]  # those timed beside the lesson

The producer loads a k tile's 128 row scales of sa with the tile, on the same full barrier, so a
consumer reads its two from shared memory (LDS) instead of two __ldg a k tile (sb's two stay __ldg: the
same address in every lane). TMA needs sa M-major — (K/128, M), rows padded to a multiple of 4 floats,
the layout DeepGEMM and cuBLAS's block-scaled kernel take. (sb by TMA too, as (K/128, ⌈N/128⌉ padded
to 4) with a 1 × 4 box at n0 / 128, faulted — misaligned address, or a trap — whenever K > 128 or the
box started off a 16-byte boundary; not pursued.) The problem hands sa (M, K/128): the launch here
transposes it. ``check`` transposes on every call (timed
with the kernel: it is a correctness check); ``time`` transposes once per input tensor, outside the
timed launches, so the figure is the kernel's alone (what it would be if the problem's layout were
M-major). The first kernel is checked at every visible and hidden size and 3 more seeds, the others at
the smoke shapes.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fp8_gpu as G  # noqa: E402  (its module(), SMOKE; puts the repo on sys.path)
from fp8n208_gpu import okfile_main, time_checked  # noqa: E402

import grader  # noqa: E402
from grader.problems import hopper_fp8 as F  # noqa: E402
from grader.problems.gemm import Shape  # noqa: E402

SRC = G.ROOT / "dev" / "ch05_hopper" / "fp8_variants" / "tma_scales.cu"
MAIN = "fp8_gemm_t<Fp8t<128, 192, 4, 1, 8>>"
# the launch transposes the scales with torch: allowed here (a dev measurement), refused in the course
PROBLEM = F.fp8_gemm.variant(library_free=False)
grader.integrity.trust(PROBLEM)
KERNELS = [MAIN, "fp8_gemm_t<Fp8t<128, 192, 4, 1, 8, false, 4>>", "fp8_gemm_t<Fp8t<128, 192, 4, 1, 8, false, 5>>",
           "fp8_gemm_t<Fp8t<128, 192, 4, 1, 16, false, 5>>", "fp8_gemm_t<Fp8t<128, 128, 5, 1, 8, false, 5>>"]
TIMING_ONLY = ["fp8_gemm_t<Fp8t<128, 192, 4, 1, 8, false, 2>>"]   # every B scale 1: wrong values by design


def scales_m_major(x, rows: int):
    """(R, C) fp32 -> its transpose (C, R) in a (C, R padded to 4) buffer, as the view [:, :R]."""
    import torch

    t = torch.zeros((x.shape[1], -(-rows // 4) * 4), dtype=torch.float32, device=x.device)
    t[:, :rows] = x.T
    return t[:, :rows]


def tsa_launch(kernel, once: bool):
    """``launch(a, b, sa, sb, c)`` of ``fp8_gemm_t``: F.fp8_gemm_launch's maps and grid, plus sa's
    M-major map. ``once``: transposed once per input tensor (timing), else on every call."""
    import numpy as np

    from grader.cuda.module import _torch_stream_handle
    from grader.problems.hopper import _map_cache, persistent_grid

    _map, shape = _map_cache(), kernel.launch_shape
    cluster = max(shape.cluster, 1)
    grid = persistent_grid(kernel, cluster)
    made: dict = {}

    def transposed(sa, sb, M):
        key = (int(sa.data_ptr()), tuple(sa.shape), int(sb.data_ptr()), tuple(sb.shape))
        if not once or key not in made:
            made.clear()
            made[key] = scales_m_major(sa, M), scales_m_major(sb, sb.shape[0])
        return made[key]

    def launch(a, b, sa, sb, c):
        M, K = a.shape
        N = b.shape[0]
        if M == 0 or N == 0:
            return
        sa_t, sb_t = transposed(sa, sb, M)
        tiles_m, tiles_n = shape.tiles(M, N)
        units = -(-tiles_m // cluster) * tiles_n
        kernel.launch((grid(units),), _map(a, (shape.tile_m, 128), "128B"),
                      _map(b, (shape.tile_n // cluster, 128), "128B"), _map(c, (64, 64), "128B"),
                      _map(sa_t, (1, shape.tile_m), "none"), _map(sb_t, (1, 8), "none"), sb,
                      np.int32(M), np.int32(N), np.int32(K), stream=_torch_stream_handle(a))
    launch.__name__ = f"launch {kernel.name}"
    return launch


def build(once: bool, kernels=KERNELS + TIMING_ONLY) -> list[tuple[str, object]]:
    mod = G.module(kernels, "tsa", SRC.read_text())
    for k in kernels:
        print(f"BUILD {k}: {mod.resources[k]} ({mod.compiler})", flush=True)
    return [(k, tsa_launch(mod[k], once)) for k in kernels]


def step_one(kernel: str, shape: str) -> None:
    """One kernel at one M,N,K (a trap kills the process's context: one shape a process)."""
    [(label, launch)] = build(False, [kernel])
    size = Shape(*map(int, shape.split(",")))
    try:
        grader.check(launch, PROBLEM, sizes=[size], quiet=True)
        print(f"ONE {label} {size}: right", flush=True)
    except Exception as e:
        print(f"ONE {label} {size}: WRONG: {' | '.join(str(e).splitlines()[:2])[:300]}", flush=True)


STRESS = os.environ.get("TSA_STRESS")


def step_check(okfile: str) -> None:
    if STRESS:      # the lesson's kernel (tools/ch05_hopper/fp8_cell.cu) under the same stress
        lesson = F.fp8_gemm_launch(G.module([G.LESSON], "fp8", G.CELL_FILE.read_text())[G.LESSON])
        bad = []
        for seed in range(20):
            try:
                grader.check(lesson, F.fp8_gemm, sizes=[Shape(2304, 4104, 256)], seed=seed, quiet=True)
            except Exception as e:
                bad.append(f"seed {seed}: {' | '.join(str(e).splitlines()[1:3])[:200]}")
        print(f"CHECK {G.LESSON} LESSON at 2304×4104×256, seeds 0-19: {len(bad)} wrong; {bad[:3]}", flush=True)
    for label, launch in build(once=False):
        if label in TIMING_ONLY:
            continue
        try:
            grader.check(launch, PROBLEM, sizes=G.SMOKE, quiet=True)
            print(f"CHECK {label}: right at {len(G.SMOKE)} smoke shapes", flush=True)
            if STRESS:
                for seed in range(10):
                    grader.check(launch, PROBLEM, sizes=[Shape(2304, 4104, 256), Shape(1000, 1032, 1024)], seed=seed, quiet=True)
                print(f"CHECK {label}: right at two smoke shapes with seeds 0-9", flush=True)
            if label == MAIN:
                grader.check(launch, PROBLEM)
                grader.check(launch, PROBLEM, hidden=True)
                for seed in (1, 2, 3):
                    grader.check(launch, PROBLEM, sizes=F.FP8_SIZES, seed=seed, quiet=True)
                print(f"CHECK {label}: right at every visible and hidden size, and seeds 1-3", flush=True)
            with open(okfile, "a") as f:
                f.write(label + "\n")
        except Exception as e:
            print(f"CHECK {label}: WRONG: {' | '.join(str(e).splitlines()[:3])[:500]}", flush=True)


def step_time(okfile: str, sizes, rounds: int) -> None:
    time_checked(build(once=True), okfile, sizes, rounds, timing_only=TIMING_ONLY, library_free=False)


if __name__ == "__main__":
    if sys.argv[1] == "one":
        step_one(sys.argv[2], sys.argv[3])
    else:
        okfile_main(step_check, step_time)
