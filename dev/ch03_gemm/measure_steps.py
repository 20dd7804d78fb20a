"""Lessons 03.04 and 03.05 step by step on a GPU: 03.04's checkpoint (one-stage kernel, cell v_1stage),
the simplest pipelined loop 03.04 says earns full points (v3's template with main_loop written as its
Hint 3: no fragment double buffering), the reference v3; 03.05's simplest loop (its Hint 3, CuTe) and
its reference v2. Each is checked (grader.check, visible and hidden sizes) and timed (grader.measure:
the graded timing, ungraded) against cuBLAS bf16 in the same run.

    python dev/ch03_gemm/measure_steps.py [--sizes 4096,8192]   # table last; $OUT/measure_steps.json
    python dev/ch03_gemm/measure_steps.py --dry-run             # anywhere: build all three, print their resources

Why: the lesson states that the simplest main_loop earns full speed points (≥ 38.8% of cuBLAS) from a
tuning-run figure of a close variant on an H200 (42%), 03.05 says its simplest loop's speed was not
measured, and neither prints the checkpoint's speed. This measures them as the lessons write them.
Exit status 1 if a check fails.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:          # run as a script: import the repository's grader
    sys.path.insert(0, str(ROOT))

import grader  # noqa: E402  (before numba: it picks GPU or simulator)
from grader.cuda.magic import parse_magic_line  # noqa: E402
from grader.notebooks import cell_source, run_cells  # noqa: E402
from grader.problems import gemm as P  # noqa: E402

SOL = ROOT / "solutions" / "03_gemm"
NB = SOL / "04_mma_sync_pipeline.ipynb"

# The lesson's Hint 3 of step 2, written out: one set of fragment registers, the wait and the barrier at
# the top of each k tile, the refill right after them, one commit per tile.
SIMPLE_LOOP = r"""
  unsigned af[MT][4], bf[NT][2];
  for (int kt = 0; kt < KT; ++kt) {
    course::cp_async_wait<STAGES - 2>();
    __syncthreads();
    if (kt + STAGES - 1 < KT) load_stage(wr, kt + STAGES - 1);
    course::cp_async_commit();
    wr = (wr + V::STAGE_BYTES == send) ? sbase : wr + V::STAGE_BYTES;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      load_frags(af, bf, rd, ks);
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) course::mma_bf16(acc[i][j], af[i], bf[j]);
    }
    rd = (rd + V::STAGE_BYTES == send) ? sbase : rd + V::STAGE_BYTES;
  }
"""


# 03.05's Hint 3 written out in CuTe: the same loop, CuTe's copies and its one-line gemm.
CUTE_SIMPLE_LOOP = r"""
  int read = 0, write = STAGES - 1;
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    if (kt + STAGES - 1 < KT) {
      copy(g2s_a, tAgA(_, _, _, kt + STAGES - 1), tAsA(_, _, _, write));
      copy(g2s_b, tBgB(_, _, _, kt + STAGES - 1), tBsB(_, _, _, write));
    }
    cp_async_fence();
    write = write + 1 == STAGES ? 0 : write + 1;
    CUTE_UNROLL
    for (int kb = 0; kb < KB; ++kb) {
      copy(s2r_a, tXsA(_, _, kb, read), tXrA(_, _, kb));
      copy(s2r_b, tXsB(_, _, kb, read), tXrB(_, _, kb));
      gemm(mma, tCrA(_, _, kb), tCrB(_, _, kb), acc);
    }
    read = read + 1 == STAGES ? 0 : read + 1;
  }
"""


def with_loop(notebook: str, cell: str, loop: str) -> str:
    """The cell's source with its solution region replaced by ``loop``."""
    src = cell_source(SOL / notebook, cell)
    new, n = re.subn(r"  // BEGIN SOLUTION\n.*?  // END SOLUTION\n", loop.lstrip("\n"), src, flags=re.S)
    assert n == 1, f"{cell}: the solution region moved"
    return new


