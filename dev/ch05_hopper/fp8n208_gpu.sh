#!/usr/bin/env bash
# Lesson 05.04's FP8 GEMM with 128 × 208 tiles (fp8_variants/n208.cu) in one device call: the variant
# checked at the smoke, visible and hidden sizes, then timed beside the lesson's kernel and
# torch._scaled_mm tensorwise in one process (TIME_SIZES, ROUNDS interleaved; SEPARATE=1: check and
# time in two processes, each kernel in full). numpy only on
# PYTHONPATH (dev/ch05_hopper/env_min.sh, or NUMPY_WHL=path of the numpy wheel). Each step has its
# own timeout (ALL_S; CHECK_S, TIME_S). Usage: bash dev/ch05_hopper/fp8n208_gpu.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
if [[ -n "${NUMPY_WHL:-}" ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$NUMPY_WHL" >/tmp/pip.log 2>&1 \
    || { tail -5 /tmp/pip.log; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
else
  source dev/ch05_hopper/env_min.sh || exit 1
fi
export GRADER_GPU_TIMEOUT=10 GRADER_CACHE_DIR=/tmp/grader-cache
log="$out/fp8n208.log"
py=dev/ch05_hopper/fp8n208_gpu.py
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u +"%F %H:%M UTC"; \
  python3 -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)"; } | tee -a "$log"
if [[ -n "${SEPARATE:-}" ]]; then         # check, then time, each in its own process
  echo "== check" | tee -a "$log"
  timeout "${CHECK_S:-120}" python3 $py check 2>&1 | grep -E "BUILD|CHECK|✓|✗|Error|rror:" | cut -c1-600 | tee -a "$log"
  echo "== time" | tee -a "$log"
  timeout "${TIME_S:-150}" python3 $py time "${TIME_SIZES:-8192,4096}" "${ROUNDS:-2}" 2>&1 \
    | grep -E "BUILD|CHECK|TIME|WRONG|Error|rror:" | cut -c1-600 | tee -a "$log"
else                                       # one process, one build: check (first kernel in full), then time
  echo "== check and time" | tee -a "$log"
  timeout "${ALL_S:-150}" python3 $py all "${TIME_SIZES:-8192,4096}" "${ROUNDS:-1}" 2>&1 \
    | grep -E "BUILD|CHECK|TIME|WRONG|✓|✗|Error|rror:" | cut -c1-600 | tee -a "$log"
fi
echo "== done" | tee -a "$log"
