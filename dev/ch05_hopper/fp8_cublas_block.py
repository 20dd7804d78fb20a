"""cuBLAS's own block-scaled FP8 GEMM (DeepSeek's 1 × 128 by 128 × 128 scales, torch._scaled_mm on
Hopper since CUDA 12.9) beside lesson 05.04's kernel, on a Hopper GPU.

    python dev/ch05_hopper/fp8_cublas_block.py check                  # cuBLAS blockwise against the problem's reference
    python dev/ch05_hopper/fp8_cublas_block.py checkcell              # the lesson's cell file, checked in full
    python dev/ch05_hopper/fp8_cublas_block.py time [SIZES] [ROUNDS]  # both beside cuBLAS tensorwise, interleaved
    python dev/ch05_hopper/fp8_cublas_block.py names [N]              # the kernels cuBLAS runs at N³ (profiler)
    python dev/ch05_hopper/fp8_cublas_block.py once [N]               # the blockwise call twice (for ncu)
    python dev/ch05_hopper/fp8_cublas_block.py ours KERNEL [N]        # one of the cell's kernels twice (for ncu;
                                                                      # KERNEL "PROBE label": a scale probe)

``check`` compares cuBLAS blockwise's C with the problem's float64 reference and tolerance at shapes
cuBLAS takes (CUBLAS_SHAPES), which proves the scale layouts of grader.peers.blockwise_scales
(grader.check itself refuses a launch that runs torch operations). As a candidate its time
includes those layouts and a copy of C; the peer (grader.peers.scaled_mm("blockwise")) makes the
layouts outside the timed region, so the peer's figure is cuBLAS's. ``time`` measures, at n³ for n in SIZES, the lesson's kernel and cuBLAS
blockwise (as a candidate) each against cuBLAS tensorwise (the problem's peer), then the lesson's
kernel (and FP8_EXTRA's instantiations of its cell, ';'-separated) against cuBLAS blockwise as the
peer, ROUNDS rounds interleaved in one process; FP8_PREVIOUS (';'-separated cell files, e.g. a patch
applied) adds their kernels against tensorwise, FP8_REUSE_Y4=1 each also with ffma_yield.py's reuse_y4.
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


def scales_two_ahead(src: str) -> str:
    """The lesson's cell with the scales of k block kt + 2 loaded while k tile kt's wgmmas run (one
    more set of four registers carried), instead of kt + 1's."""
    reps = [
        ("      scales(0, scale_lo, scale_hi, scale_b, scale_b2);\n",
         "      scales(0, scale_lo, scale_hi, scale_b, scale_b2);\n"
         "      float next_lo, next_hi, next_b, next_b2;       // k block kt + 1's\n"
         "      scales(min(1, k_tiles - 1), next_lo, next_hi, next_b, next_b2);\n"),
        ("        float next_lo, next_hi, next_b, next_b2;\n"
         "        scales(min(kt + 1, k_tiles - 1), next_lo, next_hi, next_b, next_b2);\n",
         "        float far_lo, far_hi, far_b, far_b2;           // k block kt + 2's\n"
         "        scales(min(kt + 2, k_tiles - 1), far_lo, far_hi, far_b, far_b2);\n"),
        ("        scale_lo = next_lo, scale_hi = next_hi, scale_b = next_b, scale_b2 = next_b2;\n",
         "        scale_lo = next_lo, scale_hi = next_hi, scale_b = next_b, scale_b2 = next_b2;\n"
         "        next_lo = far_lo, next_hi = far_hi, next_b = far_b, next_b2 = far_b2;\n"),
    ]
    for a, b in reps:
        assert src.count(a) == 1, a
        src = src.replace(a, b)
    return src


