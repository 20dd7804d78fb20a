#!/usr/bin/env bash
# Lesson 05.02 on a Hopper GPU, in one device call (repo root of the copy that travelled, .whl and .carry):
#   check      the reference at every visible and hidden size (wgmma_gpu.py check);
#   wrong      each wrong kernel of tests/wrong/ch05_wgmma.py in its own process, four at a time:
#              caught by the values? by the rubric?
#   time       the cell's configurations beside cuBLAS at 4096³ and 8192³;
#   tests      the gpu-marked tests of tests/test_ch05_wgmma.py;
#   scoreboard chapter 05 through the judge (--in-notebook), merged into a copy of results/scoreboard.json.
# STEPS picks them (default: check wrong time scoreboard); each has its own timeout in seconds
# (CHECK_S, WRONG_S, TIME_S, TEST_S, NB_S). Usage: [STEPS="..."] bash dev/ch05_hopper/wgmma_gpu.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
source .carry/dev_env.sh || exit 1
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap GRADER_GPU_TIMEOUT=20
log="$out/wgmma_gpu.log"
steps=" ${STEPS:-check wrong time scoreboard} "
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u +%F; } | tee "$out/device.txt"
if [[ $steps == *" check "* ]]; then
  echo "== check" | tee -a "$log"
  timeout "${CHECK_S:-90}" python3 dev/ch05_hopper/wgmma_gpu.py check 2>&1 | tail -25 | tee -a "$log"
fi
if [[ $steps == *" wrong "* ]]; then
  echo "== wrong kernels" | tee -a "$log"
  names=$(python3 -c "from tests.wrong.ch05_wgmma import WGMMA_MISTAKES as W; print(' '.join(sorted(W)))")
  printf '%s\n' $names | xargs -P 4 -I{} timeout "${WRONG_S:-60}" python3 dev/ch05_hopper/wgmma_gpu.py wrong {} 2>&1 \
    | grep -E "RESULT|Error|error" | tee -a "$log"
fi
if [[ $steps == *" time "* ]]; then
  echo "== timing" | tee -a "$log"
  timeout "${TIME_S:-120}" python3 dev/ch05_hopper/wgmma_gpu.py time ${TIME_ARGS:-} 2>&1 | tee -a "$log" | tail -30
fi
if [[ $steps == *" tests "* ]]; then
  echo "== gpu tests" | tee -a "$log"
  GRADER_TEST_GPU=1 timeout "${TEST_S:-120}" python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_ch05_wgmma.py \
    2>&1 | tee -a "$log" | tail -25
fi
if [[ $steps == *" scoreboard "* ]]; then
  echo "== scoreboard" | tee -a "$log"
  cp results/scoreboard.json "$out/"
  /usr/bin/time -f "scoreboard: %e s wall" timeout "${NB_S:-200}" python3 -m grader scoreboard 05_hopper_blackwell \
    --in-notebook --out "$out" > "$out/scoreboard_ch05.log" 2>&1
  tail -12 "$out/scoreboard_ch05.log"
fi
