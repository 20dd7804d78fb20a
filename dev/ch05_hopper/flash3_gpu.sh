#!/usr/bin/env bash
# Lesson 05.07 (FlashAttention-3) on a Hopper GPU, in one device call (repo root of the copy that travelled, .whl and .carry):
#   1. the reference at every visible and hidden size, each ablation variant at a few (check);
#   2. the wrong kernels of tests/wrong/ch05_flash3.py that need a GPU, each in its own process, all at once
#      (TESTS=1: tests/test_ch05_flash3.py's gpu-marked tests instead: the reference, then each mistake);
#   3. the ablation (WS, ping-pong, overlap switched off) at d 128 and 64, S 4096, beside cuDNN SDPA;
#   5. lesson 07 through the judge (--in-notebook; the chapter's other lessons removed from this copy);
#   4. then the reference against cuDNN and flash SDPA: d 128/64, S 1k/4k/16k, causal and not (sweep).
# With no .whl (the judge's wheels) the image's numpy is used and step 5 cannot run.
# SCHEDULE=1 adds step 3s: the persistent loop's head groups (1 against the default) at d 128, S 4k/16k.
# Each step has its own timeout (seconds: CHECK_S, WRONG_S, ABL_S, SWEEP_S, NB_S); SKIP="4 5" skips steps 4
# and 5 (1 always runs; if the reference is wrong, 3-5 are skipped).
# Usage: bash dev/ch05_hopper/flash3_gpu.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then source .carry/dev_env.sh || exit 1
else export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; fi          # no wheels: the image's numpy, no judge (step 5)
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap GRADER_GPU_TIMEOUT=20 GRADER_CACHE_DIR=/tmp/grader-cache
log="$out/flash3_gpu.log"
skip=" ${SKIP:-} "
py=dev/ch05_hopper/flash3_gpu.py
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u +%F; nvcc --version | tail -1;
  python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } \
  | tee "$out/device.txt" | tee -a "$log"
echo "== 1. check" | tee -a "$log"
timeout "${CHECK_S:-120}" python3 $py check > "$out/check.log" 2>&1
grep -vE "^\s*$" "$out/check.log" | tail -30 | tee -a "$log"
ok=$(grep -c "CHECK: the reference passed" "$out/check.log")
if [[ -n ${TESTS:-} ]]; then                       # the same, as the gpu-marked tests
  echo "== 2. gpu tests (tests/test_ch05_flash3.py)" | tee -a "$log"
  GRADER_TEST_GPU=1 timeout "${WRONG_S:-60}" python3 -m pytest -q -s -m gpu tests/test_ch05_flash3.py > "$out/gpu_tests.log" 2>&1
  grep -E "RESULT|passed|failed|rror" "$out/gpu_tests.log" | cut -c1-300 | tail -12 | tee -a "$log"
elif [[ $skip != *" 2 "* ]]; then
  echo "== 2. wrong kernels" | tee -a "$log"
  names=$(python3 -c "from tests.wrong.ch05_flash3 import ON_GPU; print(' '.join(sorted(ON_GPU)))")
  printf '%s\n' $names | xargs -P 3 -I{} timeout "${WRONG_S:-60}" python3 $py wrong {} 2>&1 \
    | grep -E "RESULT|Error|error" | cut -c1-400 | tee -a "$log"
fi
if [[ $ok == 0 ]]; then echo "the reference is wrong: no timing" | tee -a "$log"; exit 0; fi
if [[ -n ${SCHEDULE:-} ]]; then
  echo "== 3s. schedule (head groups)" | tee -a "$log"
  timeout "${ABL_S:-120}" python3 $py time schedule 2>&1 | grep -E "TIME|rror" | tee -a "$log"
fi
if [[ $skip != *" 3 "* ]]; then
  echo "== 3. ablation" | tee -a "$log"
  timeout "${ABL_S:-120}" python3 $py time ablation 2>&1 | grep -E "TIME|rror" | tee -a "$log"
fi
if [[ $skip != *" 5 "* ]]; then
  echo "== 5. scoreboard (lesson 07)" | tee -a "$log"
  find solutions/05_hopper_blackwell course/05_hopper_blackwell -name "*.ipynb" ! -name "07_flash3.ipynb" -delete
  /usr/bin/time -f "scoreboard: %e s wall" timeout "${NB_S:-150}" python3 -m grader scoreboard 05_hopper_blackwell \
    --in-notebook --out "$out" > "$out/scoreboard_ch05.log" 2>&1
  tail -12 "$out/scoreboard_ch05.log" | tee -a "$log"
fi
if [[ $skip != *" 4 "* ]]; then
  echo "== 4. sweep" | tee -a "$log"
  timeout "${SWEEP_S:-150}" python3 $py time sweep 2>&1 | grep -E "TIME|rror" | tee -a "$log"
fi
echo "== done" | tee -a "$log"
