"""Lesson 05.04's FP8 reference against (1) its promotion FFMAs' scheduling hints rewritten in the cubin
(ffma_yield.py's policies, DeepGEMM's "FFMA interleaving" idea), (2) the turn handed over later
(fp8_variants/handoff.patch), descriptors made ahead (lean.patch), the promotion gated behind the other
consumer's issue (gate.patch, after ffma_bench.py), (3) the same without promotion FFMAs (timing only)
and 05.04's ceiling, each checked (grader.check, ragged shapes included) before it is timed beside torch._scaled_mm
(tensorwise, the problem's peer) in this one process. Needs a Hopper GPU.

    python dev/ch05_hopper/fp8_ffma.py [SIZES]      # default 8192; FP8F_ONLY=label,label to narrow

Labels: "ref" is the lesson's kernel of the day. Since 2026-11-25 it runs without turns, and "turns" is
Fp8<..., true>; in the logs before (fp8ffma_*, fp8ffma2_*), "ref" took turns and "noturns" did not.
"""
from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import ffma_yield as Y  # noqa: E402
import fp8_gpu as G  # noqa: E402
from variant_patch import variant_source  # noqa: E402

import grader  # noqa: E402
from grader.problems import hopper_fp8 as F  # noqa: E402
from grader.problems.gemm import Shape  # noqa: E402

REF, TURNS = G.LESSON, G.TURNS
HAND = {h: f"fp8_gemm<Fp8<128, 192, 4, 1, 8, true, {h}>>" for h in (1, 2, 3, 4)}   # handoff.patch's HANDOFF
NOPROMO = "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 0, true>>"
CEILING = "fp8_gemm<Fp8<128, 192, 4, 1, 8, 1, 1>>"
# lean.patch (handoff.patch + DESC: descriptors made ahead, EARLY: scales loaded at the loop top)
LEAN = {"lean": "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 0, false, false, true>>",
        "lean+early": "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 0, false, false, true, true>>",
        "lean noturns": "fp8_gemm<Fp8<128, 192, 4, 1, 8, false, 0, false, false, true>>",
        "lean handoff2": "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 2, false, false, true>>",
        "lean 2-CTA clusters": "fp8_gemm<Fp8<128, 192, 4, 2, 8, true, 0, false, false, true>>",
        "lean GROUP_M 16": "fp8_gemm<Fp8<128, 192, 4, 1, 16, true, 0, false, false, true>>",
        "lean+late": "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 0, false, false, true, false, true>>",
        "lean+early+late": "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 0, false, false, true, true, true>>"}
# gate.patch (lean + HANDOFF 6: a consumer promotes only once the other has issued its next k tile)
GATE = {"gate": "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 6, false, false, true>>",
        "gate+early": "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 6, false, false, true, true>>",
        "gate+late": "fp8_gemm<Fp8<128, 192, 4, 1, 8, true, 6, false, false, true, false, true>>"}
