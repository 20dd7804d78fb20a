"""Compile chapter 01's kernels for sm_90 (PTX) without a GPU, and check what they became.

Run with the simulator OFF: ``NUMBA_ENABLE_CUDASIM=0 python dev/ch01_elementwise/compile.py``.
Exit 77 when NVVM (the CUDA toolkit's compiler library) is missing. Numba asks the current
device for its compute capability while typing calls to overloads; with no GPU we answer sm_90.
"""
import os
import re
import sys
import types as pytypes
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)
if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    sys.exit("run with the simulator off")

from numba import cuda, types  # noqa: E402

try:
    from numba.cuda.cudadrv import nvvm
    nvvm.NVVM()
except Exception as exc:  # no toolkit here
    print(f"no NVVM: {exc}")
    sys.exit(77)

import numba.cuda.api as _api  # noqa: E402
import numba.cuda.dispatcher as _disp  # noqa: E402

_fake = pytypes.SimpleNamespace(compute_capability=(9, 0), id=0)
_api.get_current_device = lambda: _fake
_disp.get_current_device = lambda: _fake

backend = pytypes.ModuleType("grader.backend")      # "there is a GPU": importing grader must not
backend.SIMULATOR, backend.gpu_count = False, lambda: 1   # switch Numba to its simulator here
sys.modules["grader.backend"] = backend

from grader.notebooks import definitions  # noqa: E402

PRELUDE = """
import math
import numpy as np
from numba import cuda, float32, uint16, uint32, uint64
SMS = 132
def cdiv(a, b):
    return (a + b - 1) // b
"""
SOL = "solutions/01_elementwise/"
f32_1d, f32_2d = types.float32[::1], types.Array(types.float32, 2, "C")
u16_1d, u16_2d = types.uint16[::1], types.Array(types.uint16, 2, "C")
u64_1d, u64_2d = types.uint64[::1], types.Array(types.uint64, 2, "C")


def ops(ptx: str) -> Counter:
    return Counter(line.split()[0] for line in ptx.splitlines()
                   if line.startswith("\t") and line.split() and not line.strip().startswith("//"))


def compile_(kernel, sig, fastmath=False):
    ptx, _ = cuda.compile_ptx(kernel.py_func if hasattr(kernel, "py_func") else kernel, sig, cc=(9, 0),
                              fastmath=fastmath)
    return ptx, ops(ptx)


def show(name, counts, keys):
    picked = {k: v for k, v in counts.items() if re.search(keys, k)}
    print(f"{name:28s} {sum(counts.values()):4d} PTX instructions  {picked}")


failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("  FAIL:", what)


skip = ("grader",)
l02 = definitions(SOL + "02_bandwidth_and_roofline.ipynb", ["l02_v1", "l02_v2", "l02_saxpy"],
                  prelude=PRELUDE, skip_imports=skip)
for name in ["saxpy_v1", "saxpy_v2", "saxpy"]:
    ptx, c = compile_(l02[name], (types.float32, f32_1d, f32_1d, f32_1d))
    show(name, c, r"^(ld|st)\.global")
ptx, c = compile_(l02["saxpy"], (types.float32, f32_1d, f32_1d, f32_1d))
expect(c["ld.global.f32"] >= 8, "saxpy: 8 independent loads in the full-trip loop")

l03 = definitions(SOL + "03_coalescing_and_transpose.ipynb", ["l03_v1", "l03_make_transpose"],
                  prelude=PRELUDE, skip_imports=skip)
ptx, c = compile_(l03["transpose_naive"], (f32_2d, f32_2d))
show("transpose_naive", c, r"^(ld|st)\.global")
for cfg in [(32, 8, 0), (32, 8, 1), (64, 16, 1)]:
    ptx, c = compile_(l03["make_transpose"](*cfg).kernel, (f32_2d, f32_2d))
    show(f"transpose_tiled{cfg}", c, r"^(ld|st)\.(global|shared)|bar")
    per_thread = cfg[0] * cfg[0] // (32 * cfg[1])
    # two paths (whole tiles without guards, edge tiles with), each with its one barrier
    expect(c["bar.sync"] == 2, f"tiled{cfg}: one barrier per path")
    expect(c["ld.global.f32"] >= per_thread, f"tiled{cfg}: whole-tile loops unrolled ({per_thread} loads per thread)")
    expect(not any(k.startswith(("ld.local", "st.local")) for k in c), f"tiled{cfg}: no local memory")

l04 = definitions(SOL + "04_vectors_half_precision_fusion.ipynb",
                  ["l04_formats", "l04_activations", "l04_v1", "l04_v2", "l04_bias_act"],
                  prelude=PRELUDE + "host_bf16_to_f32 = host_f32_to_bf16 = lambda v: v\n", skip_imports=skip)
ptx, c = compile_(l04["bias_gelu_v1"], (u16_2d, u16_1d, u16_2d))
show("bias_gelu_v1 (math.tanh)", c, r"^(ld|st)\.global|ex2|rcp|div|tanh")
ptx, c = compile_(l04["bias_gelu_v2"], (u16_2d, u16_1d, u16_2d), fastmath=True)
show("bias_gelu_v2 (exp, fast)", c, r"^(ld|st)\.global|ex2|rcp|div|tanh")
expect(c["ex2.approx.ftz.f32"] == 1, "v2: exp is one ex2.approx")
for act in ["gelu", "silu"]:
    words, elems = l04["make_bias_act"](l04[act]).kernels
    ptx, c = compile_(words, (u16_2d, u16_1d, u16_2d), fastmath=True)     # views itself as uint64
    show(f"bias_{act}_words", c, r"^(ld|st)\.global|ex2|div|tanh")
    expect(c["ld.global.u64"] >= 9, f"{act} words: 8-byte loads (bias + eight rows)")
    expect(c["st.global.u64"] >= 8, f"{act} words: 8-byte stores")
    expect(c["ex2.approx.ftz.f32"] >= 32, f"{act} words: 32 fast exps per trip (8 words x 4)")
    expect(not any(k.startswith(("ld.local", "st.local", "cvt.f64", "cvt.rn.f64")) or ".f64" in k for k in c),
           f"{act} words: no float64 math, no local memory")
    ptx, c = compile_(elems, (u16_2d, u16_1d, u16_2d), fastmath=True)
    show(f"bias_{act}_elems", c, r"^(ld|st)\.global|ex2|div")

print("FAILED: " + "; ".join(failures) if failures else "all kernels compiled for sm_90 as intended")
sys.exit(1 if failures else 0)
