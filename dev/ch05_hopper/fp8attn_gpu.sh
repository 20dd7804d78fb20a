#!/usr/bin/env bash
# Lesson 05.08 (FP8 attention) on a Hopper GPU, in one device call (repo root of the copy that travelled, .whl, .carry):
#   1. the reference at every visible and hidden size (and the other variants at five);
#   4. timing (before 2 and 3: nothing else on the GPU): FP8 against cuDNN SDPA bf16 and against 05.07's
#      bf16 kernel, same process, every variant and the first form (TIME_WHAT=variants, the default);
#   2. the wrong kernels of tests/wrong/ch05_flash3_fp8.py, each in its own process, three at once;
#   3. accuracy against float64 of the unrounded inputs (bf16 SDPA, FP8 with and without the rotation);
#   5. the FP8 lesson through the judge (scoreboard --in-notebook; the chapter's other lessons removed).
# NB_ARGS="" grades without timing the notebook's own speed cells (default --in-notebook). SKIP="4 5" skips steps; per-step timeouts CHECK_S, WRONG_S, ACC_S, TIME_S, NB_S (seconds). The judge's run (5)
# needs more than 105 s (run 4 was cut there: the benchmark inputs' quantization, since made 4x faster).
# Usage: bash dev/ch05_hopper/fp8attn_gpu.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then source .carry/dev_env.sh || exit 1
else export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1; fi   # keep a caller's NumPy < 2.5 (numba-cuda)
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap GRADER_GPU_TIMEOUT=20 GRADER_CACHE_DIR=/tmp/grader-cache
log="$out/fp8attn_gpu.log"
skip=" ${SKIP:-} "
py=dev/ch05_hopper/fp8attn_gpu.py
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u +%F; nvcc --version | tail -1;
  python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } \
  | tee "$out/device.txt" | tee -a "$log"
ok=1
if [[ $skip != *" 1 "* ]]; then
  echo "== 1. check" | tee -a "$log"
  timeout "${CHECK_S:-150}" python3 $py check > "$out/check.log" 2>&1
  grep -vE "^\s*$" "$out/check.log" | tail -60 | cut -c1-700 | tee -a "$log"
  ok=$(grep -c "CHECK: the reference passed" "$out/check.log")
fi
if [[ $ok == 0 ]]; then echo "the reference is wrong: no timing" | tee -a "$log"; exit 0; fi
if [[ $skip != *" 4 "* ]]; then
  echo "== 4. time" | tee -a "$log"
  timeout "${TIME_S:-150}" python3 $py time ${TIME_WHAT:-variants} 2>&1 | grep -E "TIME|rror" | tee -a "$log"
fi
if [[ $skip != *" 2 "* ]]; then
  echo "== 2. wrong kernels" | tee -a "$log"
  names=$(python3 -c "from tests.wrong.ch05_flash3_fp8 import ON_GPU; print(' '.join(sorted(ON_GPU)))")
  printf '%s\n' $names | xargs -P 3 -I{} timeout "${WRONG_S:-90}" python3 $py wrong {} 2>&1 \
    | grep -E "RESULT|Error|error" | cut -c1-600 | tee -a "$log"
fi
if [[ $skip != *" 3 "* ]]; then
  echo "== 3. accuracy" | tee -a "$log"
  timeout "${ACC_S:-90}" python3 $py accuracy 2>&1 | grep -E "ACCURACY|rror" | tee -a "$log"
fi
if [[ $skip != *" 5 "* ]]; then
  echo "== 5. scoreboard (lesson 08)" | tee -a "$log"
  find solutions/05_hopper_blackwell course/05_hopper_blackwell -name "*.ipynb" ! -name "08_flash3_fp8.ipynb" -delete
  /usr/bin/time -f "scoreboard: %e s wall" timeout "${NB_S:-240}" python3 -m grader scoreboard 05_hopper_blackwell ${NB_ARGS---in-notebook} \
    --out "$out" > "$out/scoreboard_ch05_fp8.log" 2>&1
  tail -15 "$out/scoreboard_ch05_fp8.log" | tee -a "$log"
fi
echo "== done" | tee -a "$log"
