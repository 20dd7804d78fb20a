"""Lesson 05.05's FP8 part, session 3's fifth round (fp8attn5), each kernel checked, then timed in rounds,
interleaved, beside 05.05's bf16 kernel in one process (H100, B 4, H 32, S 4096, d 128).
Run 1 (V5_RUN=1): fp8attn4's "lean dbuf quad" as a cell (fp8attn_variants/cell_v5a.cu) and the cuts of
fp8attn_variants/cuts.patch on it (CUT_: 1 the mask test, 2 the kept reference point, 4 seeded chains and the
row sums kept across tiles), the previous reference (cell_v4.cu, the cell at main 22079cf) in the same rounds.
Run 2: the cell of commit 708ab4d (run 1's cuts 7 with the row sums merged each tile), its switches and a
ring.patch on it, beside the previous reference, lean dbuf quad and run 1's cuts 7 (the row sums merged each
tile lost what cuts 7 gained). Run 3: the cell of commit 824e25f (run 1's cuts 7, its loop instruction for
instruction), its switches, and ring.patch on it (the ring's slots and phases carried from tile to tile: no
switch spills), beside the previous reference and lean dbuf quad; that ring form is now the lesson's cell
(the same machine code under NVRTC 13.0). Runs 2 and 3 are in git (commits 708ab4d, 824e25f); this script
(the default) times the lesson's cell, its switches, run 1's cuts 7, lean dbuf quad and the previous reference.

    python dev/ch05_hopper/fp8attn_v5.py check             # every kernel at a dozen sizes (2 seeds, 1 fresh; switches 1 fresh)
    python dev/ch05_hopper/fp8attn_v5.py time [REPS]       # non-causal REPS rounds (default 5), causal 2, switches 1
    python dev/ch05_hopper/fp8attn_v5.py full [ROUNDS]     # the cell's reference at every visible and hidden size, fresh seeds
    python dev/ch05_hopper/fp8attn_v5.py wrong NAME [cuts] # a mistake of tests/wrong/ch05_flash3_fp8.py on the cell (or cuts)
"""
from __future__ import annotations

import os
import re
import secrets
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "dev" / "ch05_hopper"))
os.environ.setdefault("GRADER_TEST_GPU", "1")

from fp8attn_gpu import CELL, _shared_cases, bf16_launch, wrong_result  # noqa: E402
from grader.check import CheckFailed, check  # noqa: E402
from grader.problems import flash3_fp8 as P  # noqa: E402
from grader.problems.attention import Attn  # noqa: E402
from tests.cells import compile_cell  # noqa: E402
from variant_patch import variant_source  # noqa: E402

VAR = ROOT / "dev" / "ch05_hopper" / "fp8attn_variants"
PATCH, CELL_V5A = VAR / "cuts.patch", VAR / "cell_v5a.cu"   # cuts.patch is a diff against cell_v5a.cu
RUN1 = os.environ.get("V5_RUN") == "1"
OLD_CELL = os.environ.get("OLD_CELL", str(VAR / "cell_v4.cu"))   # the previous cell (main 22079cf)
REF = "flash3_fp8<F8<0, 1, 1>>"
SWITCHES = ["flash3_fp8<F8<0, 0, 1>>", "flash3_fp8<F8<0, 1, 0>>", "flash3_fp8<F8<0, 1, 1, 3>>", "flash3_fp8<F8<0, 1, 1, 0, 0, 128>>"]
CUTS = {"cuts 3 (mask, ref)": 3, "cuts 6 (ref, seed)": 6, "cuts 7 (mask, ref, seed)": 7}
BEST = int(os.environ.get("V5_BEST", "7"))


def cut(kern: str, c: int) -> str:
    """The kernel's name with CUT_ = c (the defaults spelled out up to BN_)."""
    args = [a.strip() for a in kern[kern.index("F8<") + 3:kern.index(">")].split(",")]
    args += ["0", "0", "192"][len(args) - 3:] if len(args) < 6 else []
    return f"flash3_fp8<F8<{', '.join(args[:6] + [str(c)])}>>"


def _module(src: str, kerns, name: str):
    first, _, body = src.partition("\n")
    first = re.sub(r' -k "[^"]*"', "", first) + "".join(f' -k "{k}"' for k in kerns)
    t0 = time.time()
    m = compile_cell(first + "\n" + body, name)
    for k in kerns:
        print(f"RES {name} {k}: {m.resources.get(k)}", flush=True)
    print(f"RES {name} compiled in {time.time() - t0:.1f} s", flush=True)
    return m


def kernels():
    """(label, module, kernel) for every kernel of this round."""
    cuts_src = variant_source(PATCH, CELL_V5A)
    if not RUN1:
        new = _module(CELL.read_text(), [REF] + SWITCHES, "v5cell")
        v5a = _module(CELL_V5A.read_text(), [REF], "v5a")
        cm = _module(cuts_src, [cut(REF, BEST)], "v5cuts")
        return ([("the cell's reference F8<0,1,1>", new, REF)] + [(f"cell {k}", new, k) for k in SWITCHES]
                + [("lean dbuf quad (cell_v5a)", v5a, REF), (f"run 1's cuts {BEST} (cuts.patch)", cm, cut(REF, BEST))])
    new = _module(CELL_V5A.read_text(), [REF] + SWITCHES, "v5new")
    ck = [cut(REF, c) for c in CUTS.values()] + [cut(k, BEST) for k in SWITCHES]
    cm = _module(cuts_src, ck, "v5cuts")
    out = [("new reference F8<0,1,1> (lean dbuf quad)", new, REF)]
    out += [(f"cell {k}", new, k) for k in SWITCHES]
    out += [(label, cm, cut(REF, c)) for label, c in CUTS.items()]
    out += [(f"cuts {BEST} {k}", cm, cut(k, BEST)) for k in SWITCHES]
    return out


