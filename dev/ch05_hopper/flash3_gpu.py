"""Lesson 05.07 (FlashAttention-3 ideas) on a Hopper GPU: checked, wrong kernels run, timed.

    python dev/ch05_hopper/flash3_gpu.py compile        # (CPU) every variant: registers, spills, setmaxnreg
    python dev/ch05_hopper/flash3_gpu.py check          # the reference (d 64, 128) at every visible and hidden
                                                        # size; each ablation variant at a few sizes
    python dev/ch05_hopper/flash3_gpu.py wrong NAME     # one mistake of tests/wrong/ch05_flash3.py: caught?
    python dev/ch05_hopper/flash3_gpu.py time [WHAT]    # WHAT = sweep: the reference against cuDNN and flash SDPA,
                                                        # d 64/128, S 1k–16k, causal and not; ablation: the
                                                        # switches at d 128 (and 64), S 4096

The kernel comes from solutions/05_hopper_blackwell/07_flash3.ipynb (cell v_flash3), compiled with
every ``F3<D, WS, PINGPONG, OVERLAP>`` the ablation needs. Correctness is grader.check before any timing; timing is
grader.measure, each figure beside cuDNN's and flash's SDPA on the same q, k, v in the same run.
flash3_gpu.sh runs each step in its own process with a timeout.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import grader  # noqa: E402
from grader import peers  # noqa: E402
from grader.cuda import sass  # noqa: E402
from grader.notebooks import cell_source, run_source  # noqa: E402
from grader.problems import flash3 as P  # noqa: E402
from grader.problems.attention import Attn  # noqa: E402

NB = ROOT / "solutions" / "05_hopper_blackwell" / "07_flash3.ipynb"
REF = {128: "flash3<F3<128, 1, 1, 1>>", 64: "flash3<F3<64, 1, 1, 1>>"}
ABLATION = {"reference (WS + ping-pong + overlap)": (1, 1, 1), "without warp specialization": (0, 1, 1),
            "without ping-pong": (1, 0, 1), "without intra-warpgroup overlap": (1, 1, 0),
            "without ping-pong and overlap": (1, 0, 0), "ring of 2 slots, not 3": (1, 1, 1, 2)}
SMOKE = [Attn(1, 2, 1031, 128, causal=True), Attn(1, 2, 65, 64, Sk=1000), Attn(1, 2, 2000, 128, causal=True, kind="growing"),
         Attn(2, 2, 777, 64, Sk=3001), Attn(1, 1, 7, 64, Sk=0)]


def name(d: int, *switches: int) -> str:
    return f"flash3<F3<{d}, {', '.join(map(str, switches))}>>"


def source() -> str:
    return cell_source(NB, "v_flash3")


def module(kernels, mod="f3", src=None):
    src = src or source()
    flags = " ".join(f'-k "{k}"' for k in kernels)
    src = re.sub(r"^%%cuda \w+[^\n]*", f"%%cuda {mod} --arch sm_90a {flags}", src)
    ns: dict = {}
    run_source(src, mod, ns)
    return ns[mod]


def all_kernels():
    return [name(d, *sw) for d in (128, 64) for sw in ABLATION.values()]


def step_compile() -> None:
    mod = module(all_kernels(), "all")
    for k in all_kernels():
        r = sass.require(mod, k, present=["HGMMA", "UTMALDG.3D"], absent=["LDL", "STL"], raise_=False)
        try:
            smr = sass.require_setmaxnreg(mod, k, threads=mod.launch_shape(k).threads)
        except sass.RubricFailed as e:
            smr = str(e).splitlines()[-1]
        print(f"{k:28s} {mod.launch_shape(k)}; registers {r.registers}, spills {r.spill_stores or 0}, "
              f"{'ok' if r.ok else r.problems}; setmaxnreg {smr}")
    print("C7512 (wgmma serialized):", [ln[-90:] for ln in mod.log.splitlines() if "C7512" in ln] or "none")


def step_check() -> None:
    mod = module(list(REF.values()), "ref")
    launch = P.flash3_launch(mod[REF[128]], mod[REF[64]])
    grader.check(launch, P.flash3)
    grader.check(launch, P.flash3, hidden=True)
    print("CHECK: the reference passed every visible and hidden size", flush=True)
    allm = module(all_kernels(), "all")
    for label, sw in ABLATION.items():
        try:
            grader.check(P.flash3_launch(allm[name(128, *sw)], allm[name(64, *sw)]), P.flash3, sizes=SMOKE, quiet=True)
            print(f"CHECK {label}: right at {len(SMOKE)} sizes", flush=True)
        except Exception as e:
            print(f"CHECK {label}: WRONG: {str(e).splitlines()[0]}", flush=True)


def step_wrong(mistake: str) -> None:
    from tests.wrong import ch05_flash3 as W
    from grader.check import CheckFailed, check

    src = W.cpp_variant(source(), W.FLASH3_MISTAKES[mistake])
    mod = module([REF[128], REF[64]], "bad", src)
    try:
        check(P.flash3_launch(mod[REF[128]], mod[REF[64]]), P.flash3,
              sizes=[Attn(1, 2, 1031, 128, causal=True), Attn(1, 2, 2000, 128, kind="growing"), Attn(1, 2, 1000, 128, Sk=65)],
              quiet=True)
        print(f"RESULT {mistake}: NOT caught by the values", flush=True)
    except CheckFailed as e:
        print(f"RESULT {mistake}: caught: {' | '.join(str(e).splitlines()[:2])[:400]}", flush=True)
    import os

    os._exit(0)                      # a kernel may still spin: leave without waiting for it


def _time(launch, size, label, flash=True):
    m = grader.measure(launch, P.flash3, label, size=size, peer=peers.sdpa("cudnn", causal=size.causal))
    print(f"TIME {size.describe()}: {m}", flush=True)
    if flash:
        f = grader.measure(launch, P.flash3, label, size=size, peer=peers.sdpa("flash", causal=size.causal))
        print(f"TIME {size.describe()}: {f}", flush=True)


def step_time(what: str) -> None:
    if what == "schedule":                       # the persistent loop's head groups: 1 against the default
        mod = module([REF[128]], "ref")
        for S, B in ((4096, 4), (16384, 1)):
            for causal in (True, False):
                for group in (1, None):
                    launch = P.flash3_launch(mod[REF[128]], group=group)
                    try:
                        _time(launch, Attn(B, 32, S, 128, causal=causal), f"group {group or 'default'} d128",
                              flash=False)
                    except Exception as e:
                        print(f"TIME S={S} causal={causal} group={group}: failed: {str(e).splitlines()[0]}", flush=True)
        return
    if what == "sweep":
        mod = module(list(REF.values()), "ref")
        launch = P.flash3_launch(mod[REF[128]], mod[REF[64]])
        for d in (128, 64):
            for S, B in ((1024, 16), (4096, 4), (16384, 1)):
                for causal in (False, True):
                    try:
                        _time(launch, Attn(B, 32, S, d, causal=causal), f"flash3 d{d}", flash=S == 4096)
                    except Exception as e:
                        print(f"TIME B={B} S={S} d={d} causal={causal}: failed: {str(e).splitlines()[0]}", flush=True)
        return
    allm = module(all_kernels(), "all")
    for d in (128, 64):
        for label, sw in ABLATION.items():
            if d == 64 and sw != (1, 1, 1):
                continue                         # the switches at d 128 only (run 1 timed them at 64 too)
            launch = P.flash3_launch(allm[name(d, *sw)])
            for causal in (False, True):
                try:
                    _time(launch, Attn(4, 32, 4096, d, causal=causal), f"{label} d{d}", flash=False)
                except Exception as e:
                    print(f"TIME {label} d{d} causal={causal}: failed: {str(e).splitlines()[0]}", flush=True)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "check"
    if what == "compile":
        step_compile()
    elif what == "check":
        step_check()
    elif what == "wrong":
        step_wrong(sys.argv[2])
    else:
        step_time(sys.argv[2] if len(sys.argv) > 2 else "sweep")
