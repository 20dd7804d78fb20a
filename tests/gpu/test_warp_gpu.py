"""The simulator's warp intrinsics agree with a real GPU (skipped without one).

Runs tests/gpu/compare_warp_sim.py in a subprocess with the simulator switched
off, so it works whatever this pytest process imported numba with.
"""

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def cuda_gpu_present():
    """True if the CUDA driver loads and sees a device (no numba import)."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            driver = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_int(0)
        if driver.cuInit(0) != 0:
            return False
        return driver.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
    return False


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_gpu_present(), reason="no CUDA GPU")
def test_warp_kernels_agree_between_gpu_and_simulator(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, str(HERE / "compare_warp_sim.py"), "--out", str(tmp_path)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=1200,
    )
    assert done.returncode == 0, done.stdout + done.stderr
