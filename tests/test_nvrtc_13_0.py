"""Every compiled reference cell of chapters 04-05 keeps no local memory under NVRTC 13.0.48.

The lent H100 compiles the cells with its torch cu130 environment's NVRTC 13.0, whose ptxas spills
where NVRTC 13.5 and nvcc 13.0.88 do not: on 2026-11-24 it spilled 05.04 schedules' sk_gemm (44 B
stored, 88 B loaded) and 05.06's tcgen05 GEMM, and their references lost their SASS rubrics on the
GPU while every test here passed. 13.0.48 reproduces those figures byte for byte. CI installs that NVRTC (``.ci/run``: the ``nvidia-cuda-nvrtc
==13.0.48`` wheel) and points ``GRADER_TEST_NVRTC_13_0`` at its ``lib/``; elsewhere the test skips
unless ``GRADER_REQUIRE_NVRTC_13_0=1``. Each cell compiles in its own process, with that
``libnvrtc.so.13`` preloaded (the process would otherwise load the newest one it finds)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

def _compiled_cells() -> list[tuple[str, str]]:
    """(notebook, cell id) of every %%cuda cell of the chapter 04-05 solutions: the kernels as the lessons define them."""
    from grader.notebooks import code_cells

    return [(str(nb.relative_to(ROOT)), c.get("id")) for nb in sorted((ROOT / "solutions").glob("0[45]_*/*.ipynb"))
            for c in code_cells(nb) if c.source.startswith("%%cuda")]


CELLS = _compiled_cells()

# Compiles the notebook's cell as the %%cuda magic would (tests/cells.py; the build cache keys on the
# NVRTC version) and prints the NVRTC version and the ptxas report of every kernel as JSON.
_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[3])
from cuda.bindings import nvrtc
from grader.notebooks import cell_source
from tests.cells import compile_cell
module = compile_cell(cell_source(sys.argv[3] + "/" + sys.argv[1], sys.argv[2]))
print(json.dumps({"nvrtc": list(nvrtc.nvrtcVersion()[1:]), "resources": module.resources}))
"""


def _nvrtc_lib() -> Path | None:
    lib = os.environ.get("GRADER_TEST_NVRTC_13_0")
    if lib and (Path(lib) / "libnvrtc.so.13").is_file():
        return Path(lib)
    if os.environ.get("GRADER_REQUIRE_NVRTC_13_0") == "1":
        pytest.fail("GRADER_TEST_NVRTC_13_0 must name the lib/ folder of the nvidia-cuda-nvrtc==13.0.48 wheel")
    return None


def test_the_cells_are_found():
    assert len(CELLS) >= 10, CELLS


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: f"{Path(c[0]).stem}:{c[1]}")
def test_no_local_memory_with_nvrtc_13_0(cell):
    lib = _nvrtc_lib()
    if lib is None:
        pytest.skip("needs NVRTC 13.0.48 (GRADER_TEST_NVRTC_13_0; CI installs it)")
    env = {**os.environ, "LD_PRELOAD": str(lib / "libnvrtc.so.13"),
           "LD_LIBRARY_PATH": f"{lib}:{os.environ.get('LD_LIBRARY_PATH', '')}",
           "PYTHONPATH": str(ROOT)}
    env.pop("GRADER_CUDA_ARCH", None)             # each cell's own architecture (or sm_90a)
    r = subprocess.run([sys.executable, "-c", _SCRIPT, *cell, str(ROOT)], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["nvrtc"] == [13, 0], f"loaded NVRTC {report['nvrtc']}, not 13.0"
    kernels = {k: v for k, v in report["resources"].items() if not k.startswith("&")}
    assert kernels, f"{cell}: no ptxas report"
    local = {k: (v["stack"], v["spill_stores"], v["spill_loads"]) for k, v in kernels.items()
             if v["stack"] or v["spill_stores"] or v["spill_loads"]}
    assert not local, f"{cell}: local memory under NVRTC 13.0 (stack, spill stores, spill loads): {local}"
