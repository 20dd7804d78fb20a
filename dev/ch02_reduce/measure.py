"""Chapter 02 on a GPU: time every version and every graded reference against its peer.

    python dev/ch02_reduce/measure.py            # all lessons
    python dev/ch02_reduce/measure.py 03 04      # some lessons
    python dev/ch02_reduce/measure.py --no-check # skip the correctness checks at GPU sizes

The kernels are the solution notebooks' own cells (grader.notebooks.run_cells). Each row is
checked with grader.check at the problem's GPU sizes, then timed with grader.measure (the
problem's inputs at its bench size, CUDA events, L2 flushed, median) against a peer measured in
the same run on the same inputs (grader.peers): the device-to-device copy bandwidth, or the torch
op (torch.sum, torch.softmax, torch.nn.functional.rms_norm).
Prints: kernel | figure | peer | ratio | goal | status. Exit status 1 if a goal is missed.
"""
from __future__ import annotations

import sys
import traceback

from common import load   # first: puts the repository on sys.path and imports grader

import grader
from grader.problems import reduce as P

COPY = "copy"


def plan(lessons: set[str]) -> list:
    """(lesson, label, launch, problem, peer, goal or None, check at GPU sizes?)"""
    rows = []
    if "01" in lessons:
        ns = load("01_atomics_and_trees.ipynb", ["v1_atomic", "v2_interleaved", "v3_sequential"])
        rows += [("01", "v1 atomics", ns["launch_v1"], P.block_sum, COPY, None, False),
                 ("01", "v2 tree interleaved", ns["launch_v2"], P.block_sum, COPY, None, False),
                 ("01", "v3 tree sequential (graded)", ns["launch_block_sum"], P.block_sum, COPY, None, True)]
    if "02" in lessons:
        ns = load("02_warps.ipynb", ["v1_warp", "v2_block", "v3_grid_stride", "v4_two_pass", "v5_dot"])
        rows += [("02", "v1 warp shuffles + atomics", ns["launch_v1"], P.total_sum, COPY, None, False),
                 ("02", "v2 block reduce + atomics", ns["launch_v2"], P.total_sum, COPY, None, False),
                 ("02", "v3 grid-stride (graded ref)", ns["launch_sum"], P.total_sum, COPY, 0.90, True),
                 ("02", "v3 grid-stride (graded ref)", ns["launch_sum"], P.total_sum, P.torch_sum, 1.00, False),
                 ("02", "v4 two-pass", ns["launch_two_pass"], P.total_sum, COPY, None, True),
                 ("02", "v5 dot", ns["launch_dot"], P.dot, COPY, None, True)]
    if "03" in lessons:
        ns = load("03_softmax.ipynb", ["given", "v1_naive", "v2_safe", "online_state", "v3_online",
                                       "v4_registers", "v5_warp_rows"])
        torch_softmax = P.softmax_bf16.peer
        rows += [("03", "v1 naive (no max)", ns["launch_naive"], P.softmax_bf16, torch_softmax, None, False),
                 ("03", "v2 safe 3-pass", ns["launch_safe"], P.softmax_bf16, torch_softmax, None, True),
                 ("03", "v3 online 2-pass", ns["launch_online"], P.softmax_bf16, torch_softmax, 1.0, True),
                 ("03", "v4 registers (graded ref)", ns["launch_registers"], P.softmax_bf16, torch_softmax, 2.5, True),
                 ("03", "v4 registers (graded ref)", ns["launch_registers"], P.softmax_bf16, COPY, 0.80, False),
                 ("03", "v5 warp per row", ns["launch_warp_rows"], P.softmax_bf16, torch_softmax, None, True)]
    if "04" in lessons:
        ns = load("04_norms.ipynb", ["welford", "v1_layernorm", "given", "v2_rmsnorm", "v3_registers"])
        torch_rms = P.rmsnorm_bf16.peer
        rows += [("04", "v1 LayerNorm Welford fp32", ns["launch_layernorm"], P.layernorm, COPY, None, True),
                 ("04", "v2 RMSNorm block per row", ns["launch_rmsnorm_simple"], P.rmsnorm_bf16, torch_rms, 1.0, True),
                 ("04", "v3 RMSNorm registers (graded ref)", ns["launch_rmsnorm_registers"], P.rmsnorm_bf16, torch_rms, 1.5, True),
                 ("04", "v3 RMSNorm registers (graded ref)", ns["launch_rmsnorm_registers"], P.rmsnorm_bf16, COPY, None, False)]
    if "05" in lessons:
        ns = load("05_scan_and_histogram.ipynb", ["v2_blelloch", "h1_global", "h2_private"])
        rows += [("05", "scan three-phase", ns["launch_scan"], P.scan, COPY, None, True),
                 ("05", "histogram global atomics", ns["launch_hist_global"], P.histogram, COPY, None, True),
                 ("05", "histogram private", ns["launch_hist_private"], P.histogram, COPY, None, True)]
    return rows


def main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    if grader.SIMULATOR:
        print("No GPU: this script times kernels on a CUDA GPU (the simulator cannot).")
        return 2
    lessons = {a for a in argv if not a.startswith("-")} or {"01", "02", "03", "04", "05"}
    do_check = "--no-check" not in argv
    print(f"device: {grader.device.info().name}")
    table, missed = [], 0
    for lesson, label, launch, problem, peer, goal, chk in plan(lessons):
        try:
            if do_check and chk:
                grader.check(launch, problem, quiet=True)
            m = grader.measure(launch, problem, label, peer=peer)
            ratio = m.fraction
            status = "—" if goal is None else ("ok" if ratio >= goal else "MISSED")
            missed += status == "MISSED"
            table.append((f"{lesson} {label}", f"{m.value:,.0f} {m.unit}", f"{m.peer_name} {m.peer_value:,.0f}",
                          f"{ratio:.2f}×", "" if goal is None else f"≥ {goal:.2f}×", status))
        except Exception as exc:  # keep going: one broken row must not hide the others
            traceback.print_exc(limit=3)
            missed += goal is not None
            table.append((f"{lesson} {label}", "", "", "", "" if goal is None else f"≥ {goal:.2f}×",
                          f"ERROR {type(exc).__name__}: {str(exc).splitlines()[0][:60]}"))
    head = ("kernel", "figure", "peer", "ratio", "goal", "status")
    widths = [max(len(str(r[i])) for r in [head, *table]) for i in range(6)]
    for r in [head, tuple("-" * w for w in widths), *table]:
        print(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
