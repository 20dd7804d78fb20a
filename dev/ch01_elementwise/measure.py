"""Chapter 01 on a GPU: every version of lessons 02-04 against the copy bandwidth, in one run.

    python tests/gpu/measure_ch01.py                 # from the repository root, on a CUDA GPU
    python tests/gpu/measure_ch01.py --json out.json # also write the rows
    python tests/gpu/measure_ch01.py --quick         # shorter timing budget, no sweeps

The kernels are the solution notebooks' own cells (tools.nbcells runs their definitions,
not their checks), so what is measured is what the lessons teach. Each kernel is checked
at the problem's GPU sizes first (status FAIL if wrong), then timed with grader.bench at
the problem's bench size (CUDA events, L2 flushed, median) against the copy bandwidth
measured in this process. Lesson 04 also times torch's unfused `gelu(x + bias)` (if torch
is installed). Then two sweeps: saxpy's block size, and the transpose's tile shape.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)

import numpy as np  # noqa: E402

import grader  # noqa: E402
from grader.check import storage_dtype  # noqa: E402
from grader.problems import elementwise as P  # noqa: E402
from tools.nbcells import definitions  # noqa: E402

SOL = "solutions/01_elementwise/"
REFERENCE_GOAL = {"saxpy": 0.90, "transpose": 0.85, "bias + GELU (bf16)": 0.90}


def load():
    l02 = definitions(SOL + "02_bandwidth_and_roofline.ipynb", ["l02_setup", "l02_v1", "l02_v2", "l02_saxpy"])
    l03 = definitions(SOL + "03_coalescing_and_transpose.ipynb",
                      ["l03_v1", "l03_make_transpose", "l03_choose"],
                      prelude="import numpy as np\nfrom numba import cuda, float32\n"
                              "def cdiv(a, b):\n    return (a + b - 1) // b\n")
    l04 = definitions(SOL + "04_vectors_half_precision_fusion.ipynb",
                      ["l04_setup", "l04_formats", "l04_activations", "l04_v1", "l04_v2", "l04_bias_act"])
    return l02, l03, l04


def device_inputs(problem, size, seed=0):
    from numba import cuda

    inputs = problem.make_inputs(np.random.default_rng(seed), size)
    args = [cuda.to_device(v) if isinstance(v, np.ndarray) else v for v in inputs.values()]
    outs = [cuda.device_array(shape, dtype=storage_dtype(dtype))
            for shape, dtype in problem.outputs(size, inputs).values()]
    return inputs, args, outs


def correct(launch, problem, sizes=None) -> str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            grader.check(launch, problem, sizes=sizes, quiet=True)
        return "ok"
    except grader.CheckFailed as exc:
        return "FAIL: " + str(exc).splitlines()[0][:80]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--quick", action="store_true", help="1 s per measurement, no sweeps")
    ap.add_argument("--sim", action="store_true", help="dry run in the simulator at tiny sizes (tests this script)")
    args = ap.parse_args()
    if grader.SIMULATOR and not args.sim:
        print("No GPU: this script measures speed and needs a CUDA GPU (--sim: a dry run of the script).")
        return 2
    budget = 1.0 if args.quick else 3.0
    info = grader.device.info()
    if grader.SIMULATOR:               # dry run: tiny bench sizes, checks at simulator sizes, no timings
        P.saxpy.bench_size, P.transpose.bench_size = 1000, (40, 72)
        P.bias_gelu.bench_size = P.bias_silu.bench_size = (8, 64)
        copy_bw = float("nan")
    else:
        _, copy_bw = grader.device.peer("copy")
    print(f"{info.name} ({info.arch}, {info.sm_count} SMs): copy bandwidth {copy_bw:,.0f} GB/s\n")
    l02, l03, l04 = load()
    rows = []

    def measure(lesson, label, launch, problem, graded=False, sizes=None):
        status = correct(launch, problem, None if grader.SIMULATOR else sizes)
        inputs, dargs, outs = device_inputs(problem, problem.bench_size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = grader.bench(lambda: launch(*dargs, *outs), label=label, budget_s=budget,
                             bytes=problem.bytes_moved(problem.bench_size))
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
        return m, dargs, outs

    print("lesson 02: saxpy, n = 2^27")
    for label, fn in [("v1 one element per thread", l02["launch_saxpy_v1"]),
                      ("v2 grid-stride", l02["launch_saxpy_v2"])]:
        measure("02", label, fn, P.saxpy)
    m_saxpy, sax_args, sax_outs = measure("02", "v3 eight in flight (graded)", l02["launch_saxpy"], P.saxpy,
                                          graded=True)

    print("lesson 03: transpose 8192 x 8192 float32")
    measure("03", "v1 naive", l03["launch_naive"], P.transpose)
    mk = l03["make_transpose"]
    for label, cfg in [("v2 tiled 32x32 (32x8 thr)", (32, 8, 0)), ("v3 tiled 32x33 (32x8 thr)", (32, 8, 1))]:
        measure("03", label, mk(*cfg), P.transpose, sizes=[(1023, 517), (4096, 4096)])
    measure("03", "v4 64x65 staged, 32x16 thr (graded)", l03["launch_transpose"], P.transpose, graded=True)

    print("lesson 04: bias + GELU, bf16, (32768, 4096)")
    measure("04", "v1 math.tanh, 1/thread", l04["launch_v1"], P.bias_gelu, sizes=[(333, 1000), (2048, 4096)])
    measure("04", "v2 exp + fastmath, 1/thread", l04["launch_v2"], P.bias_gelu, sizes=[(333, 1000), (2048, 4096)])
    m_gelu, g_args, g_outs = measure("04", "v3 words, 8 rows, fused (graded)", l04["launch_bias_gelu"], P.bias_gelu,
                                     graded=True)
    measure("04", "v3 words, 8 rows, fused SiLU", l04["make_bias_act"](l04["silu"]), P.bias_silu)
    try:
        import torch
    except ImportError:
        torch = None
        print("  torch not installed: no torch peer")
    if torch is not None:
        x = torch.as_tensor(g_args[0].copy_to_host().view(np.int16), device="cuda").view(torch.bfloat16)
        b = torch.as_tensor(g_args[1].copy_to_host().view(np.int16), device="cuda").view(torch.bfloat16)
        nbytes = P.bias_gelu.bytes_moved(P.bias_gelu.bench_size)
        mt = grader.bench(lambda: torch.nn.functional.gelu(x + b, approximate="tanh"), bytes=nbytes,
                          label="torch unfused", peer=None, budget_s=budget)
        speedup = mt.median_s / m_gelu.median_s
        rows.append({"lesson": "04", "kernel": "torch unfused gelu(x + bias)", "GBps": mt.value,
                     "pct_copy": 100 * mt.value / copy_bw, "median_ms": mt.median_s * 1e3, "spread": mt.spread,
                     "target": None, "goal": None,
                     "status": f"fused kernel is {speedup:.2f}x torch" + (" (goal > 1: met)" if speedup > 1 else
                                                                        " (goal > 1: NOT met)")})
        print(f"  {'torch unfused gelu(x + bias)':34s} {mt.value:8,.0f} GB/s {100 * mt.value / copy_bw:5.1f}%  "
              f"{rows[-1]['status']}")

    print("\n| lesson | kernel | GB/s | % of copy | target | status |\n|---|---|---|---|---|---|")
    for r in rows:
        tgt = (f"student {100 * r['target']:.0f}%, goal {100 * r['goal']:.0f}%" if r["target"] else "—")
        print(f"| {r['lesson']} | {r['kernel']} | {r['GBps']:,.0f} | {r['pct_copy']:.1f}% | {tgt} | {r['status']} |")

    sweeps = {}
    if not args.quick:
        print("\nsweep: saxpy block size (GB/s, % of copy)")
        n = P.saxpy.bench_size
        sweeps["saxpy_block"] = []
        for name in ["launch_saxpy_v1", "launch_saxpy_v2", "launch_saxpy"]:
            line = []
            for t in [32, 64, 128, 256, 512, 1024]:
                m = grader.bench(lambda: l02[name](*sax_args, *sax_outs, threads=t), bytes=12 * n, peer=None,
                                 budget_s=0.5)
                line.append(f"{t}: {m.value:,.0f} ({100 * m.value / copy_bw:.0f}%)")
                sweeps["saxpy_block"].append({"kernel": name, "threads": t, "GBps": m.value})
            print(f"  {name:16s} " + "  ".join(line))
        print("\nsweep: transpose tile (TILE, ROWS, PAD) -> GB/s, % of copy")
        sweeps["transpose_tile"] = []
        _, t_args, t_outs = device_inputs(P.transpose, P.transpose.bench_size)
        tb = P.transpose.bytes_moved(P.transpose.bench_size)
        for cfg in [(32, 8, 1), (32, 4, 1), (32, 16, 1), (32, 32, 1), (64, 4, 1), (64, 8, 1), (64, 16, 1),
                    (64, 32, 1), (96, 8, 1)]:
            launch = mk(*cfg)
            status = correct(launch, P.transpose, sizes=[(67, 45) if grader.SIMULATOR else (1023, 517)])
            m = grader.bench(lambda: launch(*t_args, *t_outs), bytes=tb, peer=None, budget_s=1.0)
            sweeps["transpose_tile"].append({"cfg": cfg, "GBps": m.value, "status": status})
            print(f"  {str(cfg):14s} {m.value:8,.0f} GB/s {100 * m.value / copy_bw:5.1f}%  {status}")
    if args.json:
        args.json.write_text(json.dumps({"device": info.name, "copy_GBps": copy_bw, "rows": rows,
                                         "sweeps": sweeps}, indent=1, default=str))
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
