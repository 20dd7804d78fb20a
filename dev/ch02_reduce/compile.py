"""Compile chapter 02's kernels for sm_90 (PTX) without a GPU, and look at what they became.

    NUMBA_ENABLE_CUDASIM=0 python dev/ch02_reduce/compile.py

Exit 77 when NVVM (the CUDA toolkit's compiler library) is missing. grader would
choose the simulator on a machine with no GPU, so this script tells it there is
one, and answers Numba's questions about the device with an sm_90 with 132 SMs.
Checks: every kernel compiles; warp reductions became shfl.sync; bf16
conversions are integer shifts and moves (no float64, no calls); the
row-in-registers kernels keep their row out of local memory.
"""
import os
import re
import sys
import types as pytypes
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    sys.exit("run with the simulator off: NUMBA_ENABLE_CUDASIM=0")
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"

from numba import cuda, types  # noqa: E402

try:
    from numba.cuda.cudadrv import nvvm
    nvvm.NVVM()
except Exception as exc:  # no toolkit here
    print(f"no NVVM: {exc}")
    sys.exit(77)

import numba.cuda.api as _api  # noqa: E402
import numba.cuda.dispatcher as _disp  # noqa: E402

_fake = pytypes.SimpleNamespace(compute_capability=(9, 0), id=0, MULTIPROCESSOR_COUNT=132)
_api.get_current_device = lambda: _fake
_disp.get_current_device = lambda: _fake
cuda.get_current_device = lambda: _fake

mode = pytypes.ModuleType("grader.backend")         # "there is a GPU"
mode.SIMULATOR, mode.gpu_count = False, lambda: 1
mode.numba_cuda_mismatch = lambda: None
sys.modules["grader.backend"] = mode

from grader.notebooks import run_cells  # noqa: E402


def load(notebook, cells):
    return run_cells(ROOT / "solutions" / "02_reduce" / notebook, ["setup", *cells])

f32, i32, u16, u32, u64 = types.float32, types.int32, types.uint16, types.uint32, types.uint64
A1 = lambda t: types.Array(t, 1, "C")               # noqa: E731
A2 = lambda t: types.Array(t, 2, "C")               # noqa: E731

KERNELS = [
    ("01_atomics_and_trees.ipynb", ["v1_atomic", "v2_interleaved", "v3_sequential"],
     [("block_sum_atomic", (A1(f32), A1(f32))), ("block_sum_interleaved", (A1(f32), A1(f32))),
      ("block_sum_sequential", (A1(f32), A1(f32)))]),
    ("02_warps.ipynb", ["v1_warp", "v2_block", "v3_grid_stride", "v4_two_pass", "v5_dot"],
     [("sum_warp_atomic", (A1(f32), A1(f32))), ("sum_block_atomic", (A1(f32), A1(f32))),
      ("sum_grid_stride", (A1(f32), A1(f32))), ("partial_sums", (A1(f32), A1(f32))),
      ("finish", (A1(f32), A1(f32))), ("dot_kernel", (A1(f32), A1(f32), A1(f32)))]),
    ("03_softmax.ipynb", ["given", "v1_naive", "v2_safe", "online_state", "v3_online", "v4_registers",
                          "v5_warp_rows"],
     [("softmax_naive", (A2(u16), A2(u16))), ("softmax_safe", (A2(u16), A2(u16))),
      ("softmax_online", (A2(u16), A2(u16))), ("softmax_registers", (A2(u64), A2(u64))),
      ("softmax_warp_rows", (A2(u16), A2(u16)))]),
    ("04_norms.ipynb", ["welford", "v1_layernorm", "given", "v2_rmsnorm", "v3_registers"],
     [("layernorm_welford", (A2(f32), A2(f32))), ("rmsnorm_simple", (A2(u16), A1(u16), A2(u16))),
      ("rmsnorm_registers", (A2(u64), A1(u64), A2(u64)))]),
    ("05_scan_and_histogram.ipynb", ["v1_hillis_steele", "v2_blelloch", "h1_global", "h2_private"],
     [("scan_hillis_steele", (A1(i32), A1(i32))), ("scan_blocks", (A1(i32), A1(i32), A1(i32))),
      ("add_offsets", (A1(i32), A1(i32))), ("hist_global", (A1(i32), A1(i32))),
      ("hist_private", (A1(i32), A1(i32)))]),
]


def main() -> int:
    bad = 0
    for nb, cells, kernels in KERNELS:
        ns = load(nb, cells)
        for name, sig in kernels:
            k = ns[name]
            try:
                ptx, _ = cuda.compile_ptx(k.py_func, sig, cc=(9, 0))
            except Exception as exc:
                print(f"FAIL {nb} {name}: {type(exc).__name__}: {str(exc)[:600]}")
                bad += 1
                continue
            notes = []
            n_shfl = len(re.findall(r"shfl\.sync", ptx))
            f64 = len(re.findall(r"\.f64\b", ptx))
            local = len(re.findall(r"(ld|st)\.local", ptx))
            calls = len(re.findall(r"\bcall", ptx))
            ld = sorted(set(re.findall(r"ld\.global(?:\.nc)?(?:\.v\d)?\.\w+", ptx)))
            notes.append(f"shfl {n_shfl}, f64 ops {f64}, local ld/st {local}, calls {calls}, loads {ld}")
            if "registers" in name and local:
                notes.append("WARNING: the cached row spilled to local memory")
                bad += 1
            if f64 and "layernorm" not in name:
                notes.append("WARNING: float64 math")
            print(f"ok   {nb} {name}: " + "; ".join(notes))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