# (label, module key, kernel, SASS policy or None); modules: "cell", "handoff", "lean", "gate", "ceiling"
PLAN = [("ref", "cell", REF, None), ("ref+deepgemm", "cell", REF, "deepgemm"),
        ("ref+yield_all", "cell", REF, "yield_all"), ("ref+stick_all", "cell", REF, "stick_all"),
        ("ref+yield4", "cell", REF, "yield4"),
        ("turns", "cell", TURNS, None), ("turns+yield_all", "cell", TURNS, "yield_all"),
        ("turns+stick_all", "cell", TURNS, "stick_all"),
        ("handoff1", "handoff", HAND[1], None), ("handoff2", "handoff", HAND[2], None),
        ("handoff3", "handoff", HAND[3], None), ("handoff4", "handoff", HAND[4], None),
        ("handoff2+yield_all", "handoff", HAND[2], "yield_all"), ("handoff2+stick_all", "handoff", HAND[2], "stick_all"),
        *[(label, "lean", k, None) for label, k in LEAN.items()],
        ("lean+yield_all", "lean", LEAN["lean"], "yield_all"),
        # ffma_bench.py: the scale cached on every promotion FFMA (ptxas: every other one)
        ("ref+reuse_all", "cell", REF, "reuse_all"), ("turns+reuse_all", "cell", TURNS, "reuse_all"),
        ("lean+reuse_all", "lean", LEAN["lean"], "reuse_all"),
        ("lean noturns+reuse_all", "lean", LEAN["lean noturns"], "reuse_all"),
        *[(label, "gate", k, None) for label, k in GATE.items()],
        *[(f"gate+{p}", "gate", GATE["gate"], p) for p in ("reuse_all", "stick_all", "yield_all")],
        ("gate+late+reuse_all", "gate", GATE["gate+late"], "reuse_all"),
        # the scale cached, but every Nth FFMA yields (the other consumer's issue)
        *[(f"{label}+reuse_y{n}", key, k, f"reuse_y{n}") for n in (4, 8, 16)
          for label, key, k in (("ref", "cell", REF), ("lean", "lean", LEAN["lean"]),
                                ("lean noturns", "lean", LEAN["lean noturns"]))],
        ("nopromo TIMING ONLY", "handoff", NOPROMO, None), ("ceiling TIMING ONLY", "ceiling", CEILING, None)]
SMOKE = G.SMOKE                     # 6 shapes, 4 of them ragged (not multiples of the tile)


def build():
    only = set(filter(None, os.environ.get("FP8F_ONLY", "").split(",")))
    plan = [p for p in PLAN if not only or p[0] in only]
    need = {m for _, m, _, _ in plan}
    mods = {}
    if "cell" in need:
        mods["cell"] = G.module([REF, TURNS], "ffcell")
    if "handoff" in need:
        mods["handoff"] = G.module(list(HAND.values()) + [NOPROMO], "ffhand",
                                   variant_source(HERE / "fp8_variants" / "handoff.patch", G.PATCH_BASE))
    if "lean" in need:
        mods["lean"] = G.module(list(LEAN.values()), "fflean",
                                variant_source(HERE / "fp8_variants" / "lean.patch", G.PATCH_BASE))
    if "gate" in need:
        mods["gate"] = G.module(list(GATE.values()), "ffgate",
                                variant_source(HERE / "fp8_variants" / "gate.patch", G.PATCH_BASE))
    if "ceiling" in need:
        mods["ceiling"] = G.module([CEILING], "ffceil", (HERE / "fp8_explore.cu").read_text())
    for name, m in mods.items():
        print(f"BUILD {name}: {m.summary().strip()}", flush=True)
    cands = []
    for label, key, kernel, policy in plan:
        mod = mods[key]
        if policy:
            try:
                mod, changed, found = Y.patched_module(mod, kernel, policy)
            except Exception as e:
                print(f"PATCH {label}: failed: {str(e)[:300]}", flush=True)
                continue
            print(f"PATCH {label}: {changed} of {found} FFMAs changed", flush=True)
            if changed == 0:
                continue
        cands.append((label, F.fp8_gemm_launch(mod[kernel])))
    return cands


def main(sizes):
    cands = build()
    good = []
    for label, launch in cands:
        if "TIMING ONLY" in label:
            good.append((label, launch))
            continue
        try:
            grader.check(launch, F.fp8_gemm, sizes=SMOKE, quiet=True)
            print(f"CHECK {label}: right at {len(SMOKE)} shapes", flush=True)
            good.append((label, launch))
        except Exception as e:
            print(f"CHECK {label}: WRONG, not timed: {str(e).splitlines()[0][:300]}", flush=True)
    problem = G._cached_problem()
    for n in sizes:
        for label, launch in good:
            try:
                print(f"TIME {n}: {grader.measure(launch, problem, label, size=Shape(n, n, n))}", flush=True)
            except Exception as e:
                print(f"TIME {n}: {label} failed: {str(e)[:300]}", flush=True)


if __name__ == "__main__":
    try:
        main([int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "8192").split(",")])
    except Exception:
        traceback.print_exc()
        sys.exit(1)
