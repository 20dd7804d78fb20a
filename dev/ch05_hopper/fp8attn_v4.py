"""Lesson 05.05's FP8 part, session 3's fourth round (fp8attn4): the switches of fp8attn_variants/lean_dbuf.patch, each
checked, then timed three times, interleaved, beside 05.05's bf16 kernel in one process (H100, B 4, H 32,
S 4096, d 128). LEAN: the barriers' addresses and the descriptors computed once, the ring's index
unsigned (a mask, not a division); SPLIT: S = Q K^T in two halves of 96 keys, the first half's row max
taken while the tensor core computes the second; DBUF: P in two register buffers, packed right after the
softmax (under the exponentials), P V_{j-1} waited for only when O must be rescaled; QUAD: the warp votes
on each lane's own max, the quad's shuffles only when a max moves. Runs 1-3 built the variants from the
cell with the switches in place (the text of the patch, as it grew: LEAN and SPLIT in run 1, DBUF in 2,
QUAD in 3; a switch's code did not change after its run).

    python dev/ch05_hopper/fp8attn_v4.py check      # every variant at a dozen sizes (3 seeds, 2 fresh)
    python dev/ch05_hopper/fp8attn_v4.py time [REPS]  # non-causal REPS rounds (default 3), causal once
    python dev/ch05_hopper/fp8attn_v4.py full [ROUNDS]  # V4_FULL (a kernel) at every visible and hidden size
    python dev/ch05_hopper/fp8attn_v4.py wrong NAME     # a mistake of tests/wrong/ch05_flash3_fp8.py, on V4_FULL
"""
from __future__ import annotations

import os
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

PATCH = ROOT / "dev" / "ch05_hopper" / "fp8attn_variants" / "lean_dbuf.patch"
CELL_V4 = ROOT / "dev" / "ch05_hopper" / "fp8attn_variants" / "cell_v4.cu"   # the cell the patch was made against (main 22079cf)


def _src() -> str:
    """The lesson's cell with this round's switches (the patch; runs 1-3 built the same text from the cell)."""
    return variant_source(PATCH, CELL_V4)

# run 1 also timed "split" F8<0, 1, 1, 0, 0, 192, 0, 1> and "lean split" F8<0, 1, 1, 0, 0, 192, 1, 1> (V4_EXTRA)
# run 2: "lean", "dbuf" F8<0, 1, 1, 0, 0, 192, 0, 0, 1>, "lean dbuf" F8<0, 1, 1, 0, 0, 192, 1, 0, 1>
VARIANTS = {"reference F8<0,1,1>": "flash3_fp8<F8<0, 1, 1>>",
            "lean dbuf, 1 of 8 exponentials on the FMA units": "flash3_fp8<F8<0, 1, 1, 0, 1, 192, 1, 0, 1>>",
            "lean dbuf quad": "flash3_fp8<F8<0, 1, 1, 0, 0, 192, 1, 0, 1, 1>>",
            "lean dbuf quad, 1 of 8 on the FMA units": "flash3_fp8<F8<0, 1, 1, 0, 1, 192, 1, 0, 1, 1>>",
            "lean dbuf quad, 2 of 8 on the FMA units": "flash3_fp8<F8<0, 1, 1, 0, 2, 192, 1, 0, 1, 1>>"}
FULL = os.environ.get("V4_FULL", "flash3_fp8<F8<0, 1, 1, 0, 1, 192, 1, 0, 1, 1>>")
for _v in os.environ.get("V4_EXTRA", "").split(";"):
    if _v.strip():
        VARIANTS[_v.strip()] = _v.strip()


def module():
    import re

    first, _, body = _src().partition("\n")
    first = re.sub(r' -k "[^"]*"', "", first) + "".join(f' -k "{k}"' for k in VARIANTS.values())
    t0 = time.time()
    m = compile_cell(first + "\n" + body, "v4")
    for k in VARIANTS.values():
        print(f"RES {k}: {m.resources.get(k)}", flush=True)
    print(f"RES compiled in {time.time() - t0:.1f} s", flush=True)
    return m


