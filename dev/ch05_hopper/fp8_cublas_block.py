"""cuBLAS's own block-scaled FP8 GEMM (DeepSeek's 1 × 128 by 128 × 128 scales, torch._scaled_mm on
Hopper since CUDA 12.9) beside lesson 05.04's kernel, on a Hopper GPU.

    python dev/ch05_hopper/fp8_cublas_block.py check                  # cuBLAS blockwise against the problem's reference
    python dev/ch05_hopper/fp8_cublas_block.py checkcell              # the lesson's cell file, checked in full
    python dev/ch05_hopper/fp8_cublas_block.py time [SIZES] [ROUNDS]  # both beside cuBLAS tensorwise, interleaved
    python dev/ch05_hopper/fp8_cublas_block.py names [N]              # the kernels cuBLAS runs at N³ (profiler)
    python dev/ch05_hopper/fp8_cublas_block.py once [N]               # the blockwise call twice (for ncu)
    python dev/ch05_hopper/fp8_cublas_block.py ours KERNEL [N]        # one of the cell's kernels twice (for ncu)

``check`` compares cuBLAS blockwise's C with the problem's float64 reference and tolerance at shapes
cuBLAS takes (CUBLAS_SHAPES), which proves the scale layouts of grader.peers.blockwise_scales
(grader.check itself refuses a launch that runs torch operations). As a candidate its time
includes those layouts and a copy of C; the peer (grader.peers.scaled_mm("blockwise")) makes the
layouts outside the timed region, so the peer's figure is cuBLAS's. ``time`` measures, at n³ for n in SIZES, the lesson's kernel and cuBLAS
blockwise (as a candidate) each against cuBLAS tensorwise (the problem's peer), then the lesson's
kernel (and FP8_EXTRA's instantiations of its cell, ';'-separated) against cuBLAS blockwise as the
peer, ROUNDS rounds interleaved in one process; FP8_PREVIOUS (';'-separated cell files, e.g. a patch
applied) adds their kernels against tensorwise, FP8_REUSE_Y4=1 each also with ffma_yield.py's reuse_y4.

The scale probes of runs 4-14 (FP8_PROBES, FP8_NO_SCALE_LOADS, FP8_SCALES_AHEAD, ``ours "PROBE …"``)
rewrote the text of the cell's ``__ldg`` scale loads, which the cell no longer has since its scales
come by TMA: they are in this script at commit 77966ba.
"""
from __future__ import annotations

import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fp8_gpu as G  # noqa: E402  (module(), SMOKE, LESSON, _cached_problem; puts the repo on sys.path)
from fp8n208_gpu import time_rounds  # noqa: E402

import grader  # noqa: E402
from grader import peers  # noqa: E402
from grader.problems import hopper_fp8 as F  # noqa: E402
from grader.problems.gemm import Shape  # noqa: E402


# shapes cuBLAS takes (torch tells the scale layouts apart by shape: N a multiple of 128, K/128 ≥ 2;
# N a multiple of 16; 384 × 512 × 1280 pads K/128 = 10 to 12), and the timed sizes' shape at 2048³
CUBLAS_SHAPES = [Shape(256, 256, 512), Shape(384, 512, 1280), Shape(1024, 2048, 1024), Shape(2048, 2048, 2048),
                 Shape(128, 1024, 8192)]


def device_inputs(s: Shape, seed: int = 0) -> dict:
    """The problem's inputs at shape ``s`` (a, b, sa, sb) as torch tensors on the GPU."""
    import numpy as np
    import torch

    inputs = F.fp8_gemm.make_inputs(np.random.default_rng(seed), s)
    return {k: torch.as_tensor(inputs[k], device="cuda") for k in ("a", "b", "sa", "sb")}


def kernel_names(n: int) -> None:
    """The CUDA kernels each cuBLAS call runs at n³ (torch's profiler): their names give tile shapes."""
    import torch

    arrs = device_inputs(Shape(n, n, n))
    for scaling in ("tensorwise", "blockwise"):
        call = peers.scaled_mm(scaling).prepare(peers.PeerInputs(arrays=arrs))
        call()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        names = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
        print(f"KERNELS {n}^3 {scaling}: {names}", flush=True)


def cublas_blockwise_launch():
    """The blockwise peer (grader.peers.scaled_mm("blockwise")) as a launch(a, b, sa, sb, c) of the
    problem: its scale layouts made and its C copied inside the call."""
    import torch

    peer = peers.scaled_mm("blockwise")

    def launch(a, b, sa, sb, c):
        if a.shape[0] == 0 or b.shape[0] == 0:
            return
        out = peer.prepare(peers.PeerInputs(arrays={"a": a, "b": b, "sa": sa, "sb": sb}))()
        c.view(torch.bfloat16).copy_(out)
    launch.__name__ = "launch cuBLAS blockwise"
    return launch


