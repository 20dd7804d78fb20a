"""Chapter 03 (gemm) on a GPU: correctness of every graded reference at GPU shapes, the library
guard against torch.matmul / numpy, and each version's TFLOP/s against cuBLAS (torch.matmul)
timed in the same run at the same shape (4096³ and 8192³).

    python tests/gpu/measure_ch03.py [--sizes 4096,8192] [--json OUT.json]

The kernels are the solution notebooks' own cells (tests/ch03_cells.py); the %%cuda cell of
lessons 04 and 05 are compiled with grader.cuda_cells.compile_cuda. Exit status 1 if a goal is missed.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grader  # noqa: E402  (before numba)
import numpy as np  # noqa: E402
from grader.problems import gemm as P  # noqa: E402

from ch03_cells import cell_source, load  # noqa: E402

GOALS = {"sgemm": 0.60, "hgemm": 0.65, "cute": 0.65}


def lesson04() -> dict:
    src = cell_source("04_mma_sync_pipeline.ipynb", "v_hgemm")
    body = src.split("\n", 1)[1]                      # drop the "%%cuda hg" line
    ns = load("04_mma_sync_pipeline.ipynb", [], setup=True)
    ns["hg"] = grader.cuda_cells.compile_cuda(body, name="hg")
    exec(compile(cell_source("04_mma_sync_pipeline.ipynb", "launch").replace("print(", "(lambda *a: None)("),
                 "launch", "exec"), ns)
    return ns


def lesson05() -> dict:
    """The CuTe lesson: its GEMM and launchers, and its probe cell compared with the Python maps."""
    nb = "05_cute.ipynb"
    ns = load(nb, ["layout_functions"], setup=True)
    quiet = lambda cid: cell_source(nb, cid).replace("plt.show()", "plt.close('all')")
    for cid in ("layout_demo", "layout_pictures", "mma_owner"):
        exec(compile(quiet(cid), cid, "exec"), ns)
    ns["probe"] = grader.cuda_cells.compile_cuda(cell_source(nb, "probe").split("\n", 1)[1], name="probe")
    exec(compile(cell_source(nb, "probe_compare"), "probe_compare", "exec"), ns)   # asserts on a GPU
    ns["cg"] = grader.cuda_cells.compile_cuda(cell_source(nb, "v_cute").split("\n", 1)[1], name="cg")
    exec(compile(cell_source(nb, "launch").replace("print(", "(lambda *a: None)("), "launch", "exec"), ns)
    return ns


def lesson03() -> dict:
    body = cell_source("03_wmma.ipynb", "v_wmma").split("\n", 1)[1]
    ns = load("03_wmma.ipynb", [], setup=True)
    ns["wm"] = grader.cuda_cells.compile_cuda(body, name="wm")
    exec(compile(cell_source("03_wmma.ipynb", "launch"), "launch", "exec"), ns)
    return ns


def torch_peer(dtype: str, s: P.Shape):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    dt = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    a = torch.randn(s.M, s.K, device="cuda", dtype=dt)
    b = torch.randn(s.K, s.N, device="cuda", dtype=dt)
    c = torch.empty(s.M, s.N, device="cuda", dtype=dt)
    return lambda: torch.matmul(a, b, out=c)


def time_rows(rows, sizes, report):
    from grader.speed import measure

    for s in sizes:
        peers = {}
        for dtype in ("fp32", "bf16"):
            m = grader.bench(torch_peer(dtype, s), label=f"cuBLAS {dtype}", flops=P.flops(s), peer=None)
            peers[dtype] = m.value
            print(f"{s}: cuBLAS {dtype} {m.value:.1f} TFLOP/s", flush=True)
            report["peers"][f"{dtype}@{s}"] = m.value
        for label, launch, prob, dtype, goal in rows:
            if s.M > 4096 and "naive" in label:
                continue
            try:
                m = measure(launch, prob, label, size=s, peer=None, budget_s=2.0)
                frac = m.value / peers[dtype]
                ok = "" if goal is None else ("PASS" if frac >= goal else "MISS")
                print(f"{s} | {label:45s} | {m.value:7.1f} TFLOP/s | cuBLAS {dtype} {peers[dtype]:7.1f} "
                      f"| {100 * frac:5.1f}% | goal {'-' if goal is None else f'{100 * goal:.0f}%'} {ok}", flush=True)
                report["rows"].append({"size": str(s), "label": label, "tflops": m.value, "peer": f"cuBLAS {dtype}",
                                       "peer_tflops": peers[dtype], "fraction": frac, "goal": goal,
                                       "spread": m.spread, "runs": len(m.times_s)})
            except Exception:
                traceback.print_exc()
                report["errors"].append(label)


def main():
    sizes = [4096, 8192]
    if "--sizes" in sys.argv:
        sizes = [int(x) for x in sys.argv[sys.argv.index("--sizes") + 1].split(",")]
    report = {"device": grader.device.info().name, "date": time.strftime("%Y-%m-%d"), "peers": {}, "rows": [],
              "checks": {}, "errors": []}
    print(grader.mode(), flush=True)
    l01 = load("01_naive_and_tiling.ipynb", ["v1_naive", "v2_tiled"])
    l02 = load("02_register_tiling.ipynb", ["v1_1d", "v2_2d", "v3_quads"])
    l03 = lesson03()
    l04 = lesson04()
    print("hgemm resources:", l04["hg"].hgemm_bf16.resources, flush=True)
    l05 = lesson05()
    print("cute resources:", l05["cg"].cute_gemm_bf16.resources, flush=True)

    # correctness at GPU shapes, visible and hidden
    for name, launch, prob in [("03 wmma f16", l03["launch_f16"], P.wmma_fp16),
                               ("03 wmma bf16", l03["launch_bf16"], P.wmma_bf16), ("01 tiled", l01["launch_tiled"], P.sgemm), ("02 v3", l02["launch_v3"], P.sgemm),
                               ("04 hgemm", l04["launch_hgemm"], P.hgemm_bf16),
                               ("04 v1", l04["launch_v1"], P.hgemm_bf16), ("04 v2", l04["launch_v2"], P.hgemm_bf16),
                               ("05 cute", l05["launch_cute"], P.cute_bf16), ("05 v1", l05["launch_v1"], P.cute_bf16)]:
        for hidden in (False, True):
            t = time.time()
            try:
                grader.check(launch, prob, hidden=hidden, quiet=True)
                report["checks"][f"{name} {'hidden' if hidden else 'visible'}"] = "ok"
            except Exception as e:
                report["checks"][f"{name} {'hidden' if hidden else 'visible'}"] = str(e)[:800]
            print(f"check {name} hidden={hidden}: {report['checks'][f'{name} ' + ('hidden' if hidden else 'visible')]} "
                  f"({time.time() - t:.1f} s)", flush=True)

    # the library guard on a real GPU
    from wrong import ch03_gemm as W
    for name, fn in [("torch.matmul", W.torch_matmul), ("numpy on host", W.numpy_on_host),
                     ("numpy + copy kernel", W.numpy_on_host_then_copy_kernel)]:
        try:
            grader.check(fn, P.sgemm, sizes=[P.Shape(64, 48, 32)], quiet=True)
            report["checks"][f"guard {name}"] = "NOT REFUSED"
        except Exception as e:
            report["checks"][f"guard {name}"] = "refused" if "refused" in str(e) else str(e)[:300]
        print(f"guard {name}: {report['checks'][f'guard {name}']}", flush=True)

    rows = [("01 v1 naive", l01["launch_naive"], P.sgemm, "fp32", None),
            ("01 v2 smem tiles 16x16", l01["launch_tiled"], P.sgemm, "fp32", None),
            ("02 v1 1-D thread tile", l02["launch_1d"], P.sgemm, "fp32", None),
            ("02 v2 2-D thread tile, strided", l02["launch_2d"], P.sgemm, "fp32", None),
            ("02 v3 quads, uint32, unrolled (graded)", l02["launch_v3"], P.sgemm, "fp32", GOALS["sgemm"]),
            ("03 WMMA bf16 32x32", l03["launch_bf16"], P.wmma_bf16, "bf16", None),
            ("04 v1 mma.sync 2 stages", l04["launch_v1"], P.hgemm_bf16, "bf16", None),
            ("04 v2 + swizzle", l04["launch_v2"], P.hgemm_bf16, "bf16", None),
            ("04 v3 128x256, 8 warps, 4 stages, epilogue (graded)", l04["launch_hgemm"], P.hgemm_bf16, "bf16", GOALS["hgemm"]),
            ("05 v1 CuTe 128x128, 2 stages, plain smem", l05["launch_v1"], P.cute_bf16, "bf16", None),
            ("05 v2 CuTe 128x256, 8 warps, 4 stages, epilogue (graded)", l05["launch_cute"], P.cute_bf16, "bf16", GOALS["cute"])]
    time_rows(rows, [P.Shape(n, n, n) for n in sizes], report)
    out = os.environ.get("OUT")
    if out:
        Path(out, "measure_ch03.json").write_text(json.dumps(report, indent=1, default=float))
        grader.plot.chapter_ladder(report).savefig(Path(out, "ladder.png"), dpi=110)
    print(json.dumps(report["checks"], indent=1))
    missed = [r for r in report["rows"] if r["goal"] and r["fraction"] < r["goal"]]
    sys.exit(1 if missed or report["errors"] else 0)


if __name__ == "__main__":
    main()
