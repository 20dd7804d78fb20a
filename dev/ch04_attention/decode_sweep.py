"""Sweep the decode lesson's configuration on a GPU: tile, warps, stages, blocks per SM, splits per SM.

The lesson's cell (solutions/04_attention/04_decoding.ipynb, v_decode) is compiled with its
``Dec``/``Paged`` aliases replaced, and each variant is timed as the grader times it at the
problem's timed size, beside the copy peer measured in the same run.

    python dev/ch04_attention/decode_sweep.py
"""
from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import grader  # noqa: E402,F401
from grader import peers, timing  # noqa: E402
from grader.notebooks import cell_source, run_source  # noqa: E402
from grader.problems import attention as P  # noqa: E402
from grader.speed import TimedCase  # noqa: E402

NB = ROOT / "solutions" / "04_attention" / "04_decoding.ipynb"
#          BN  warps stages min-blocks
CONFIGS = [(64, 4, 3, 2), (64, 4, 4, 1), (64, 4, 2, 2), (32, 2, 6, 2), (32, 2, 4, 3),
           (128, 8, 2, 1), (128, 8, 3, 1), (64, 2, 3, 2), (128, 4, 2, 1)]
PER_SM = (1, 2, 3, 4, 6)


def variant_source(cfg) -> str:
    """The lesson's cell with its ``Dec``/``Paged`` aliases set to ``cfg`` (each rewrite must apply once)."""
    bn, warps, stages, minb = cfg
    src = cell_source(NB, "v_decode")
    for pattern, repl in ((r"^%%cuda \w+[^\n]*", f'%%cuda dec_{bn}_{warps}_{stages}_{minb} -k "decode<Dec<128>>" -k "decode<Paged<128>>"'),
                          (r"using Dec = DecConfig<D, [^>]*>", f"using Dec = DecConfig<D, {bn}, {warps}, {stages}, false, {minb}>"),
                          (r"using Paged = DecConfig<D, [^>]*>", f"using Paged = DecConfig<D, {bn}, {warps}, {stages}, true, {minb}>")):
        src, n = re.subn(pattern, repl, src)
        if n != 1:
            raise ValueError(f"{NB.name} v_decode: {pattern!r} matched {n} times, not once")
    return src


def compile_variant(cfg) -> object:
    ns: dict = {}
    run_source(variant_source(cfg), "v_decode", ns)
    return next(v for v in ns.values())


def timed(launch, problem, size) -> float:
    args = TimedCase(problem, size, 1).args
    return float(np.median(timing.time_call(lambda: launch(*args), budget_s=0.6)))


def main() -> None:
    import torch

    print(torch.cuda.get_device_name(), time.strftime("%Y-%m-%d"))
    results = []
    for problem in (P.decode, P.decode_paged):
        size = problem.bench_size
        case = TimedCase(problem, size, 1)
        name, copy = peers.measure(problem.peer, peers.inputs_for(case.dev_in, size, problem.work(size)), 1.0)
        print(f"{problem.name}: peer {name} {copy:.0f} GB/s")
        results.append((problem, copy))
    for cfg in CONFIGS:
        try:
            mod = compile_variant(cfg)
        except Exception as exc:          # a variant that does not fit (shared memory, registers)
            print(cfg, "does not build:", str(exc).splitlines()[0][:160])
            continue
        for problem, copy in results:
            kern = mod["decode<Paged<128>>" if "paged" in problem.name else "decode<Dec<128>>"]
            make = P.paged_decode_launch if "paged" in problem.name else P.decode_launch
            row = []
            for per_sm in PER_SM:
                try:
                    t = timed(make(kern, merge="fused", per_sm=per_sm), problem, problem.bench_size)
                    gbs = problem.work(problem.bench_size)["bytes"] / t / 1e9
                    row.append(f"{per_sm}/SM {100 * gbs / copy:5.1f}%")
                except Exception as exc:
                    row.append(f"{per_sm}/SM failed ({str(exc).splitlines()[0][:60]})")
            print(f"{problem.name:18s} BN {cfg[0]:3d} warps {cfg[1]} stages {cfg[2]} minB {cfg[3]}: " + "  ".join(row),
                  flush=True)


if __name__ == "__main__":
    main()
