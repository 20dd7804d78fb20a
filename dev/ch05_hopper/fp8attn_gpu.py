"""Lesson 05.08 (FP8 attention) on a Hopper GPU: checked, wrong kernels run, accuracy, timed.

    python dev/ch05_hopper/fp8attn_gpu.py check          # the reference at every visible and hidden size
    python dev/ch05_hopper/fp8attn_gpu.py wrong NAME     # one mistake of tests/wrong/ch05_flash3_fp8.py: caught?
    python dev/ch05_hopper/fp8attn_gpu.py accuracy       # rms error against float64 of the unrounded inputs
    python dev/ch05_hopper/fp8attn_gpu.py time           # FP8 against cuDNN SDPA bf16 and 05.07's bf16 kernel

The FP8 kernel comes from solutions/05_hopper_blackwell/08_flash3_fp8.ipynb (cell v_flash3_fp8), 05.07's
bf16 kernel from 07_flash3.ipynb (cell v_flash3).
Correctness is grader.check; timing grader.measure, every figure of one size in one process.
fp8attn_gpu.sh runs each step in its own process with a timeout.
"""
from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADER_TEST_GPU", "1")    # tests.cells imports tests.conftest: no simulator here

import grader  # noqa: E402
from grader.check import CheckFailed, check  # noqa: E402
from grader.notebooks import cell_source  # noqa: E402
from grader.problems import flash3 as F3  # noqa: E402
from grader.problems import flash3_fp8 as P  # noqa: E402
from grader.problems.attention import Attn  # noqa: E402
from tests.cells import compile_cell  # noqa: E402

NB = ROOT / "solutions" / "05_hopper_blackwell" / "08_flash3_fp8.ipynb"
BF16_NB = ROOT / "solutions" / "05_hopper_blackwell" / "07_flash3.ipynb"
REF = "flash3_fp8<F8<0, 1, 1>>"
VARIANTS = {"reference: 192-key tiles, ring of 4, lazy rescale, four chains (F8<0, 1, 1>)": REF,
            "rescale whenever a max moves (F8<0, 0, 1>)": "flash3_fp8<F8<0, 0, 1>>",
            "one chain (F8<0, 1, 0>)": "flash3_fp8<F8<0, 1, 0>>",
            "ring of 3 (F8<0, 1, 1, 3>)": "flash3_fp8<F8<0, 1, 1, 3>>",
            "128-key tiles, ring of 5 (F8<0, 1, 1, 0, 0, 128>)": "flash3_fp8<F8<0, 1, 1, 0, 0, 128>>",
            "2 of 8 exponentials on the FMA units (F8<0, 1, 1, 0, 2>)": "flash3_fp8<F8<0, 1, 1, 0, 2>>"}
# checked at every visible and hidden size (the others at five): the reference and the candidates for it
FULL = {REF}
# the cell's first form (P V waited for right after the softmax: nothing overlapped)
OLD = {"first form: wait after the softmax": REF}


def source() -> str:
    return cell_source(NB, "v_flash3_fp8")


def fp8_module(src=None, name="f8"):
    """The cell, with every kernel of VARIANTS built (some are the dev scripts' only)."""
    first, _, body = (src or source()).partition("\n")
    first += "".join(f' -k "{k}"' for k in dict.fromkeys(VARIANTS.values()) if f'"{k}"' not in first)
    return compile_cell(first + "\n" + body, name)


def bf16_launch():
    src = cell_source(BF16_NB, "v_flash3")
    m = compile_cell(src, "f3", only="flash3<F3<128, 1, 1, 1>>")
    return F3.flash3_launch(m["flash3<F3<128, 1, 1, 1>>"])


def do_check():
    m = fp8_module()
    ok = True
    few = [Attn(1, 2, 2000, 128, kind="growing"), Attn(1, 3, 2500, 128, causal=True, kind="growing"),
           Attn(1, 2, 1000, 128, kind="peaked"), Attn(1, 2, 1000, 128, Sk=65), Attn(1, 1, 4096, 128, causal=True, kind="outlier")]
    for label, kern in [("reference", REF)] + [(k, v) for k, v in VARIANTS.items() if v != REF]:
        launch = P.flash3_fp8_launch(m[kern])
        sizes = list(P.FP8_GPU) + list(P.FP8_HIDDEN) if kern in FULL else few
        for s in sizes:
            try:
                check(launch, P.flash3_fp8, sizes=[s], seed=1234, quiet=True)
                print(f"  {label}: {s.describe()}: passed")
            except CheckFailed as e:
                ok = False
                print(f"  {label}: {s.describe()}: FAILED: {str(e)[:600]}")
    if ok:
        print("CHECK: the reference passed")


