#!/usr/bin/env bash
# Lesson 05.05 (schedules) on a Hopper GPU, in one device call (repo root of the copy that travelled, .whl and .carry):
#   1. the reference (Stream-K and the fused epilogue) at every visible and hidden size, other splits (check);
#   2. each value-caught wrong kernel of tests/wrong/ch05_streamk.py, in its own process;
#   3. the schedules against cuBLAS at the wave-quantized shapes, 4096³ and 8192³; the fused epilogue
#      against its unfused peers (time);
#   4. lesson 05_schedules through the judge (--in-notebook; the other chapter 05 lessons removed from this copy).
# Each step has its own timeout (CHECK_S, WRONG_S, TIME_S, NB_S); SKIP="2 4" skips steps 2 and 4; DIAG=1 adds
# step 3b, the diagnostic variants (streamk_gpu.py diag, DIAG_S); SK_QUICK=1 checks and times less (a short
# device budget; the judge in step 4 checks every size); WRONG_P: wrong kernels in parallel (2).
# Usage: bash dev/ch05_hopper/streamk_gpu.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
source .carry/dev_env.sh || exit 1
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap GRADER_GPU_TIMEOUT=20 GRADER_CACHE_DIR=/tmp/grader-cache
log="$out/streamk_gpu.log"
skip=" ${SKIP:-} "
py=dev/ch05_hopper/streamk_gpu.py
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u +%F; nvcc --version | tail -1; \
  python3 -c "import torch; print('torch', torch.__version__)"; } | tee "$out/device.txt" | tee -a "$log"
if [[ $skip != *" 1 "* ]]; then
  echo "== 1. check" | tee -a "$log"
  timeout "${CHECK_S:-80}" python3 $py check 2>&1 | grep -vE "^\s*$" | tail -25 | tee -a "$log"
fi
if [[ $skip != *" 2 "* ]]; then
  echo "== 2. wrong kernels" | tee -a "$log"
  names=$(python3 -c "from tests.wrong.ch05_streamk import VALUE_CATCHES; print(' '.join(sorted(VALUE_CATCHES)))")
  printf '%s\n' $names | xargs -P ${WRONG_P:-2} -I{} timeout "${WRONG_S:-45}" python3 $py wrong {} 2>&1 \
    | grep -E "RESULT|Error|error" | cut -c1-500 | tee -a "$log"
fi
if [[ $skip != *" 3 "* ]]; then
  echo "== 3. timing" | tee -a "$log"
  timeout "${TIME_S:-130}" python3 $py time 2>&1 | grep -E "TIME|WRONG|Error|rror:|not built" | tee -a "$log"
fi
if [[ " ${DIAG:-} " == *" 1 "* ]]; then
  echo "== 3b. diagnostics (where the tail's time goes)" | tee -a "$log"
  timeout "${DIAG_S:-80}" python3 $py diag 2>&1 | grep -E "DIAG|Error|rror:" | tee -a "$log"
fi
if [[ $skip != *" 4 "* ]]; then
  echo "== 4. scoreboard (lesson 05_schedules)" | tee -a "$log"
  for f in solutions/05_hopper_blackwell/*.ipynb; do
    [[ $(basename "$f") == 05_schedules.ipynb ]] || rm -f "$f" "course/05_hopper_blackwell/$(basename "$f")"
  done
  /usr/bin/time -f "scoreboard: %e s wall" timeout "${NB_S:-90}" python3 -m grader scoreboard 05_hopper_blackwell \
    --in-notebook --out "$out" > "$out/scoreboard_ch05.log" 2>&1
  tail -10 "$out/scoreboard_ch05.log" | tee -a "$log"
fi
echo "== done" | tee -a "$log"
