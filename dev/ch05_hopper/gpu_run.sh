#!/usr/bin/env bash
# Chapter 05 on a GPU machine (device tool, repo root, .whl and .carry), in one call:
#   1. the scoreboard of chapter 05 through the judge, with --in-notebook;
#   2. the gpu-marked tests of tests/test_ch05_*.py but Blackwell's (references, each wrong kernel caught);
#   3. a smoke test and a sweep of the TMA transpose (tma_sweep.py);
#   4. lesson 09 (Blackwell) on this GPU: blackwell_gpu.py (off Blackwell, the "needs sm_100" path).
# Usage: bash dev/ch05_hopper/gpu_run.sh OUTDIR
set -u
out=$1
source .carry/dev_env.sh || exit 1
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
date -u +%F | tee -a "$out/device.txt"
python3 -c "import cuda.core, cuda.bindings; print('cuda.core', cuda.core.__version__, 'cuda.bindings', cuda.bindings.__version__)" | tee -a "$out/device.txt"
/usr/bin/time -f "scoreboard: %e s wall" timeout ${SCOREBOARD_TIMEOUT:-330} python3 -m grader scoreboard 05_hopper_blackwell --in-notebook --out "$out" \
  2>&1 | tee "$out/scoreboard_ch05.log" | tail -30
GRADER_TEST_GPU=1 timeout ${TESTS_TIMEOUT:-200} python3 -m pytest -q -s -m gpu $(ls tests/test_ch05_*.py | grep -v blackwell) 2>&1 | tee "$out/gpu_tests.log" | tail -40
timeout 80 python3 dev/ch05_hopper/tma_sweep.py 2>&1 | tee "$out/sweep.log" | tail -30
timeout 300 python3 dev/ch05_hopper/blackwell_gpu.py "$out" 2>&1 | tee "$out/blackwell.log" | tail -40