def wrong_result(launch, label: str) -> str:
    """The RESULT line of a wrong kernel's launch checked at two sizes that show each FP8 mistake."""
    try:
        check(launch, P.flash3_fp8, sizes=[Attn(1, 2, 1000, 128, kind="peaked"), Attn(2, 3, 1000, 128)], seed=7, quiet=True)
        return f"RESULT {label}: NOT caught (passed)"
    except CheckFailed as e:
        return f"RESULT {label}: caught: {str(e).splitlines()[0][:200]} | {' '.join(str(e).splitlines()[1:3])[:300]}"


def do_wrong(mistake):
    from tests.wrong import ch05_flash3_fp8 as W

    m = fp8_module(W.cpp_variant(source(), W.FP8_MISTAKES[mistake]), "wrong")
    print(wrong_result(P.flash3_fp8_launch(m[REF]), mistake))


def do_accuracy():
    m = fp8_module()
    launch = P.flash3_fp8_launch(m[REF])
    res = P.accuracy(launch, sizes=(Attn(1, 4, 1024, 128),), factors=(1.0, 3.0, 10.0, 30.0, 100.0))
    labels = sorted({k[0] for k in res})
    factors = sorted({k[1] for k in res})
    print("ACCURACY rms error of O vs float64 of the unrounded inputs, % (B=1 H=4 S=1024 d=128; bound "
          f"{100 * P.ACCURACY_BOUND:.1f}%)")
    print("ACCURACY outlier factor: " + "  ".join(f"{f:6g}" for f in factors))
    for lab in labels:
        print(f"ACCURACY {lab:28s}" + "  ".join(f"{100 * res[(lab, f)]:6.2f}" for f in factors))


def _shared_cases():
    """One TimedCase per (problem, size) for every measure of this process: the benchmark's FP8 inputs
    take seconds to prepare, and every kernel and peer is then timed on the same inputs."""
    import grader.speed  # noqa: F401  (the module: grader.speed, the attribute, is the verb)

    gs = sys.modules["grader.speed"]
    made, cls = {}, gs.TimedCase

    def case(problem, size, seed=0, repoisoned=False):
        key = (problem.name, size, seed, repoisoned)
        if key not in made:
            made.clear()                              # one benchmark's inputs on the GPU at a time
            made[key] = cls(problem, size, seed, repoisoned)
        return made[key]
    gs.TimedCase = case


def do_time(what="all"):
    import time

    from grader.speed import measure
    from tests.wrong import ch05_flash3_fp8 as W

    _shared_cases()
    m = fp8_module()
    old = fp8_module(W.cpp_variant(source(), W.WAIT_AFTER_SOFTMAX), "f8old")
    b16 = bf16_launch()
    for causal in (False, True):
        prob = P.flash3_fp8_causal if causal else P.flash3_fp8
        size = prob.bench_size
        t0 = time.time()
        r = measure(P.flash3_fp8_launch(m[REF]), prob, "reference", budget_s=1.5)
        print(f"TIME {size.describe()} reference: {r.value:.1f} TFLOP/s = {100 * r.fraction:.1f}% of "
              f"{r.peer_name} ({r.peer_value:.1f}) [{time.time() - t0:.1f} s with the inputs]", flush=True)
        runs = [(k, m[v]) for k, v in VARIANTS.items()] + [(k, old[v]) for k, v in OLD.items()]
        if what != "variants" and causal:
            runs = runs[:2]
        for label, kern in runs:
            r = measure(P.flash3_fp8_launch(kern), prob, label, peer=P.fa3_bf16(b16, causal), budget_s=0.8)
            print(f"TIME {size.describe()} {label}: {r.value:.1f} TFLOP/s = {r.fraction:.3f}x "
                  f"{r.peer_name} ({r.peer_value:.1f})", flush=True)
    t0 = time.time()
    case = P.flash3_fp8.make_inputs(__import__("numpy").random.default_rng(5), P.FP8_BENCH)
    t1 = time.time()
    P.flash3_fp8.reference(**case)
    print(f"TIME the benchmark's inputs: {t1 - t0:.1f} s to prepare, its float64 reference {time.time() - t1:.1f} s",
          flush=True)


if __name__ == "__main__":
    what = sys.argv[1]
    try:
        if what == "time":
            do_time(*sys.argv[2:3])
        else:
            {"check": do_check, "accuracy": do_accuracy}.get(what, lambda: do_wrong(sys.argv[2]))()
    except Exception:
        traceback.print_exc()
    sys.stdout.flush()