FEW = [Attn(1, 2, 2000, 128, kind="growing"), Attn(1, 3, 2500, 128, causal=True, kind="growing"),
       Attn(1, 2, 1000, 128, kind="peaked"), Attn(1, 2, 1000, 128, Sk=65), Attn(1, 2, 65, 128, Sk=1001),
       Attn(1, 1, 4096, 128, causal=True, kind="outlier"), Attn(1, 8, 200, 128, Sk=333, Hkv=2),
       Attn(2, 3, 1031, 128, causal=True, kind="peaked"), Attn(1, 1, 7, 128, Sk=0), Attn(1, 2, 777, 128, Sk=1),
       Attn(1, 2, 385, 128, causal=True), Attn(1, 4, 192, 128, Sk=384, Hkv=1)]


def do_check():
    for label, m, kern in kernels():
        launch = P.flash3_fp8_launch(m[kern])
        bad = 0
        main = not label.startswith("cell") and "flash3" not in label
        for s in FEW:
            for seed in ((1234, secrets.randbits(31)) if main else (secrets.randbits(31),)):
                try:
                    check(launch, P.flash3_fp8, sizes=[s], seed=seed, quiet=True)
                except CheckFailed as e:
                    bad += 1
                    print(f"  {label}: {s.describe()} seed {seed}: FAILED: {str(e)[:400]}", flush=True)
        print(f"CHECK {label} [{kern}]: {'passed' if not bad else f'{bad} FAILED'} ({len(FEW)} sizes x {2 if main else 1} seeds)", flush=True)


def do_full(rounds=2):
    """The cell's reference (run 1: lean dbuf quad and the best cut) at every visible and hidden size, fresh seeds."""
    todo = ([("cell", CELL_V5A.read_text(), REF), ("cuts", variant_source(PATCH, CELL_V5A), cut(REF, BEST))] if RUN1
            else [("cell", CELL.read_text(), REF)])
    for label, src, kern in todo:
        first, _, body = src.partition("\n")
        m = compile_cell(first + "\n" + body, f"v5full{label}", only=kern)
        launch = P.flash3_fp8_launch(m[kern])
        failed, t0, sizes = 0, time.time(), list(P.FP8_GPU) + list(P.FP8_HIDDEN)
        for _ in range(rounds):
            for s in sizes:
                seed = secrets.randbits(31)
                try:
                    check(launch, P.flash3_fp8, sizes=[s], seed=seed, quiet=True)
                except CheckFailed as e:
                    failed += 1
                    print(f"FULL FAILED {label} {s.describe()} seed {seed}: {str(e)[:400]}", flush=True)
        print(f"FULL {label} {kern}: {rounds} round(s) x {len(sizes)} sizes, fresh seeds: {failed} failed [{time.time() - t0:.0f} s]", flush=True)


def do_wrong(mistake, on="cell"):
    from tests.wrong import ch05_flash3_fp8 as W

    src = (CELL_V5A if RUN1 else CELL).read_text() if on == "cell" else variant_source(PATCH, CELL_V5A)
    kern = cut(REF, BEST) if on == "cuts" else REF
    first, _, body = W.cpp_variant(src, W.FP8_MISTAKES[mistake]).partition("\n")
    m = compile_cell(first + "\n" + body, f"v5wrong{on}", only=kern)
    print(wrong_result(P.flash3_fp8_launch(m[kern]), f"{mistake} on the {on}'s {kern}"))


def do_time(reps=5):
    from grader.speed import measure

    _shared_cases()
    ks = kernels()
    main = [k for k in ks if not k[0].startswith(("cell flash3", f"cuts {BEST} flash3"))]
    side = [k for k in ks if k not in main]
    if OLD_CELL:
        old = _module(Path(OLD_CELL).read_text(), [REF], "v5old")
        main.insert(0, ("previous reference F8<0,1,1> (main 22079cf)", old, REF))
    b16 = bf16_launch()
    ratios = {k[0]: [] for k in main}
    for causal, rounds, kset in ((False, reps, main), (True, 2, main), (False, 1, side), (True, 1, side)):
        prob = P.flash3_fp8_causal if causal else P.flash3_fp8
        peer = P.fa3_bf16(b16, causal)
        for rep in range(rounds):
            for label, m, kern in kset:
                r = measure(P.flash3_fp8_launch(m[kern]), prob, label, peer=peer, budget_s=0.8)
                if not causal and kset is main:
                    ratios[label].append(r.fraction)
                print(f"TIME {prob.bench_size.describe()} {label} (round {rep + 1}): {r.value:.1f} TFLOP/s = "
                      f"{r.fraction:.3f}x {r.peer_name} ({r.peer_value:.1f})", flush=True)
    for label, rs in ratios.items():
        rs = sorted(rs)
        print(f"TIME non-causal {label}: median {rs[len(rs) // 2]:.3f}x, min {rs[0]:.3f}, all {', '.join(f'{x:.3f}' for x in rs)}")


if __name__ == "__main__":
    try:
        if sys.argv[1] == "check":
            do_check()
        elif sys.argv[1] == "full":
            do_full(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
        elif sys.argv[1] == "wrong":
            do_wrong(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "cell")
        else:
            do_time(int(sys.argv[2]) if len(sys.argv) > 2 else 5)
    except Exception:
        traceback.print_exc()
    sys.stdout.flush()
