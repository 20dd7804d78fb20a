"""Chapter 05, lesson 04's 128 × 208 dev variant (dev/ch05_hopper/fp8_variants/n208.cu, CPU only): it
compiles for sm_90a to QGMMA.64x208x32 without local memory (with NVRTC 13.0.48 too where CI installs
it), its consumers use more than 208 registers and at most setmaxnreg's 240, setmaxnreg stays within
the launch's registers (a request past them hung on the H100), the k loop exists once per B scale-block
split (8 of them: n0 = t · 208 meets n0 % 128 in 16-column steps), each with 104 promotion FFMAs, and
the epilogue has four TMA stores (the fourth box overlapping the third). The same source at BN = 200
(wgmma m64n200k32, 16 splits in 8-column steps; dev/ch05_hopper/fp8n200_gpu.py) likewise."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SRC = ROOT / "dev" / "ch05_hopper" / "fp8_variants" / "n208.cu"
KERNEL = "fp8_gemm_w<Fp8w<208, 4, 8>>"
N200 = "fp8_gemm_w<Fp8w<200, 4, 8>>"
_ADD = """
def _add_kernels(src, kernels):
    first, _, body = src.partition(chr(10))
    return first + "".join(' -k "' + k + '"' for k in kernels) + chr(10) + body
"""


# (kernel, BN, k-loop copies = B scale-block split positions, B box KiB): 208 = 80 mod 128 meets
# n0 % 128 in 16-column steps (8 positions), 200 = 72 mod 128 in 8-column steps (all 16)
WIDTHS = [(KERNEL, 208, 8, 26), (N200, 200, 16, 25)]


@pytest.mark.parametrize("kernel, bn, splits, b_kib", WIDTHS, ids=["n208", "n200"])
def test_compiles_to_qgmma_without_spills(kernel, bn, splits, b_kib):
    from grader.cuda import sass
    from tests.cells import compile_cell

    module = compile_cell(SRC.read_text(), f"fp8_n{bn}", only=kernel)
    qgmma = f"QGMMA.64x{bn}x32.F32.E4M3.E4M3"
    sass.require(module, kernel, present=[qgmma, "UTMALDG.2D", "UTMASTG.2D"],
                 absent=["HGMMA", "LDL", "STL"], no_spills=True)
    assert sass.require_setmaxnreg(module, kernel, threads=384)["registers"] == 168
    ops = sass.opcodes(module, kernel, full=True)
    assert ops[qgmma] == 4 * splits and ops["FFMA"] == bn // 2 * splits      # one k loop per split
    assert ops["UTMASTG.2D"] == 4
    text = sass.disassemble(module, kernel)
    used = {int(r) for r in re.findall(r"\bR(\d+)\b", text)}
    assert bn < max(used) + 1 <= 240
    pool = [int(x, 16) for x in re.findall(r"USETMAXREG\.\S+ (?:\w+, )?(0x[0-9a-f]+)", text)]
    assert sorted(pool) == [24, 240] and 24 * 128 + 240 * 256 <= 168 * 384
    shape = module.launch_shape(kernel)
    assert (shape.threads, shape.tile_m, shape.tile_n, shape.tile_k, shape.stages) == (384, 128, bn, 128, 4)
    assert shape.smem_bytes == 4 * (16 + b_kib) * 1024 + 2 * 16 * 1024 + 1024 <= 227 * 1024


def test_n208_without_local_memory_under_nvrtc_13_0():
    from tests.test_nvrtc_13_0 import _SCRIPT, _nvrtc_lib

    lib = _nvrtc_lib()
    if lib is None:
        pytest.skip("needs NVRTC 13.0.48 (GRADER_TEST_NVRTC_13_0; CI installs it)")
    env = {**os.environ, "LD_PRELOAD": str(lib / "libnvrtc.so.13"),
           "LD_LIBRARY_PATH": f"{lib}:{os.environ.get('LD_LIBRARY_PATH', '')}", "PYTHONPATH": str(ROOT)}
    env.pop("GRADER_CUDA_ARCH", None)
    # both widths in one build: the cell's header names KERNEL; N200 added to it (argv[3:])
    script = _SCRIPT.replace("open(sys.argv[1]).read()", "_add_kernels(open(sys.argv[1]).read(), sys.argv[3:])")
    script = script.replace("from tests.cells import compile_cell", "from tests.cells import compile_cell\n" + _ADD)
    assert "_add_kernels(open" in script
    r = subprocess.run([sys.executable, "-c", script, str(SRC), str(ROOT), N200], capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["nvrtc"] == [13, 0]
    for k in (KERNEL, N200):
        res = report["resources"][k]
        assert (res["stack"], res["spill_stores"], res["spill_loads"]) == (0, 0, 0), (k, res)
