"""Chapter 03 (gemm) on a GPU: correctness of every graded reference at GPU shapes, the library
guard against torch.matmul / numpy, and each version's TFLOP/s against cuBLAS (torch.matmul)
timed in the same run at the same shape (4096³ and 8192³).

    python dev/ch03_gemm/measure.py [--sizes 4096,8192]   # table; $OUT/measure_ch03.json and $OUT/ladder.png
    python dev/ch03_gemm/measure.py --compile-only        # anywhere: load the lessons, compile their cells

The kernels are the solution notebooks' own cells, run by grader.notebooks.run_cells: the %%cuda cells
of lessons 03-05 compiled by the magic's own code with their name expressions, and the launch cells as
the lessons write them (lessons 04 and 05: grader.problems.gemm.tiled_launch of hgemm<V1..V3> and
cute_gemm<V1, V2>, whose launch shapes come from the cubin). Correctness is grader.check at each
problem's visible and hidden sizes; each row is grader.measure at the size beside the problem's own
peer (grader.peers.matmul: cuBLAS fp32 with TF32 off for the CUDA-core kernels, cuBLAS bf16 for the
tensor-core ones) on the same A and B, in the same run. The wrong kernels of tests/wrong/ch03_gemm.py
must be refused by the library guard on a real GPU too. Exit status 1 if a goal is missed or a row fails.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

import gemm_harness as H   # first: puts the repository on sys.path and imports grader

import grader
from grader.notebooks import run_cells
from grader.problems import gemm as P

GOALS = {"sgemm": 0.60, "hgemm": 0.65, "cute": 0.65}


def load(notebook: str, cell_ids: list) -> dict:
    """Cells of a chapter-03 solution notebook (its setup cell first), run as the notebook runs them."""
    return run_cells(H.SOL / notebook, ["setup", *cell_ids])


def lesson04() -> dict:
    return load("04_mma_sync_pipeline.ipynb", ["v_hgemm", "launch"])


def lesson05() -> dict:
    """The CuTe lesson: its GEMM and launch functions, and its probe cell compared with the Python maps
    (probe_compare asserts on a GPU)."""
    import matplotlib

    matplotlib.use("Agg")                  # the picture cells draw; nothing is shown here
    import matplotlib.pyplot as plt
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")    # "FigureCanvasAgg is non-interactive"
        ns = load("05_cute.ipynb", ["layout_functions", "layout_demo", "layout_pictures", "mma_owner", "probe",
                                    "probe_compare", "v_cute", "launch"])
    plt.close("all")
    return ns


def lesson03() -> dict:
    return load("03_wmma.ipynb", ["v_wmma", "launch"])


def time_rows(rows, sizes, report):
    for s in sizes:
        for label, launch, prob, goal in rows:
            if s.M > 4096 and "naive" in label:
                continue
            try:
                # the graded figure's measurement, ungraded: inputs of the problem at s, the L2 flushed
                # before each run, its peer (cuBLAS on the same A and B) measured once per size
                m = grader.measure(launch, prob, label, size=s, budget_s=2.0)
                frac = m.fraction
                report["peers"][f"{m.peer_name}@{s}"] = m.peer_value
                ok = "" if goal is None else ("PASS" if frac >= goal else "MISS")
                print(f"{s} | {label:45s} | {m.value:7.1f} TFLOP/s | {m.peer_name} {m.peer_value:7.1f} "
                      f"| {100 * frac:5.1f}% | goal {'-' if goal is None else f'{100 * goal:.0f}%'} {ok}", flush=True)
                report["rows"].append({"size": str(s), "label": label, "tflops": m.value, "peer": m.peer_name,
                                       "peer_tflops": m.peer_value, "fraction": frac, "goal": goal,
                                       "spread": m.spread, "runs": len(m.times_s)})
            except Exception:
                traceback.print_exc()
                report["errors"].append(label)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4096,8192", help="square sizes to time, comma-separated")
    ap.add_argument("--compile-only", action="store_true",
                    help="load the lessons (compile their %%%%cuda cells) and stop: needs no GPU")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    report = {"device": grader.device.info().name, "date": time.strftime("%Y-%m-%d"), "peers": {}, "rows": [],
              "checks": {}, "errors": []}
    print(grader.mode(), flush=True)
    l01 = load("01_naive_and_tiling.ipynb", ["v1_naive", "v2_tiled"])
    l02 = load("02_register_tiling.ipynb", ["v1_1d", "v2_2d", "v3_quads"])
    l03 = lesson03()
    l04 = lesson04()
    l05 = lesson05()
    for k in ("hgemm<V1>", "hgemm<V2>", "hgemm<V3>"):
        print(f"04 {k}: {l04['hg'][k].resources}, launches with {l04['hg'][k].launch_shape}", flush=True)
    for k in ("cute_gemm<V1>", "cute_gemm<V2>"):
        print(f"05 {k}: {l05['cg'][k].resources}, launches with {l05['cg'][k].launch_shape}", flush=True)
    if args.compile_only or not grader.cuda.gpu_available():
        print("compiled and loaded" + ("" if args.compile_only else "; no GPU: nothing to check or time"))
        return 0

    # correctness at GPU shapes, visible and hidden
    for name, launch, prob in [("03 wmma f16", l03["launch_f16"], P.wmma_fp16),
                               ("03 wmma bf16", l03["launch_bf16"], P.wmma_bf16),
                               ("01 tiled", l01["launch_tiled"], P.sgemm), ("02 v3", l02["launch_v3"], P.sgemm),
                               ("04 hgemm", l04["launch_hgemm"], P.hgemm_bf16),
                               ("04 v1", l04["launch_v1"], P.hgemm_bf16), ("04 v2", l04["launch_v2"], P.hgemm_bf16),
                               ("05 cute", l05["launch_cute"], P.cute_bf16), ("05 v1", l05["launch_v1"], P.cute_bf16)]:
        for hidden in (False, True):
            key = f"{name} {'hidden' if hidden else 'visible'}"
            t = time.time()
            try:
                grader.check(launch, prob, hidden=hidden, quiet=True)
                report["checks"][key] = "ok"
            except Exception as e:
                report["checks"][key] = str(e)[:800]
            print(f"check {name} hidden={hidden}: {report['checks'][key]} ({time.time() - t:.1f} s)", flush=True)

    # the library guard on a real GPU: the wrong kernels the CPU tests catch (tests/wrong/ch03_gemm.py)
    from tests.wrong import ch03_gemm as W

    for name, fn in [("torch.matmul", W.torch_matmul), ("numpy on host", W.numpy_on_host),
                     ("numpy + copy kernel", W.numpy_on_host_then_copy_kernel)]:
        try:
            grader.check(fn, P.sgemm, sizes=[P.Shape(64, 48, 32)], quiet=True)
            report["checks"][f"guard {name}"] = "NOT REFUSED"
        except Exception as e:
            report["checks"][f"guard {name}"] = "refused" if "refused" in str(e) else str(e)[:300]
        print(f"guard {name}: {report['checks'][f'guard {name}']}", flush=True)

    rows = [("01 v1 naive", l01["launch_naive"], P.sgemm, None),
            ("01 v2 smem tiles 16x16", l01["launch_tiled"], P.sgemm, None),
            ("02 v1 1-D thread tile", l02["launch_1d"], P.sgemm, None),
            ("02 v2 2-D thread tile, strided", l02["launch_2d"], P.sgemm, None),
            ("02 v3 quads, uint32, unrolled (graded)", l02["launch_v3"], P.sgemm, GOALS["sgemm"]),
            ("03 WMMA bf16 32x32", l03["launch_bf16"], P.wmma_bf16, None),
            ("04 v1 mma.sync 2 stages", l04["launch_v1"], P.hgemm_bf16, None),
            ("04 v2 + swizzle", l04["launch_v2"], P.hgemm_bf16, None),
            ("04 v3 128x256, 8 warps, 4 stages, epilogue (graded)", l04["launch_hgemm"], P.hgemm_bf16, GOALS["hgemm"]),
            ("05 v1 CuTe 128x128, 2 stages, plain smem", l05["launch_v1"], P.cute_bf16, None),
            ("05 v2 CuTe 128x256, 8 warps, 4 stages, epilogue (graded)", l05["launch_cute"], P.cute_bf16, GOALS["cute"])]
    time_rows(rows, [P.Shape(n, n, n) for n in sizes], report)
    out = os.environ.get("OUT")
    if out:
        Path(out, "measure_ch03.json").write_text(json.dumps(report, indent=1, default=float))
        grader.plot.chapter_ladder(report).savefig(Path(out, "ladder.png"), dpi=110)
    print(json.dumps(report["checks"], indent=1))
    missed = [r for r in report["rows"] if r["goal"] and r["fraction"] < r["goal"]]
    return 1 if missed or report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
