"""Lesson 05.06 (FP8 GEMM with block scaling) on a Hopper GPU: checked, wrong kernels run, timed.

    python dev/ch05_hopper/fp8_gpu.py check           # the lesson's kernels at every visible and hidden size
    python dev/ch05_hopper/fp8_gpu.py wrong NAME      # one mistake of tests/wrong/ch05_fp8.py: caught by the values?
    python dev/ch05_hopper/fp8_gpu.py time [SIZES]    # beside torch._scaled_mm (tensorwise, rowwise, blockwise)
    python dev/ch05_hopper/fp8_gpu.py accum           # FP8 wgmma's own accumulator over long K, without promotion

The kernel comes from solutions/05_hopper_blackwell/06_fp8_gemm.ipynb (v_fp8), compiled with more
``fp8_gemm<Fp8<...>>`` instantiations. Correctness is grader.check before any timing; timing is
grader.measure against cuBLAS's FP8 GEMM (torch._scaled_mm) on the same A and B, in the same run: the
lesson's kernel beside each of cuBLAS's scalings (tensorwise, the problem's peer; rowwise; blockwise, the
problem's own 1 × 128 and 128 × 128 scales, grader.peers.scaled_mm("blockwise")). fp8_gpu.sh runs each step in its own process with a timeout.
"""
from __future__ import annotations

import os
import re
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import grader  # noqa: E402
from grader import peers  # noqa: E402
from grader.notebooks import cell_source, run_source  # noqa: E402
from grader.problems import hopper_fp8 as F  # noqa: E402
from grader.problems.gemm import Shape  # noqa: E402

NB = ROOT / "solutions" / "05_hopper_blackwell" / "06_fp8_gemm.ipynb"
LESSON = "fp8_gemm<Fp8<128, 192, 4, 1, 8>>"
TURNS = "fp8_gemm<Fp8<128, 192, 4, 1, 8, true>>"           # the consumers take turns (the reference before)
VARIANTS = [TURNS, "fp8_gemm<Fp8<128, 192, 4, 2, 8>>", "fp8_gemm<Fp8<128, 128, 5, 1, 8>>",
            "fp8_gemm<Fp8<128, 192, 4, 1, 16>>", "fp8_gemm<Fp8<128, 192, 4, 1, 0>>"]
SMOKE = [Shape(128, 128, 128), Shape(1000, 1032, 1024), Shape(200, 136, 8192), Shape(2304, 4104, 256),
         Shape(999, 1000, 1024), Shape(300, 584, 640)]


def cell() -> str:
    return cell_source(NB, "v_fp8")


def module(kernels=(LESSON,), name="fp8", source=None):
    src = source or cell()
    flags = " ".join(f'-k "{k}"' for k in kernels)
    src = re.sub(r"^%%cuda \w+[^\n]*", f"%%cuda {name} --arch sm_90a {flags}", src)
    ns: dict = {}
    run_source(src, name, ns)
    return ns[name]


def step_check() -> None:
    mod = module()
    launch = F.fp8_gemm_launch(mod[LESSON])
    grader.check(launch, F.fp8_gemm)
    grader.check(launch, F.fp8_gemm, hidden=True)
    print("CHECK: the reference passed every visible and hidden size", flush=True)
    for seed in (1, 2, 3):
        grader.check(launch, F.fp8_gemm, sizes=F.FP8_SIZES[:5], seed=seed, quiet=True)
    print("CHECK: and at the first five visible sizes with seeds 1, 2, 3", flush=True)
    # short K, 3 tiles a CTA: where staging boxes chosen by chunk parity were rewritten under their stores
    for seed in range(10):
        grader.check(launch, F.fp8_gemm, sizes=[Shape(2304, 4104, 256)], seed=seed, quiet=True)
    print("CHECK: and at 2304×4104×256 with seeds 0-9", flush=True)
    all_mod = module([LESSON] + VARIANTS, "all")
    for k in VARIANTS:
        try:
            grader.check(F.fp8_gemm_launch(all_mod[k]), F.fp8_gemm, sizes=SMOKE, quiet=True)
            print(f"CHECK {k}: right at {len(SMOKE)} shapes", flush=True)
        except Exception as e:
            print(f"CHECK {k}: WRONG: {str(e).splitlines()[0]}", flush=True)


def step_wrong(name: str) -> None:
    from grader.check import CheckFailed, check
    from tests.wrong import ch05_fp8 as W

    src = W.cpp_variant(cell(), W.FP8_MISTAKES[name])
    mod = module([W.KERNEL], "bad", src)
    size = Shape(*eval(W.VALUE_CATCHES[name]))
    try:
        check(F.fp8_gemm_launch(mod[W.KERNEL]), F.fp8_gemm, sizes=[size], quiet=True)
        print(f"RESULT {name}: NOT caught by the values at {size}", flush=True)
    except CheckFailed as e:
        print(f"RESULT {name}: caught at {size}: {' | '.join(str(e).splitlines()[:3])[:400]}", flush=True)
    import os

    os._exit(0)


