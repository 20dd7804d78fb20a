"""The simulator's warp intrinsics agree with a real GPU (skipped without one).

Runs dev/ch02_reduce/compare_warp_sim.py in a subprocess with the simulator switched
off, so it works whatever this pytest process imported numba with.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.cuda.toolchain import gpu_count

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "dev" / "ch02_reduce" / "compare_warp_sim.py"


@pytest.mark.gpu
@pytest.mark.skipif(gpu_count() == 0, reason="no CUDA GPU")
def test_warp_kernels_agree_between_gpu_and_simulator(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=1200,
    )
    assert done.returncode == 0, done.stdout + done.stderr
