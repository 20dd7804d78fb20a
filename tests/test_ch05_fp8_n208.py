"""Chapter 05, lesson 04's 128 × 208 dev variant (dev/ch05_hopper/fp8_variants/n208.cu, CPU only): it
compiles for sm_90a to QGMMA.64x208x32 without local memory (with NVRTC 13.0.48 too where CI installs
it), its consumers use more than 208 registers and at most setmaxnreg's 240, setmaxnreg stays within
the launch's registers (a request past them hung on the H100), the k loop exists once per B scale-block
split (8 of them: n0 = t · 208 meets n0 % 128 in 16-column steps), each with 104 promotion FFMAs, and
the epilogue has four TMA stores (the fourth box overlapping the third)."""
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


@pytest.fixture(scope="module")
def module():
    from tests.cells import compile_cell

    return compile_cell(SRC.read_text(), "fp8_n208")


def test_n208_compiles_to_qgmma_without_spills(module):
    from grader.cuda import sass

    sass.require(module, KERNEL, present=["QGMMA.64x208x32.F32.E4M3.E4M3", "UTMALDG.2D", "UTMASTG.2D"],
                 absent=["HGMMA", "LDL", "STL"], no_spills=True)
    assert sass.require_setmaxnreg(module, KERNEL, threads=384)["registers"] == 168
    ops = sass.opcodes(module, KERNEL, full=True)
    assert ops["QGMMA.64x208x32.F32.E4M3.E4M3"] == 4 * 8 and ops["FFMA"] == 104 * 8
    assert ops["UTMASTG.2D"] == 4
    text = sass.disassemble(module, KERNEL)
    used = {int(r) for r in re.findall(r"\bR(\d+)\b", text)}
    assert 208 < max(used) + 1 <= 240
    pool = [int(x, 16) for x in re.findall(r"USETMAXREG\.\S+ (?:\w+, )?(0x[0-9a-f]+)", text)]
    assert sorted(pool) == [24, 240] and 24 * 128 + 240 * 256 <= 168 * 384
    shape = module.launch_shape(KERNEL)
    assert (shape.threads, shape.tile_m, shape.tile_n, shape.tile_k, shape.stages) == (384, 128, 208, 128, 4)
    assert shape.smem_bytes == 4 * (16 + 26) * 1024 + 2 * 16 * 1024 + 1024 <= 227 * 1024


def test_n208_without_local_memory_under_nvrtc_13_0():
    from tests.test_nvrtc_13_0 import _SCRIPT, _nvrtc_lib

    lib = _nvrtc_lib()
    if lib is None:
        pytest.skip("needs NVRTC 13.0.48 (GRADER_TEST_NVRTC_13_0; CI installs it)")
    env = {**os.environ, "LD_PRELOAD": str(lib / "libnvrtc.so.13"),
           "LD_LIBRARY_PATH": f"{lib}:{os.environ.get('LD_LIBRARY_PATH', '')}", "PYTHONPATH": str(ROOT)}
    env.pop("GRADER_CUDA_ARCH", None)
    r = subprocess.run([sys.executable, "-c", _SCRIPT, str(SRC), str(ROOT)], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["nvrtc"] == [13, 0]
    res = report["resources"][KERNEL]
    assert (res["stack"], res["spill_stores"], res["spill_loads"]) == (0, 0, 0), res