def do_check():
    m = module()
    few = [Attn(1, 2, 2000, 128, kind="growing"), Attn(1, 3, 2500, 128, causal=True, kind="growing"),
           Attn(1, 2, 1000, 128, kind="peaked"), Attn(1, 2, 1000, 128, Sk=65), Attn(1, 2, 65, 128, Sk=1001),
           Attn(1, 1, 4096, 128, causal=True, kind="outlier"), Attn(1, 8, 200, 128, Sk=333, Hkv=2),
           Attn(2, 3, 1031, 128, causal=True, kind="peaked"), Attn(1, 1, 7, 128, Sk=0), Attn(1, 2, 64, 64, Sk=1)]
    for label, kern in VARIANTS.items():
        launch = P.flash3_fp8_launch(m[kern])
        bad = 0
        for s in few:
            if s.d != 128:
                continue
            for seed in (1234, secrets.randbits(31), secrets.randbits(31)):
                try:
                    check(launch, P.flash3_fp8, sizes=[s], seed=seed, quiet=True)
                except CheckFailed as e:
                    bad += 1
                    print(f"  {label}: {s.describe()} seed {seed}: FAILED: {str(e)[:400]}", flush=True)
        print(f"CHECK {label}: {'passed' if not bad else f'{bad} FAILED'}", flush=True)


def do_full(kern=None, rounds=1):
    """One kernel at every visible and hidden size, fresh seeds (as fp8attn_seeds.py does the lesson's)."""
    kern = kern or FULL
    first, _, body = _src().partition("\n")
    m = compile_cell(first + "\n" + body, "v4full", only=kern)
    launch = P.flash3_fp8_launch(m[kern])
    failed, t0, sizes = 0, time.time(), list(P.FP8_GPU) + list(P.FP8_HIDDEN)
    for _ in range(rounds):
        for s in sizes:
            seed = secrets.randbits(31)
            try:
                check(launch, P.flash3_fp8, sizes=[s], seed=seed, quiet=True)
            except CheckFailed as e:
                failed += 1
                print(f"FULL FAILED {s.describe()} seed {seed}: {str(e)[:400]}", flush=True)
    print(f"FULL {kern}: {rounds} round(s) x {len(sizes)} sizes, fresh seeds: {failed} failed [{time.time() - t0:.0f} s]")


def do_wrong(mistake, kern=None):
    """A mistake of tests/wrong/ch05_flash3_fp8.py in the cell, checked on kernel `kern` (the candidate)."""
    from tests.wrong import ch05_flash3_fp8 as W

    kern = kern or FULL
    first, _, body = W.cpp_variant(_src(), W.FP8_MISTAKES[mistake]).partition("\n")
    m = compile_cell(first + "\n" + body, "v4wrong", only=kern)
    print(wrong_result(P.flash3_fp8_launch(m[kern]), f"{mistake} on {kern}"))


def do_time(reps=3):
    from grader.speed import measure

    _shared_cases()
    m = module()
    b16 = bf16_launch()
    ratios = {k: [] for k in VARIANTS}
    for causal in (False, True):
        prob = P.flash3_fp8_causal if causal else P.flash3_fp8
        peer = P.fa3_bf16(b16, causal)
        for rep in range(reps if not causal else 1):
            for label, kern in VARIANTS.items():
                r = measure(P.flash3_fp8_launch(m[kern]), prob, label, peer=peer, budget_s=0.8)
                if not causal:
                    ratios[label].append(r.fraction)
                print(f"TIME {prob.bench_size.describe()} {label} (round {rep + 1}): {r.value:.1f} TFLOP/s = "
                      f"{r.fraction:.3f}x {r.peer_name} ({r.peer_value:.1f})", flush=True)
    for label, rs in ratios.items():
        rs = sorted(rs)
        print(f"TIME non-causal {label}: median {rs[len(rs) // 2]:.3f}x, all {', '.join(f'{x:.3f}' for x in rs)}")


if __name__ == "__main__":
    try:
        if sys.argv[1] == "check":
            do_check()
        elif sys.argv[1] == "full":
            do_full(None, int(sys.argv[2]) if len(sys.argv) > 2 else 1)
        elif sys.argv[1] == "wrong":
            do_wrong(sys.argv[2])
        else:
            do_time(int(sys.argv[2]) if len(sys.argv) > 2 else 3)
    except Exception:
        traceback.print_exc()
    sys.stdout.flush()
