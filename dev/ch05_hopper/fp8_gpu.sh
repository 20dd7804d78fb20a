#!/usr/bin/env bash
# Lesson 05.06 (FP8 GEMM) on a Hopper GPU, in one device call (repo root of the copy that travelled, .whl and .carry):
#   1. the reference at every visible and hidden size (and seeds), the variants at a few (check);
#   2. each value-caught wrong kernel of tests/wrong/ch05_fp8.py, in its own process;
#   3. FP8 wgmma's accumulator over long K, promoted or not (accum);
#   4. the kernel and its other configurations beside torch._scaled_mm (tensorwise, rowwise, blockwise)
#      at TIME_SIZES (4096,8192);
#   5. the FP8 notebook (06_fp8_gemm) through the judge (--in-notebook; the chapter's other notebooks removed
#      from this copy to save time).
# Each step has its own timeout (CHECK_S, WRONG_S, ACCUM_S, TIME_S, NB_S); SKIP="3 5" skips steps 3 and 5.
# Usage: bash dev/ch05_hopper/fp8_gpu.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
source .carry/dev_env.sh || exit 1
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap GRADER_GPU_TIMEOUT=20 GRADER_CACHE_DIR=/tmp/grader-cache
log="$out/fp8_gpu.log"
skip=" ${SKIP:-} "
py=dev/ch05_hopper/fp8_gpu.py
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u +%F; nvcc --version | tail -1; \
  python3 -c "import torch; print('torch', torch.__version__)"; } | tee "$out/device.txt" | tee -a "$log"
echo "== 1. check" | tee -a "$log"
timeout "${CHECK_S:-70}" python3 $py check 2>&1 | grep -vE "^\s*$" | tail -20 | tee -a "$log"
if [[ $skip != *" 2 "* ]]; then
  echo "== 2. wrong kernels" | tee -a "$log"
  names=$(python3 -c "from tests.wrong.ch05_fp8 import VALUE_CATCHES; print(' '.join(sorted(VALUE_CATCHES)))")
  printf '%s\n' $names | xargs -P 3 -I{} timeout "${WRONG_S:-35}" python3 $py wrong {} 2>&1 \
    | grep -E "RESULT|Error|error" | cut -c1-500 | tee -a "$log"
fi
if [[ $skip != *" 3 "* ]]; then
  echo "== 3. accumulator" | tee -a "$log"
  timeout "${ACCUM_S:-30}" python3 $py accum 2>&1 | grep -E "ACCUM|Error|rror:" | tee -a "$log"
fi
if [[ $skip != *" 4 "* ]]; then
  echo "== 4. timing" | tee -a "$log"
  timeout "${TIME_S:-75}" python3 $py time "${TIME_SIZES:-4096,8192}" 2>&1 | grep -E "TIME|WRONG|Error|rror:" | tee -a "$log"
fi
if [[ $skip != *" 5 "* ]]; then
  echo "== 5. scoreboard (lesson 06)" | tee -a "$log"
  find solutions/05_hopper_blackwell course/05_hopper_blackwell -name "*.ipynb" ! -name "06_fp8_gemm.ipynb" -delete
  cp results/scoreboard.json "$out/" 2>/dev/null
  /usr/bin/time -f "scoreboard: %e s wall" timeout "${NB_S:-70}" python3 -m grader scoreboard 05_hopper_blackwell \
    --in-notebook --out "$out" > "$out/scoreboard_ch05.log" 2>&1
  tail -8 "$out/scoreboard_ch05.log" | tee -a "$log"
fi
echo "== done" | tee -a "$log"