def scale_probes(src: str) -> dict:
    """Timing-only forms of the lesson's cell (WRONG values) that split the cost of its per-k-tile scale
    loads: "synthetic" scales made from k (no loads); "loads unused" (the same four loads issued, their
    sum stored only on a path never taken, the promotion on synthetic scales); "per tile" (the scales
    of k block 0 loaded once per tile and used for every k block: the compiler hoists the loads out of
    the k loop); "L1-hot loads" (four loads every k tile from 4 addresses a row: L1 hits); "shared loads"
    (four LDS every k tile from the C staging area); "L1 prefetch" (the lesson's loads, the next 8 k
    blocks' sectors prefetched into L1 every 8 k tiles: right values); "L1 evict-last" (the lesson's
    loads with an L1 evict-last hint: right values)."""
    body = "lo = __ldg(sa_lo + k); hi = __ldg(sa_hi + k); b = __ldg(sb_n + k);"
    body2 = "b2 = BN > 128 ? __ldg(sb_n2 + k) : b;"
    assert body in src and body2 in src
    synth = src.replace(body, "lo = 1.f + k; hi = 2.f + k; b = 0.5f + k;").replace(body2, "b2 = 0.25f + k;")
    unused = src.replace(body, "const float x = __ldg(sa_lo + k) + __ldg(sa_hi + k) + __ldg(sb_n + k) + "
                               "(BN > 128 ? __ldg(sb_n2 + k) : 0.f); if (m0 < 0) *(volatile float*)sa = x; "
                               "lo = 1.f + k; hi = 2.f + k; b = 0.5f + k;").replace(body2, "b2 = 0.25f + k;")
    per_tile = src.replace(body, "lo = __ldg(sa_lo); hi = __ldg(sa_hi); b = __ldg(sb_n);").replace(
        body2, "b2 = BN > 128 ? __ldg(sb_n2) : b;")
    # the same four loads every k tile, from 4 addresses a row that stay in L1 (k & 3): short latency
    l1_hot = src.replace(body, "lo = __ldg(sa_lo + (k & 3)); hi = __ldg(sa_hi + (k & 3)); b = __ldg(sb_n + (k & 3));").replace(
        body2, "b2 = BN > 128 ? __ldg(sb_n2 + (k & 3)) : b;")
    # four shared-memory loads every k tile instead (the C staging area: garbage values)
    lds = src.replace(body, "const float* sh = reinterpret_cast<const float*>(c_stage) + 4 * (k & 7) + (threadIdx.x & 3); "
                            "lo = sh[0]; hi = sh[32]; b = sh[64];").replace(body2, "b2 = BN > 128 ? sh[96] : b;")
    # the lesson's loads, with the next 8 k blocks' sectors of this thread's rows prefetched into L1 every
    # 8 k tiles (prefetch.global.L1), so that the per-k-tile loads hit L1
    pre = src.replace(body, "if ((k & 7) == 0 && k + 8 < K / 128) { asm volatile(\"prefetch.global.L1 [%0];\" :: \"l\"(sa_lo + k + 8)); "
                            "asm volatile(\"prefetch.global.L1 [%0];\" :: \"l\"(sa_hi + k + 8)); "
                            "asm volatile(\"prefetch.global.L1 [%0];\" :: \"l\"(sb_n + k + 8)); "
                            "asm volatile(\"prefetch.global.L1 [%0];\" :: \"l\"(sb_n2 + k + 8)); } " + body)
    # the lesson's loads with an L1 evict-last hint (ld.global.nc.L1::evict_last)
    ev = src.replace(body, "lo = ldg_last(sa_lo + k); hi = ldg_last(sa_hi + k); b = ldg_last(sb_n + k);").replace(
        body2, "b2 = BN > 128 ? ldg_last(sb_n2 + k) : b;").replace(
        "template <class Cfg>\n__global__", "__device__ __forceinline__ float ldg_last(const float* p) {\n  float v;\n"
        "  asm volatile(\"ld.global.nc.L1::evict_last.f32 %0, [%1];\" : \"=f\"(v) : \"l\"(p));\n  return v;\n}\n\n"
        "template <class Cfg>\n__global__", 1)
    return {"synthetic": synth, "loads unused": unused, "per tile": per_tile, "L1-hot loads": l1_hot,
            "shared loads": lds, "L1 prefetch": pre, "L1 evict-last": ev}


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
    if os.environ.get("FP8_NO_SCALE_LOADS"):
        # timing only, WRONG values: the lesson's kernel with its per-k-tile scale loads (4 LDG a thread)
        # replaced by scales made from k (scale_probes' "synthetic"), to see what the loads cost
        nl = G.module([G.LESSON], "fp8nl", scale_probes(G.CELL_FILE.read_text())["synthetic"])
        runs.append((G.LESSON + " WITHOUT SCALE LOADS (wrong values)", F.fp8_gemm_launch(nl[G.LESSON]), blockwise))
    if os.environ.get("FP8_PROBES"):
        # timing only, WRONG values: where the cost of the scale loads lies
        want = [w for w in os.environ["FP8_PROBES"].split(";") if w and w != "1"]
        for label, src in scale_probes(G.CELL_FILE.read_text()).items():
            if want and label not in want:
                continue
            pm = G.module([G.LESSON], "fp8pr" + str(abs(hash(label)) % 1000), src)
            runs.append((G.LESSON + " PROBE " + label, F.fp8_gemm_launch(pm[G.LESSON]), blockwise))
    if os.environ.get("FP8_SCALES_AHEAD"):
        # the lesson's kernel with each k block's scales loaded two k tiles ahead instead of one
        ah = G.module([G.LESSON], "fp8ah", scales_two_ahead(G.CELL_FILE.read_text()))
        runs.append((G.LESSON + " SCALES TWO K TILES AHEAD", F.fp8_gemm_launch(ah[G.LESSON]), blockwise))
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
            src = G.CELL_FILE.read_text()
            if k.startswith("PROBE "):                 # one of scale_probes' forms of the lesson's kernel
                src, k = scale_probes(src)[k[len("PROBE "):]], G.LESSON
            launch = F.fp8_gemm_launch(G.module([k], "fp8", src)[k])
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
