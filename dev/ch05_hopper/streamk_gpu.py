"""Lesson 05.05 (schedules: Stream-K, fused epilogue) on a Hopper GPU: checked, wrong kernels run, timed.

    python dev/ch05_hopper/streamk_gpu.py check          # both problems at every visible and hidden size
    python dev/ch05_hopper/streamk_gpu.py wrong NAME     # one mistake of tests/wrong/ch05_streamk.py: caught?
    python dev/ch05_hopper/streamk_gpu.py time           # schedules at the wave-quantized shapes, 4096³, 8192³;
                                                         # the fused epilogue beside its unfused peers
    python dev/ch05_hopper/streamk_gpu.py diag           # where the tail's time goes: the kernel without its
                                                         # fix-up, without the wait for the count

The kernels come from solutions/05_hopper_blackwell/05_schedules.ipynb (v_sk). Correctness is grader.check
before any timing; timing is grader.measure against cuBLAS (or the unfused peers) on the same inputs in
the same run. streamk_gpu.sh runs each step in its own process with a timeout.
"""
from __future__ import annotations

import os
import re
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import grader  # noqa: E402
from grader import peers  # noqa: E402
from grader.notebooks import cell_source, run_source  # noqa: E402
from grader.problems import hopper as H  # noqa: E402
from grader.problems import hopper_streamk as P  # noqa: E402
from grader.problems.gemm import Shape  # noqa: E402
from tests.wrong import ch05_streamk as W  # noqa: E402

NB = ROOT / "solutions" / "05_hopper_blackwell" / "05_schedules.ipynb"
WS_NB = ROOT / "solutions" / "05_hopper_blackwell" / "03_pipelines.ipynb"
WS = "ws_gemm<Ws<128, 256, 4, 2, 8>>"
# the other quantized shape: 18 × 8 = 144 tiles = 132 + 12, K = 8192 (the graded one is 132 + 4, K = 16384)
WAVE2 = P.WAVE_SHAPE_2


def module(kernels, name, source):
    flags = " ".join(f'-k "{k}"' for k in kernels)
    src = re.sub(r"^%%cuda \w+[^\n]*", f"%%cuda {name} --arch sm_90a {flags}", source)
    ns: dict = {}
    run_source(src, name, ns)
    return ns[name]


def cell() -> str:
    return cell_source(NB, W.CELL)


QUICK = os.environ.get("SK_QUICK") == "1"     # a short device budget: fewer checks and timings (the judge checks too)


def step_check() -> None:
    mod = module([W.KERNEL, W.FUSED], "sk", cell())
    launch = P.streamk_gemm_launch(mod[W.KERNEL])
    grader.check(launch, P.streamk_gemm)
    if not QUICK:
        grader.check(launch, P.streamk_gemm, hidden=True)
        for seed in (1, 2):
            grader.check(launch, P.streamk_gemm, sizes=P.STREAMK_SIZES[-3:], seed=seed, quiet=True)
        print("CHECK: stream-k passed every visible and hidden size, and the last three with seeds 1, 2", flush=True)
    for split in ("all", "tail") if QUICK else ("all", "tail", "none"):
        grader.check(P.streamk_gemm_launch(mod[W.KERNEL], split=split), P.streamk_gemm,
                     sizes=P.STREAMK_SIZES[-3:] + [Shape(1000, 1032, 1016)], quiet=True)
        print(f"CHECK: split={split!r} right at 4 shapes", flush=True)
    if not QUICK:
        fused = P.fused_gemm_launch(mod[W.FUSED])
        grader.check(fused, P.fused_gemm)
        grader.check(fused, P.fused_gemm, hidden=True)
        print("CHECK: the fused epilogue passed every visible and hidden size", flush=True)


def step_wrong(name: str) -> None:
    from grader.check import CheckFailed, check

    problem, shape = W.VALUE_CATCHES[name]
    which = W.FUSED if problem == "fused" else W.KERNEL
    mod = module([which], "bad", W.cpp_variant(cell(), W.STREAMK_MISTAKES[name]))
    launch = (P.fused_gemm_launch if problem == "fused" else P.streamk_gemm_launch)(mod[which])
    prob = P.fused_gemm if problem == "fused" else P.streamk_gemm
    size = Shape(*eval(shape))
    try:
        for i in range(5):
            check(launch, prob, sizes=[size], seed=i, quiet=True)
        print(f"RESULT {name}: NOT caught by the values at {size} (5 runs)", flush=True)
    except CheckFailed as e:
        print(f"RESULT {name}: caught at {size} (run {i + 1}): {' | '.join(str(e).splitlines()[:3])[:400]}", flush=True)
    import os

    os._exit(0)