def simple_source() -> str:
    return with_loop("04_mma_sync_pipeline.ipynb", "v_hgemm", SIMPLE_LOOP)


def cute_simple_source() -> str:
    return with_loop("05_cute.ipynb", "v_cute", CUTE_SIMPLE_LOOP)


def build():
    """The lesson's cells as the notebook runs them, and the simple-loop variant of v_hgemm (v3 only)."""
    ns = run_cells(NB, ["setup", "v_1stage", "launch_1stage", "v_hgemm", "launch"])
    cute = run_cells(SOL / "05_cute.ipynb", ["setup", "v_cute", "launch"])
    from grader.cuda import compile_cuda

    def build_variant(source, name, kernel):
        first, _, body = source.partition("\n")
        assert kernel in parse_magic_line(first[len("%%cuda"):])["kernels"]
        return compile_cuda(body, name=name, kernels=[kernel])[kernel]

    simple = {"hgemm<V3>": build_variant(simple_source(), "hg_simple", "hgemm<V3>")}
    cute_simple = build_variant(cute_simple_source(), "cg_simple", "cute_gemm<V2>")
    kernels = {"checkpoint: one stage (v_1stage)": ns["hs"]["hgemm_1stage<One>"],
               "v3, simplest main_loop (Hint 3)": simple["hgemm<V3>"],
               "v3, the reference": ns["hg"]["hgemm<V3>"],
               "03.05 v2, simplest loop (Hint 3)": cute_simple,
               "03.05 v2, the reference": cute["cg"]["cute_gemm<V2>"]}
    launches = {"checkpoint: one stage (v_1stage)": ns["launch_1stage"],
                "v3, simplest main_loop (Hint 3)": P.tiled_launch(simple["hgemm<V3>"]),
                "v3, the reference": ns["launch_hgemm"],
                "03.05 v2, simplest loop (Hint 3)": P.tiled_launch(cute_simple),
                "03.05 v2, the reference": cute["launch_cute"]}
    return kernels, launches


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--dry-run", action="store_true", help="build and print resources only (no GPU needed)")
    a = ap.parse_args()
    kernels, launches = build()
    for label, k in kernels.items():
        print(f"{label:36s} {k.launch_shape} | {k.resources}")
    if a.dry_run:
        return 0
    if grader.SIMULATOR:
        print("no GPU: nothing to time (use --dry-run to build only)")
        return 2
    report, failed = {"device": grader.device.info().name, "rows": [], "checks": {}}, False
    for label, launch in launches.items():
        try:
            grader.check(launch, P.hgemm_bf16, quiet=True)
            grader.check(launch, P.hgemm_bf16, hidden=True, quiet=True)
            report["checks"][label] = "passed"
        except Exception as e:                       # a CheckFailed, or a CUDA error: recorded, not timed
            report["checks"][label] = str(e).splitlines()[0]
            failed = True
        print(f"check {label}: {report['checks'][label]}", flush=True)
    table = []
    for n in (int(x) for x in a.sizes.split(",")):
        size = P.Shape(n, n, n)
        for label, launch in launches.items():
            if report["checks"][label] != "passed":
                continue
            m = grader.measure(launch, P.hgemm_bf16, label, size=size, budget_s=2.0)
            row = {"size": n, "label": label, "tflops": m.value, "peer": m.peer_value, "fraction": m.fraction}
            report["rows"].append(row)
            table.append(row)
    out = Path(os.environ.get("OUT", "."))
    (out / "measure_steps.json").write_text(json.dumps(report, indent=1))
    print(f"\n{report['device']}: % of cuBLAS bf16 (torch.matmul) timed in the same run; full points from 38.8%")
    for r in table:
        print(f"{r['size']:>5}³  {r['label']:36s} {r['tflops']:7.1f} TFLOP/s  cuBLAS {r['peer']:7.1f}  "
              f"{100 * r['fraction']:5.1f}%")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