def step_checkcell() -> None:
    """The lesson's cell (tools/ch05_hopper/fp8_cell.cu, not the notebook) checked: its kernel at every
    visible and hidden size and three more seeds, its other instantiations at the smoke shapes."""
    mod = G.module([G.LESSON] + G.VARIANTS, "fp8c", G.CELL_FILE.read_text())
    for k in [G.LESSON] + G.VARIANTS:
        print(f"BUILD {k}: {mod.resources[k]}", flush=True)
        launch = F.fp8_gemm_launch(mod[k])
        try:
            grader.check(launch, F.fp8_gemm, sizes=G.SMOKE, quiet=True)
            if k == G.LESSON:
                grader.check(launch, F.fp8_gemm)
                grader.check(launch, F.fp8_gemm, hidden=True)
                for seed in (11, 12, 13):
                    grader.check(launch, F.fp8_gemm, seed=seed, quiet=True)
                print(f"CHECK {k}: right at every visible and hidden size, 3 more seeds, {len(G.SMOKE)} smoke shapes",
                      flush=True)
            else:
                print(f"CHECK {k}: right at {len(G.SMOKE)} smoke shapes", flush=True)
        except Exception as e:
            print(f"CHECK {k}: WRONG: {' | '.join(str(e).splitlines()[:3])[:500]}", flush=True)


def step_check() -> None:
    """cuBLAS blockwise's C against the problem's float64 reference, with the problem's tolerance, at
    CUBLAS_SHAPES (compared here: grader.check refuses a launch that runs torch operations)."""
    import numpy as np
    import torch

    launch = cublas_blockwise_launch()
    for s in CUBLAS_SHAPES:
        try:
            arrs = device_inputs(s, seed=s.M + s.N + s.K)
            out = torch.empty((s.M, s.N), dtype=torch.bfloat16, device="cuda")
            launch(*arrs.values(), out)
            c = out.float().cpu().numpy()
            ref = F.fp8_gemm.reference(**{k: v.cpu().numpy() for k, v in arrs.items()})["c"]
            rtol, atol = F.fp8_tolerance(s)
            bad = ~np.isclose(c, ref, rtol=rtol, atol=atol)
            print(f"CHECK cuBLAS blockwise at {s}: {'right' if not bad.any() else f'WRONG at {int(bad.sum())} elements'}"
                  f" (max |err| {float(np.abs(c - ref).max()):.3g}, atol {atol:.3g})", flush=True)
        except Exception as e:
            print(f"CHECK cuBLAS blockwise at {s}: refused: {' | '.join(str(e).splitlines()[:2])[:400]}", flush=True)


def step_time(sizes, rounds: int) -> None:
    import os

    extra = [k for k in os.environ.get("FP8_EXTRA", "").split(";") if k]   # more Fp8<...> of the lesson's cell
    lesson = G.module([G.LESSON] + extra, "fp8", G.CELL_FILE.read_text())
    mine = F.fp8_gemm_launch(lesson[G.LESSON])
    theirs = cublas_blockwise_launch()
    tensorwise, blockwise = peers.scaled_mm("tensorwise"), peers.scaled_mm("blockwise")
    runs = [(G.LESSON + " LESSON", mine, tensorwise), ("cuBLAS blockwise (as a candidate)", theirs, tensorwise),
            (G.LESSON + " LESSON", mine, blockwise)]
    runs += [(k, F.fp8_gemm_launch(lesson[k]), blockwise) for k in extra]
    for i, f in enumerate(x for x in os.environ.get("FP8_PREVIOUS", "").split(";") if x):
        # other forms of the cell (files; ';'-separated), the same kernel name, against tensorwise
        prev = G.module([G.LESSON], f"fp8prev{i}", Path(f).read_text())
        runs.append((G.LESSON + " PREVIOUS " + Path(f).name, F.fp8_gemm_launch(prev[G.LESSON]), tensorwise))
        if os.environ.get("FP8_REUSE_Y4"):    # and its promotion FFMAs' hints rewritten (ffma_yield.py's reuse_y4)
            import ffma_yield as Y

            pm, changed, found = Y.patched_module(prev, G.LESSON, "reuse_y4")
            print(f"PATCH {Path(f).name} +reuse_y4: {changed} of {found} FFMAs changed", flush=True)
            runs.append((G.LESSON + " PREVIOUS " + Path(f).name + " +reuse_y4", F.fp8_gemm_launch(pm[G.LESSON]),
                         tensorwise))
    time_rounds(runs, sizes, rounds)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "time"
    try:
        if what == "check":
            step_check()
        elif what == "checkcell":
            step_checkcell()
        elif what == "once":                   # for Nsight Compute: the blockwise call, twice, at N³
            import torch

            n = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
            call = peers.scaled_mm("blockwise").prepare(peers.PeerInputs(arrays=device_inputs(Shape(n, n, n))))
            call(), call()
            torch.cuda.synchronize()
        elif what == "ours":                   # for Nsight Compute: one of the cell's kernels, twice, at N³
            import torch

            k, n = sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 4096
            launch = F.fp8_gemm_launch(G.module([k], "fp8", G.CELL_FILE.read_text())[k])
            arrs = list(device_inputs(Shape(n, n, n)).values())
            c = torch.empty((n, n), dtype=torch.bfloat16, device="cuda")
            launch(*arrs, c), launch(*arrs, c)
            torch.cuda.synchronize()
        elif what == "names":
            kernel_names(int(sys.argv[2]) if len(sys.argv) > 2 else 8192)
        else:
            step_time([int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "8192,4096").split(",")],
                      int(sys.argv[3]) if len(sys.argv) > 3 else 2)
    except Exception:
        traceback.print_exc()
        sys.exit(1)
