"""Why 05.06's (FP8 GEMM) promotion FFMAs issue slowly: a microbenchmark (ffma_bench.cu) with the lesson kernel's
warp layout (producer warpgroup idle, two consumer warpgroups at setmaxnreg 232, one CTA per SM) that
times the promotion's 96 FFMAs a thread with the SM clock under conditions: alone; two promoting warps
per scheduler; beside the other warpgroup's wgmma m64n192k32 chain; right after its own wgmma (reading
the wgmma's accumulator) with the other consumer idle or running a chain; and with other operand forms
(the scale an immediate, or from the constant bank/uniform register: two register-file reads; FADD)
and cubin rewrites of the FFMAs' reuse/yield bits (ffma_yield.py's policies). Timing only: values are
not checked. Needs a Hopper GPU (sm_90a).

    python dev/ch05_hopper/ffma_bench.py            # every condition x operand form x policy
    FFB_ONLY=label,... python dev/ch05_hopper/ffma_bench.py
    FFB_GROUP=chain|nochain python dev/ch05_hopper/ffma_bench.py    # a failed case kills the context
    FFB_RANDOM=1 python dev/ch05_hopper/ffma_bench.py   # wgmma operands of hashed e4m3 bytes, not +-1.0
                                                        # (written after the 2026-11-25 runs; not run yet)

Prints per case: clocks per promotion FFMA (a warp's timed clocks / FFMAs; median over every SM's warps,
with the 10th and 90th percentiles) for each consumer, and clocks per wgmma of a chain.
"""
from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

import ffma_yield as Y  # noqa: E402

REPS = 256
# (label, consumer 0's role, consumer 1's role): roles as in ffma_bench.cu
CONDS = [("ffma alone", 1, 0), ("ffma x2 warps/scheduler", 1, 1), ("ffma beside wgmma chain", 1, 3),
         ("wgmma->ffma, other idle", 2, 0), ("wgmma->ffma beside chain", 2, 3), ("wgmma->ffma both", 2, 2),
         ("wgmma alone (no ffma)", 4, 0), ("wgmma both (no ffma)", 4, 4)]
OPS = {0: "fmaf (ptxas)", 1: "imm scale", 2: "const scale", 3: "fadd"}
POLICIES = ["reuse_all", "yield_all", "stick_all"] + (["reuse_y4", "reuse_y8", "reuse_y16"] if os.environ.get("FFB_Y8") else [])


def kernel(r0, r1, op):
    return f"ffma_bench<{r0}, {r1}, {op}, {REPS}>"


def plan():
    out = []
    for label, r0, r1 in CONDS:
        ops = [0] if r0 == 4 else list(OPS)
        for op in ops:
            out.append((f"{label} | {OPS[op]}", kernel(r0, r1, op), None))
            if op == 0 and r0 != 4:
                out += [(f"{label} | fmaf +{p}", kernel(r0, r1, 0), p) for p in POLICIES]
    only = set(filter(None, os.environ.get("FFB_ONLY", "").split(",")))
    out = [p for p in out if not only or p[0] in only]
    group = os.environ.get("FFB_GROUP", "")       # "chain": only the cases with a wgmma chain; "nochain": the rest
    return [p for p in out if not group or ("chain" in p[0]) == (group == "chain")]


def stats(x):
    return f"{np.median(x):6.2f} [{np.percentile(x, 10):.2f}..{np.percentile(x, 90):.2f}]"


def main():
    import torch

    from grader.cuda import compile_cuda

    cases = plan()
    names = sorted({k for _, k, _ in cases})
    mod = compile_cuda((HERE / "ffma_bench.cu").read_text(), name="ffma_bench", arch="sm_90a", kernels=names)
    print("BUILD", mod.summary().strip().replace("\n", "; "), flush=True)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    g = torch.Generator(device="cuda").manual_seed(0)
    inp = torch.randn(2048, device="cuda", generator=g)
    out = torch.empty(sms * 384, device="cuda")
    times = torch.zeros(sms * 8 * 4, device="cuda", dtype=torch.int32)
    smem = 160 * 1024                              # one CTA per SM
    fill = int(os.environ.get("FFB_RANDOM", "0") or 0)
    print(f"wgmma operands: {'hashed e4m3 bytes' if fill else '+-1.0'}", flush=True)
    for label, k, policy in cases:
        try:
            m = mod
            if policy:
                m, changed, found = Y.patched_module(mod, k, policy)
                label += f" ({changed}/{found} changed)"
            fn = m[k]
            for _ in range(3):
                times.zero_()
                fn(inp, out, times, fill, grid=sms, block=384, shared=smem)
            torch.cuda.synchronize()
            t = times.cpu().numpy().view(np.uint32).astype(np.float64).reshape(sms, 2, 4, 4)
            r0, r1 = (int(x) for x in k.split("<")[1].split(",")[:2])
            parts = []
            for c, role in ((0, r0), (1, r1)):
                tc = t[:, c].reshape(-1, 4)
                if role in (1, 2):
                    parts.append(f"c{c} clk/FFMA {stats(tc[:, 0] / (tc[:, 1] * 96))}")
                if role in (2, 4):
                    parts.append(f"c{c} clk/rep outside FFMAs {stats((tc[:, 2] - tc[:, 0]) / tc[:, 1])}")
                if role == 3:
                    parts.append(f"c{c} chain clk/wgmma {stats(tc[:, 2] / np.maximum(tc[:, 3], 1))}")
            print(f"CASE {label}: " + "; ".join(parts), flush=True)
        except Exception as e:
            print(f"CASE {label}: failed: {str(e)[:300]}", flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
