"""Chapter 01 on a GPU: every version of lessons 02-04 against the copy bandwidth, in one run.

    python dev/ch01_elementwise/measure.py                 # from the repository root, on a CUDA GPU
    python dev/ch01_elementwise/measure.py --json out.json # also write the rows
    python dev/ch01_elementwise/measure.py --quick         # shorter timing budget, no sweeps
    python dev/ch01_elementwise/measure.py --sim           # no GPU: a dry run in the simulator (checks only)

The kernels are the solution notebooks' own cells (grader.notebooks.definitions runs their
definitions, not their checks), so what is measured is what the lessons teach. Each kernel is
checked with grader.check at the problem's GPU sizes first (status FAIL if wrong), then timed with
grader.measure at the problem's bench size (the problem's inputs, CUDA events, L2 flushed, median)
and compared with the copy ceiling measured in this process (grader.peers.ceiling("copy"): the
faster of cudaMemcpy and torch's copy_, 1 GiB each way). Lesson 04 also times torch's unfused
`gelu(x + bias)` (if torch is installed) with grader.bench on the same device inputs. Then two
sweeps, with grader.bench: saxpy's block size, and the transpose's tile shape.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import common   # first: puts the repository on sys.path and imports grader

import grader
from grader import peers
from grader.integrity import trust
from grader.problems import elementwise as P

REFERENCE_GOAL = {"saxpy": 0.90, "transpose": 0.85, "bias + GELU (bf16)": 0.90}


def _torch_unfused_gelu(x, bias):
    import torch

    return torch.nn.functional.gelu(x.view(torch.bfloat16) + bias.view(torch.bfloat16), approximate="tanh")


TORCH_UNFUSED = peers.torch_op("torch unfused gelu(x + bias)", _torch_unfused_gelu)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--quick", action="store_true", help="1 s per measurement, no sweeps")
    ap.add_argument("--sim", action="store_true", help="dry run in the simulator at tiny sizes (tests this script)")
    args = ap.parse_args()
    if grader.SIMULATOR and not args.sim:
        print("No GPU: this script measures speed and needs a CUDA GPU (--sim: a dry run of the script).")
        return 2
    budget = 1.0 if args.quick else 3.0
    info = grader.device.info()
    probs = {"saxpy": P.saxpy, "transpose": P.transpose, "gelu": P.bias_gelu, "silu": P.bias_silu}
    if grader.SIMULATOR:               # dry run: tiny bench sizes, checks at simulator sizes, no timings
        small = {"saxpy": 1000, "transpose": (40, 72), "gelu": (8, 64), "silu": (8, 64)}
        probs = {k: p.variant(bench_size=small[k]) for k, p in probs.items()}
        for p in probs.values():
            trust(p)                   # variants of the course's problems, made here
        copy_label, copy_bw = "copy bandwidth", float("nan")
    else:
        copy_label, copy_bw = peers.ceiling("copy")
    print(f"{info.name} ({info.arch}, {info.sm_count} SMs): {copy_label} {copy_bw:,.0f} GB/s\n")
    l02, l03, l04 = common.load()
    rows = []

    def measure(lesson, label, launch, problem, graded=False, sizes=None):
        status = common.correct(launch, problem, None if grader.SIMULATOR else sizes)
        m = grader.measure(launch, problem, label, peer=None, budget_s=budget)
        frac = m.value / copy_bw
        goal = REFERENCE_GOAL.get(problem.name) if graded else None
        if status == "ok" and goal is not None:
            status = ("meets goal" if frac >= goal else "below goal") + \
                     (", student target met" if frac >= problem.target else ", BELOW student target")
        row = {"lesson": lesson, "kernel": label, "GBps": m.value, "pct_copy": 100 * frac,
               "median_ms": m.median_s * 1e3, "spread": m.spread, "target": problem.target if graded else None,
               "goal": goal, "status": status}
        rows.append(row)
        print(f"  {label:34s} {m.value:8,.0f} GB/s {100 * frac:5.1f}%  {status}")
        return m

    print("lesson 02: saxpy, n = 2^27")
    for label, fn in [("v1 one element per thread", l02["launch_saxpy_v1"]),
                      ("v2 grid-stride", l02["launch_saxpy_v2"])]:
        measure("02", label, fn, probs["saxpy"])
    measure("02", "v3 eight in flight (graded)", l02["launch_saxpy"], probs["saxpy"], graded=True)

    print("lesson 03: transpose 8192 x 8192 float32")
    measure("03", "v1 naive", l03["launch_naive"], probs["transpose"])
    mk = l03["make_transpose"]
    for label, cfg in [("v2 tiled 32x32 (32x8 thr)", (32, 8, 0)), ("v3 tiled 32x33 (32x8 thr)", (32, 8, 1))]:
        measure("03", label, mk(*cfg), probs["transpose"], sizes=[(1023, 517), (4096, 4096)])
    measure("03", "v4 64x65 staged, 32x16 thr (graded)", l03["launch_transpose"], probs["transpose"], graded=True)

    print("lesson 04: bias + GELU, bf16, (32768, 4096)")
    measure("04", "v1 math.tanh, 1/thread", l04["launch_v1"], probs["gelu"], sizes=[(333, 1000), (2048, 4096)])
    measure("04", "v2 exp + fastmath, 1/thread", l04["launch_v2"], probs["gelu"], sizes=[(333, 1000), (2048, 4096)])
    m_gelu = measure("04", "v3 words, 8 rows, fused (graded)", l04["launch_bias_gelu"], probs["gelu"], graded=True)
    measure("04", "v3 words, 8 rows, fused SiLU", l04["make_bias_act"](l04["silu"]), probs["silu"])
    try:
        import torch  # noqa: F401
    except ImportError:
        torch = None
        print("  torch not installed: no torch peer")
    if torch is not None and not grader.SIMULATOR:
        # torch's unfused gelu(x + bias) on the problem's own device inputs (a zero-copy torch view)
        size = probs["gelu"].bench_size
        _, dev_in, _ = common.device_args(probs["gelu"], size)
        nbytes = probs["gelu"].bytes_moved(size)
        call = TORCH_UNFUSED.prepare(peers.inputs_for(dev_in, size, {"bytes": nbytes}))
        mt = grader.bench(call, bytes=nbytes, label=TORCH_UNFUSED.label, peer=None, budget_s=budget)
        speedup = mt.median_s / m_gelu.median_s
        rows.append({"lesson": "04", "kernel": "torch unfused gelu(x + bias)", "GBps": mt.value,
                     "pct_copy": 100 * mt.value / copy_bw, "median_ms": mt.median_s * 1e3, "spread": mt.spread,
                     "target": None, "goal": None,
                     "status": f"fused kernel is {speedup:.2f}x torch" + (" (goal > 1: met)" if speedup > 1 else
                                                                        " (goal > 1: NOT met)")})
        print(f"  {'torch unfused gelu(x + bias)':34s} {mt.value:8,.0f} GB/s {100 * mt.value / copy_bw:5.1f}%  "
              f"{rows[-1]['status']}")
        del dev_in

    print("\n| lesson | kernel | GB/s | % of copy | target | status |\n|---|---|---|---|---|---|")
    for r in rows:
        tgt = (f"student {100 * r['target']:.0f}%, goal {100 * r['goal']:.0f}%" if r["target"] else "—")
        print(f"| {r['lesson']} | {r['kernel']} | {r['GBps']:,.0f} | {r['pct_copy']:.1f}% | {tgt} | {r['status']} |")

    sweeps = {}
    if not args.quick:
        print("\nsweep: saxpy block size (GB/s, % of copy)")
        n = probs["saxpy"].bench_size
        _, sax_in, sax_out = common.device_args(probs["saxpy"], n)
        sax_args = common.args_of(sax_in, sax_out)
        sweeps["saxpy_block"] = []
        for name in ["launch_saxpy_v1", "launch_saxpy_v2", "launch_saxpy"]:
            line = []
            for t in [32, 64, 128, 256, 512, 1024]:
                m = grader.bench(lambda: l02[name](*sax_args, threads=t), bytes=12 * n, peer=None, budget_s=0.5)
                line.append(f"{t}: {m.value:,.0f} ({100 * m.value / copy_bw:.0f}%)")
                sweeps["saxpy_block"].append({"kernel": name, "threads": t, "GBps": m.value})
            print(f"  {name:16s} " + "  ".join(line))
        del sax_in, sax_out, sax_args
        print("\nsweep: transpose tile (TILE, ROWS, PAD) -> GB/s, % of copy")
        sweeps["transpose_tile"] = []
        size = probs["transpose"].bench_size
        _, t_in, t_out = common.device_args(probs["transpose"], size)
        t_args = common.args_of(t_in, t_out)
        tb = probs["transpose"].bytes_moved(size)
        for cfg in [(32, 8, 1), (32, 4, 1), (32, 16, 1), (32, 32, 1), (64, 4, 1), (64, 8, 1), (64, 16, 1),
                    (64, 32, 1), (96, 8, 1)]:
            launch = mk(*cfg)
            status = common.correct(launch, probs["transpose"], sizes=[(67, 45) if grader.SIMULATOR else (1023, 517)])
            m = grader.bench(lambda: launch(*t_args), bytes=tb, peer=None, budget_s=1.0)
            sweeps["transpose_tile"].append({"cfg": cfg, "GBps": m.value, "status": status})
            print(f"  {str(cfg):14s} {m.value:8,.0f} GB/s {100 * m.value / copy_bw:5.1f}%  {status}")
    if args.json:
        args.json.write_text(json.dumps({"device": info.name, "copy_GBps": copy_bw, "rows": rows,
                                         "sweeps": sweeps}, indent=1, default=str))
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