def _cached_problem():
    """fp8_gemm with its inputs made once per size (8 s in NumPy at 8192³; grader.measure makes them
    for every call, always with seed 0)."""
    made: dict = {}

    def make(rng, size):
        if size not in made:
            made[size] = F.fp8_gemm.make_inputs(rng, size)
        return made[size]
    return F.fp8_gemm.variant(make_inputs=make)


SCALINGS = (peers.scaled_mm("tensorwise"), peers.scaled_mm("rowwise"), peers.scaled_mm("blockwise"))
TIMED = [LESSON, TURNS, "fp8_gemm<Fp8<128, 192, 4, 2, 8>>", "fp8_gemm<Fp8<128, 128, 5, 1, 8>>",
         "fp8_gemm<Fp8<128, 192, 4, 1, 16>>"]


def step_time(sizes) -> None:
    timed = os.environ["FP8_TIMED"].split(";") if os.environ.get("FP8_TIMED") else TIMED   # k;k;...
    mod = module(timed, "all")
    cands = [(k, F.fp8_gemm_launch(mod[k])) for k in timed]
    problem = _cached_problem()
    good = []
    for k, launch in cands:
        try:
            grader.check(launch, F.fp8_gemm, sizes=SMOKE, quiet=True)
            good.append((k, launch))
        except Exception as e:
            print(f"{k}: WRONG, not timed: {str(e).splitlines()[0]}", flush=True)
    for n in sizes:
        size = Shape(n, n, n)
        for k, launch in good:
            for peer in SCALINGS if k == LESSON else ("problem",):
                try:
                    print(f"TIME {size}: {grader.measure(launch, problem, k, size=size, peer=peer)}", flush=True)
                except Exception as e:
                    print(f"TIME {size}: {k} failed: {e}", flush=True)


def step_accum() -> None:
    """Per-tensor-scaled inputs (every scale 1): the lesson's kernel, which promotes every 128 k, against
    the same kernel with promotion skipped (FP8 wgmma's own accumulator sums all of K): max and rms
    error relative to the rms of C, against float64, as K grows."""
    import torch

    from tests.wrong import ch05_fp8 as W

    good = module([LESSON], "good")[LESSON]
    bad = module([W.KERNEL], "nopromo", W.cpp_variant(cell(), W.FP8_MISTAKES["promotion_skipped"]))[W.KERNEL]
    rng = np.random.default_rng(0)
    M = N = 256
    for K in (512, 2048, 8192, 32768):
        a = F.e4m3_encode(rng.uniform(-448, 448, (M, K)).astype(np.float32) * np.float32(0.05))
        b = F.e4m3_encode(rng.uniform(-448, 448, (N, K)).astype(np.float32) * np.float32(0.05))
        ref = F.e4m3_decode(a).astype(np.float64) @ F.e4m3_decode(b).astype(np.float64).T
        sa = torch.ones((K // 128, M), device="cuda")     # k-block-major; M = 256, ⌈N/128⌉ = 2 padded to 4
        sb = torch.ones((K // 128, 4), device="cuda")
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        out = {}
        for label, kern in (("promoted", good), ("not promoted", bad)):
            c = torch.empty((M, N), device="cuda", dtype=torch.bfloat16)
            F.fp8_gemm_launch(kern)(ta, tb, sa, sb, c)
            torch.cuda.synchronize()
            got = c.float().cpu().numpy().astype(np.float64)
            rms = np.sqrt(np.mean(ref ** 2))
            out[label] = (np.abs(got - ref).max() / rms, np.sqrt(np.mean((got - ref) ** 2)) / rms)
        # fp32 accumulation of the same products (torch on the GPU, bf16 rounding of the output), for scale
        f32 = (torch.from_numpy(F.e4m3_decode(a)).cuda() @ torch.from_numpy(F.e4m3_decode(b)).cuda().T)
        f32 = f32.to(torch.bfloat16).double().cpu().numpy()
        rms = np.sqrt(np.mean(ref ** 2))
        out["fp32 then bf16"] = (np.abs(f32 - ref).max() / rms, np.sqrt(np.mean((f32 - ref) ** 2)) / rms)
        print("ACCUM K=%d: " % K + "; ".join(f"{k}: max {m:.2e}, rms {r:.2e}" for k, (m, r) in out.items()), flush=True)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "time"
    try:
        if what == "check":
            step_check()
        elif what == "wrong":
            step_wrong(sys.argv[2])
        elif what == "accum":
            step_accum()
        else:
            step_time([int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "4096,8192").split(",")])
    except Exception:
        traceback.print_exc()
        sys.exit(1)
