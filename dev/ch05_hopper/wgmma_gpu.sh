#!/usr/bin/env bash
# Lesson 05.02 on a Hopper GPU, in one device call (repo root of the copy that travelled, .whl and .carry):
#   1. the reference at every visible and hidden size (wgmma_gpu.py check);
#   2. each wrong kernel of tests/wrong/ch05_wgmma.py in its own process, four at a time: caught by
#      the values? by the rubric?
#   3. the lesson's configurations and the dev variants beside cuBLAS at 4096³ and 8192³;
#   4. chapter 05's scoreboard through the judge (--in-notebook), merged into a copy of results/scoreboard.json.
# Each step has its own timeout (seconds: CHECK_S, WRONG_S, TIME_S, NB_S). Usage: bash dev/ch05_hopper/wgmma_gpu.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
source .carry/dev_env.sh || exit 1
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap GRADER_GPU_TIMEOUT=20
log="$out/wgmma_gpu.log"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u +%F; } | tee "$out/device.txt"
echo "== 1. check" | tee -a "$log"
timeout "${CHECK_S:-90}" python3 dev/ch05_hopper/wgmma_gpu.py check 2>&1 | tail -25 | tee -a "$log"
echo "== 2. wrong kernels" | tee -a "$log"
names=$(python3 -c "from tests.wrong.ch05_wgmma import WGMMA_MISTAKES as W; print(' '.join(sorted(W)))")
printf '%s\n' $names | xargs -P 4 -I{} timeout "${WRONG_S:-60}" python3 dev/ch05_hopper/wgmma_gpu.py wrong {} 2>&1 \
  | grep -E "RESULT|Error|error" | tee -a "$log"
echo "== 3. timing" | tee -a "$log"
timeout "${TIME_S:-120}" python3 dev/ch05_hopper/wgmma_gpu.py time ${TIME_ARGS:-} 2>&1 | tee -a "$log" | tail -30
echo "== 4. scoreboard" | tee -a "$log"
cp results/scoreboard.json "$out/"
/usr/bin/time -f "scoreboard: %e s wall" timeout "${NB_S:-200}" python3 -m grader scoreboard 05_hopper_blackwell \
  --in-notebook --out "$out" > "$out/scoreboard_ch05.log" 2>&1
tail -12 "$out/scoreboard_ch05.log"
