#!/usr/bin/env bash
# Lesson 05.04's FP8 GEMM, 128 × 200 tiles beside 128 × 208 (fp8_variants/n208.cu) and each with the
# reuse_y4 FFMA policy, in one device call: checked in one process (CHECK_S; a hang stops only that
# step), then the right ones timed beside the lesson's kernel and torch._scaled_mm tensorwise in another
# (TIME_S, TIME_SIZES, ROUNDS interleaved). numpy only: NUMPY_WHL=path of its wheel, else env_min.sh.
# PY= another script with the same check OKFILE / time OKFILE [SIZES] [ROUNDS] steps, its log named
# after it (fp8pipe_gpu.py: the promotion one k tile behind, fp8_variants/pipelined.cu).
# Usage: [PY=dev/ch05_hopper/fp8pipe_gpu.py] bash dev/ch05_hopper/fp8n200_gpu.sh OUTDIR
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
py=${PY:-dev/ch05_hopper/fp8n200_gpu.py}
log="$out/$(basename "$py" _gpu.py).log" ok="${OK_FILE:-$out/ok.txt}"     # OK_FILE + SKIP_CHECK=1: a check done before
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u +"%F %H:%M UTC"; \
  python3 -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)"; } | tee -a "$log"
echo "== check" | tee -a "$log"
[[ -n "${SKIP_CHECK:-}" ]] || timeout "${CHECK_S:-110}" python3 $py check "$ok" 2>&1 | grep -E "BUILD|PATCH|CHECK|✓|✗|Error|rror:" | cut -c1-600 | tee -a "$log"
echo "== time" | tee -a "$log"
timeout "${TIME_S:-160}" python3 $py time "$ok" "${TIME_SIZES:-8192,4096}" "${ROUNDS:-2}" 2>&1 \
  | grep -E "BUILD|PATCH|TIME|WRONG|Error|rror:" | cut -c1-600 | tee -a "$log"
echo "== done" | tee -a "$log"
