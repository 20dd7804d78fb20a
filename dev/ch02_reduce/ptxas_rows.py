"""Registers and spills of tune_rows.py's candidates for sm_90, without a GPU.

    NUMBA_ENABLE_CUDASIM=0 python dev/ch02_reduce/ptxas_rows.py

Compiles each candidate to PTX with Numba (cc 9.0, with the candidate's fastmath and launch bounds)
and runs `ptxas -arch=sm_90 -v` on it (the ptxas grader.cuda.toolchain finds; its report read by
grader.cuda.diagnostics.parse_ptxas_report, the course's one ptxas parser). Blocks/SM is the register
limit only (65,536 registers, 256-register warp granules, 2,048 threads).
"""
import os
import re
import subprocess
import sys
import tempfile
import types as pytypes
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))              # run as a script: the repository's grader
if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    sys.exit("run with the simulator off: NUMBA_ENABLE_CUDASIM=0")
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"

from numba import cuda, types  # noqa: E402

import numba.cuda.api as _api  # noqa: E402
import numba.cuda.dispatcher as _disp  # noqa: E402

_fake = pytypes.SimpleNamespace(compute_capability=(9, 0), id=0, MULTIPROCESSOR_COUNT=132)
_api.get_current_device = lambda: _fake
_disp.get_current_device = lambda: _fake
cuda.get_current_device = lambda: _fake

mode = pytypes.ModuleType("grader.backend")         # "there is a GPU" (as compile.py in this folder)
mode.SIMULATOR, mode.gpu_count = False, lambda: 1
mode.numba_cuda_mismatch = lambda: None
sys.modules["grader.backend"] = mode

from grader.cuda.diagnostics import parse_ptxas_report  # noqa: E402
from grader.cuda.toolchain import require_tool  # noqa: E402

import tune_rows as T  # noqa: E402

A2 = types.Array(types.uint64, 2, "C")


def ptxas(disp, nargs):
    opts = disp.targetoptions
    ptx, _ = cuda.compile_ptx(disp.py_func, (A2,) * nargs, cc=(9, 0), fastmath=opts.get("fastmath", False),
                              launch_bounds=opts.get("launch_bounds"))
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "k.ptx"
        f.write_text(ptx)
        out = subprocess.run([require_tool("ptxas"), "-arch=sm_90", "-v", str(f), "-o", str(Path(d) / "k.cubin")],
                             capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("ptxas: " + (out.stderr.strip().splitlines() or ["?"])[-1])
    r = next(iter(parse_ptxas_report(out.stderr + out.stdout).values()))
    return r["registers"], r["spill_stores"], r["spill_loads"], r["stack"], ptx


def blocks_per_sm(regs, threads):
    per_warp = ((regs * 32 + 255) // 256) * 256
    return min(2048 // threads, 65536 // (per_warp * (threads // 32)), 32)


def main():
    print(f"{'problem':8s} {'candidate':48s} regs spill(st/ld) stack  blk/SM  barriers  ld.cs")
    for prob, cands in (("softmax", T.softmax_candidates()), ("rms", T.rms_candidates())):
        for label, make in cands:
            launch = make()
            base = getattr(launch, "launch", launch)
            try:
                regs, sst, sld, stack, ptx = ptxas(base.kernel, 2 if prob == "softmax" else 3)
            except Exception as exc:
                print(f"{prob:8s} {label:48s} ERROR {type(exc).__name__}: {str(exc)[:200]}")
                continue
            bars = len(re.findall(r"\bbar\.sync|\bbarrier\.sync", ptx))
            cs = len(re.findall(r"ld\.global\.cs", ptx))
            print(f"{prob:8s} {label:48s} {regs:4d} {sst:5d}/{sld:<5d} {stack:5d}  {blocks_per_sm(regs, base.threads):5d}"
                  f"  {bars:8d}  {cs:5d}", flush=True)


if __name__ == "__main__":
    main()
