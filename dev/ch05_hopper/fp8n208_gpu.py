"""Lesson 05.04's FP8 GEMM with 128 × 208 tiles (dev/ch05_hopper/fp8_variants/n208.cu) on a Hopper GPU.

    python dev/ch05_hopper/fp8n208_gpu.py check            # its kernels at the smoke, visible and hidden sizes
    python dev/ch05_hopper/fp8n208_gpu.py time [SIZES] [ROUNDS]   # beside the lesson's kernel and cuBLAS
    python dev/ch05_hopper/fp8n208_gpu.py all [SIZES] [ROUNDS]    # both in one process (one build), check first

Why 208: per k tile a consumer's own tensor time is 2N clocks and its chain after its wgmmas ~1.5N + F
(promotion, issue, waits), so a wider tile amortizes F; 208 is the widest N whose partial + fp32 sum fit
setmaxnreg's registers. Correctness is grader.check before any timing; timing is grader.measure beside
torch._scaled_mm tensorwise (the problem's peer, measured once per size in the process), the lesson's
kernel (tools/ch05_hopper/fp8_cell.cu, through fp8_gpu.module) timed in the same process, the kernels
interleaved round by round. The compilers' register and spill reports (the device's NVRTC) are printed.
"""
from __future__ import annotations

import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fp8_gpu as G  # noqa: E402  (its module(), SMOKE, LESSON, _cached_problem; puts the repo on sys.path)

import grader  # noqa: E402
from grader import peers  # noqa: E402
from grader.problems import hopper_fp8 as F  # noqa: E402
from grader.problems.gemm import Shape  # noqa: E402

SRC = G.ROOT / "dev" / "ch05_hopper" / "fp8_variants" / "n208.cu"
N208 = ["fp8_gemm_w<Fp8w<208, 4, 8>>", "fp8_gemm_w<Fp8w<208, 4, 16>>"]


def n208_module():
    mod = G.module(N208, "n208", SRC.read_text())
    for k in N208:
        print(f"BUILD {k}: {mod.resources[k]} ({mod.compiler})", flush=True)
    return mod


def step_check(mod=None, full=N208[:1]) -> list[str]:
    """The kernels right at the smoke shapes (those in ``full`` at every visible and hidden size too)."""
    mod = mod or n208_module()
    right = []
    for k in N208:
        launch = F.fp8_gemm_launch(mod[k])
        try:
            grader.check(launch, F.fp8_gemm, sizes=G.SMOKE, quiet=True)
            print(f"CHECK {k}: right at {len(G.SMOKE)} smoke shapes", flush=True)
            if k in full:
                grader.check(launch, F.fp8_gemm)
                grader.check(launch, F.fp8_gemm, hidden=True)
                print(f"CHECK {k}: right at every visible and hidden size", flush=True)
            right.append(k)
        except Exception as e:
            print(f"CHECK {k}: WRONG: {' | '.join(str(e).splitlines()[:3])[:500]}", flush=True)
    return right


def step_time(sizes, rounds: int, checked: bool = False) -> None:
    """Each n208 kernel checked first (at the smoke shapes; ``checked``: the first at every visible and
    hidden size too), then the right ones and the lesson's kernel timed, ``rounds`` rounds interleaved."""
    lesson = G.module([G.LESSON], "fp8")
    mod = n208_module()
    right = step_check(mod, full=N208[:1] if checked else [])
    cands = [(G.LESSON + " LESSON", F.fp8_gemm_launch(lesson[G.LESSON]))]
    cands += [(k, F.fp8_gemm_launch(mod[k])) for k in right]
    time_rounds(cands, sizes, rounds)


def time_rounds(cands, sizes, rounds: int, **changes) -> None:
    """Each (label, launch) of ``cands`` at n³ for n in ``sizes``, ``rounds`` rounds interleaved, beside
    torch._scaled_mm tensorwise (the problem's peer, measured once per size in this process); a
    (label, launch, peer) entry is measured beside that peer instead. ``changes``: to the problem's fields."""
    problem = G._cached_problem().variant(**changes)
    tensorwise = peers.scaled_mm("tensorwise")
    for n in sizes:
        for r in range(rounds):
            for k, launch, *peer in cands:
                peer = peer[0] if peer else tensorwise
                try:
                    print(f"TIME {n}^3 round {r + 1}: {grader.measure(launch, problem, k, size=Shape(n, n, n), peer=peer)}",
                          flush=True)
                except Exception as e:
                    print(f"TIME {n}^3: {k} vs {peer}: failed: {e}", flush=True)


def time_checked(built, okfile: str, sizes, rounds: int, timing_only=(), **changes) -> None:
    """The lesson's kernel (tools/ch05_hopper/fp8_cell.cu) and those (label, launch) of ``built`` that a
    check step wrote to ``okfile`` (the others reported, not timed), plus the ``timing_only`` labels
    (wrong values by design), through time_rounds (``changes``: to the problem's fields)."""
    ok = set(Path(okfile).read_text().split("\n")) if Path(okfile).exists() else set()
    lesson = G.module([G.LESSON], "fp8", G.CELL_FILE.read_text())   # the generator source: no nbformat needed
    cands = [(G.LESSON + " LESSON", F.fp8_gemm_launch(lesson[G.LESSON]))]
    for label, launch in built:
        if label in timing_only:
            cands.append((label + " (timing only: wrong values)", launch))
        elif label in ok:
            cands.append((label, launch))
        else:
            print(f"TIME {label}: not timed (not right in the check step)", flush=True)
    time_rounds(cands, sizes, rounds, **changes)


def okfile_main(step_check, step_time) -> None:
    """The command line of a check-then-time script: ``check OKFILE`` or ``time OKFILE [SIZES] [ROUNDS]``."""
    what, okfile = sys.argv[1], sys.argv[2]
    try:
        if what == "check":
            step_check(okfile)
        else:
            step_time(okfile, [int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "8192,4096").split(",")],
                      int(sys.argv[4]) if len(sys.argv) > 4 else 2)
    except Exception:
        traceback.print_exc()
        sys.exit(1)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "time"
    try:
        if what == "check":
            step_check(full=N208)
        elif what == "all":
            step_time([int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "8192,4096").split(",")],
                      int(sys.argv[3]) if len(sys.argv) > 3 else 1, checked=True)
        else:
            step_time([int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "8192,4096").split(",")],
                      int(sys.argv[3]) if len(sys.argv) > 3 else 2)
    except Exception:
        traceback.print_exc()
        sys.exit(1)
