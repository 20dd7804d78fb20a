"""Where lesson 05.04's FP8 k loop spends its time: SM clock stamps (fp8_variants/timeline.patch, STAMP)
of CTA 0's two consumers over one tile's 64 k tiles at 8192³, for the reference and for the same loop
with all but one promotion FMA left out (NOPROMO, wrong values). Needs a Hopper GPU.

    python dev/ch05_hopper/fp8_timeline.py

Prints, per consumer, the median clocks of each phase of a k tile (turn wait, issue, next slot wait,
wgmma wait, promotion), the k tile's period, the SM clock rate over the tile (globaltimer against
clock), and a few k tiles of both consumers on one time axis. A diagnostic: not the graded timing.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

import ffma_yield as Y  # noqa: E402
import fp8_gpu as G  # noqa: E402
from variant_patch import variant_source  # noqa: E402

from grader.problems import hopper_fp8 as F  # noqa: E402
from grader.problems.gemm import Shape  # noqa: E402

KERNELS = {"ref": "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 0, false, true>>",
           "nopromo": "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 0, true, true>>",
           "handoff2": "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 2, false, true>>",
           "noturns": "fp8_gemm<Fp8<128, 192, 4, 1, 8, false, 0, false, true>>"}
LEAN = {"lean": "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 0, false, true, true>>",       # lean.patch, STAMP + DESC
        "lean+late": "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 0, false, true, true, false, true>>",
        # meant as the turn handed over after the promotion, but ptxas hoists the BAR.ARV above the FFMAs
        # (the SASS): the other consumer's wgmmas still run during the promotion, so it is NOT serial
        "lean serial": "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 5, false, true, true>>"}
# gate.patch (HANDOFF 6: no turn before the issue; the promotion waits for the other consumer's next
# issue, so its "promote" phase below includes that wait), with STAMP + DESC; "+reuse_all": ffma_yield.py
GATE = {"gate": "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 6, false, true, true>>"}
PHASES = ["turn wait", "issue", "next slot", "wgmma wait", "promote", "to next top"]


def main(n=8192):
    import torch

    mod = G.module(list(KERNELS.values()), "fp8tl", variant_source(HERE / "fp8_variants" / "timeline.patch", G.PATCH_BASE))
    print("BUILD", mod.summary().strip(), flush=True)
    lean = G.module(list(LEAN.values()), "fp8tll", variant_source(HERE / "fp8_variants" / "lean.patch", G.PATCH_BASE))
    kernels = {**{label: (mod, k) for label, k in KERNELS.items()}, **{label: (lean, k) for label, k in LEAN.items()}}
    gate = G.module(list(GATE.values()), "fp8tlg", variant_source(HERE / "fp8_variants" / "gate.patch", G.PATCH_BASE))
    kernels.update({label: (gate, k) for label, k in GATE.items()})
    kernels["gate+reuse_all"] = (Y.patched_module(gate, GATE["gate"], "reuse_all")[0], GATE["gate"])
    only = [x for x in os.environ.get("TL_ONLY", "").split(",") if x]
    kernels = {label: v for label, v in kernels.items() if not only or label in only}
    inp = F.fp8_gemm.make_inputs(np.random.default_rng(0), Shape(n, n, n))
    a, b = torch.from_numpy(inp["a"]).cuda(), torch.from_numpy(inp["b"]).cuda()
    sa0, sb = torch.from_numpy(inp["sa"]).cuda(), torch.from_numpy(inp["sb"]).cuda()
    extra = 16 + 2 * 6 * 64
    for label, (m, k) in kernels.items():
        sa = torch.zeros(sa0.numel() + extra, device="cuda", dtype=torch.float32)
        sa[: sa0.numel()] = sa0.flatten()
        c = torch.empty((n, n), device="cuda", dtype=torch.bfloat16)
        launch = F.fp8_gemm_launch(m[k])
        for _ in range(3):
            launch(a, b, sa[: sa0.numel()].view(sa0.shape), sb, c)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            launch(a, b, sa[: sa0.numel()].view(sa0.shape), sb, c)
        end.record()
        torch.cuda.synchronize()
        ms = start.elapsed_time(end) / 5
        raw = sa[sa0.numel():].cpu().numpy().view(np.uint32).astype(np.int64)
        head, st = raw[:16], raw[16:].reshape(2, 64, 6)
        print(f"== {label}: {2 * n ** 3 / ms / 1e9:.0f} TFLOP/s (events, 5 launches, stamps included)", flush=True)
        for cc in range(2):
            g0, k0, g1, k1 = head[4 * cc: 4 * cc + 4]
            mhz = (k1 - k0) % 2 ** 32 / max((g1 - g0) % 2 ** 32, 1) * 1e3
            t = st[cc]
            nxt = np.roll(t[:, 0], -1)
            d = np.stack([t[:, 1] - t[:, 0], t[:, 2] - t[:, 1], t[:, 3] - t[:, 2], t[:, 4] - t[:, 3],
                          t[:, 5] - t[:, 4], nxt - t[:, 5]], 1)[4:60] % 2 ** 32
            per = (nxt - t[:, 0])[4:60] % 2 ** 32
            print(f"consumer {cc}: SM clock {mhz:.0f} MHz over the tile; k-tile period median {np.median(per):.0f} clk; "
                  + ", ".join(f"{p} {np.median(d[:, i]):.0f}" for i, p in enumerate(PHASES)), flush=True)
        base = int(st[0, 20, 0])
        for kt in range(20, 24):
            for cc in range(2):
                rel = [(int(x) - base) % 2 ** 32 for x in st[cc, kt]]
                print(f"  k{kt} c{cc}: " + " ".join(f"{v:6d}" for v in rel), flush=True)


if __name__ == "__main__":
    main()