def _addmm_gelu_fused_peer():
    """cuBLASLt's own GELU epilogue (torch._addmm_activation(use_gelu=True): bias and GELU inside
    cuBLAS), ungraded: what a library fusion reaches. Its GELU is tanh-approximated as well."""
    def prepare(ctx):
        import torch

        t = ctx.tensors()
        a, b, bias = (t[k].view(torch.bfloat16) for k in ("a", "b", "bias"))
        return lambda: torch._addmm_activation(bias, a, b, use_gelu=True)
    return peers.Peer("cuBLASLt bias+GELU epilogue (_addmm_activation)", prepare)


def step_time() -> None:
    mod = module([W.KERNEL, W.FUSED], "sk", cell())
    k = mod[W.KERNEL]
    launches = {f"sk {split}": P.streamk_gemm_launch(k, split=split) for split in ("auto", "none", "all", "tail")}
    if not QUICK:
        try:
            ws = module([WS], "ws", cell_source(WS_NB, "v_ws"))[WS]
            launches["05.03 ws_gemm (clusters of 2)"] = H.ws_gemm_launch(ws)
        except Exception as e:
            print(f"05.03's kernel not built: {e}", flush=True)
    for label, launch in launches.items():
        grader.check(launch, P.streamk_gemm, sizes=[Shape(1000, 1032, 1016), Shape(300, 264, 10240)], quiet=True)
    sizes = (WAVE2, P.WAVE_SHAPE, Shape(4096, 4096, 4096)) + (() if QUICK else (Shape(8192, 8192, 8192),))
    for size in sizes:
        for label, launch in launches.items():
            if label != "sk auto" and (size.M >= 4096 and size.N >= 4096 or QUICK and size == WAVE2 and label != "sk none"):
                continue
            try:
                print(f"TIME {size}: {grader.measure(launch, P.streamk_gemm, label, size=size)}", flush=True)
            except Exception as e:
                print(f"TIME {size}: {label} failed: {e}", flush=True)
    fused = P.fused_gemm_launch(mod[W.FUSED])
    plain = P.streamk_gemm_launch(k, split="none")
    grader.check(fused, P.fused_gemm, sizes=[Shape(1000, 1032, 1016)], quiet=True)
    matmul_ops, addmm_ops = P.fused_gemm.peer.choices
    for size in (Shape(4096, 4096, 4096),) if QUICK else (Shape(4096, 4096, 4096), Shape(8192, 8192, 8192), P.WAVE_SHAPE):
        for peer in ("problem", peers.matmul("bf16")) if QUICK else (
                "problem", matmul_ops, addmm_ops, _addmm_gelu_fused_peer(), peers.matmul("bf16")):
            try:
                print(f"TIME {size}: fused {grader.measure(fused, P.fused_gemm, 'fused bias+gelu', size=size, peer=peer)}",
                      flush=True)
            except Exception as e:
                print(f"TIME {size}: fused vs {peer}: failed: {e}", flush=True)
        if not QUICK:
            print(f"TIME {size}: plain {grader.measure(plain, P.streamk_gemm, 'same kernel, no epilogue', size=size)}",
                  flush=True)


# Diagnostic variants (timing only; the first two compute wrong values on the split tiles)
DIAG = {
    # no fix-up at all: later pieces are dropped, owners store their own piece: the schedule's bare cost
    "no fix-up": [("      if (kb > 0) {\n#pragma unroll", "      if (kb > 0) return;\n      if (kb > 0) {\n#pragma unroll"),
                  ("      if (ke < k_tiles) {\n        const int tile_end", "      if (false) {\n        const int tile_end")],
    # the owner reads the sum without waiting for the count
    "no wait": W.STREAMK_MISTAKES["fixup_without_waiting"],
}
# An earlier design, measured on 2026-11-24 (results/ch05/streamk_diag_h100_2026-11-24.log): each later piece
# wrote its own slot and the owner read them one by one -- 10 to 32 reads of 128 KiB by one SM, about 4 µs
# each (ptxas keeps only about 4 of a thread's 16-byte loads in flight beside a 128-register accumulator).
# The atomic sum (red.global.add.v4.f32) leaves the owner one read.


def step_diag() -> None:
    base = module([W.KERNEL], "sk", cell())[W.KERNEL]
    kernels = {"as in the lesson": base}
    for label, edits in DIAG.items():
        kernels[label] = module([W.KERNEL], "d" + str(len(kernels)), W.cpp_variant(cell(), edits))[W.KERNEL]
    for size in (WAVE2, P.WAVE_SHAPE):
        for label, k in kernels.items():
            for split in ("auto", "all"):
                m = grader.measure(P.streamk_gemm_launch(k, split=split), P.streamk_gemm, f"{label}, {split}", size=size)
                print(f"DIAG {size}: {m}", flush=True)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "time"
    try:
        if what == "check":
            step_check()
        elif what == "wrong":
            step_wrong(sys.argv[2])
        elif what == "diag":
            step_diag()
        else:
            step_time()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
