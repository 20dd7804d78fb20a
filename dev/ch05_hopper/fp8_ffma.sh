#!/usr/bin/env bash
# fp8_ffma.py on a Hopper GPU in one device call: the reference beside its FFMA-hint rewrites and the
# handoff variants, checked then timed beside torch._scaled_mm. Usage: bash dev/ch05_hopper/fp8_ffma.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
source "${ENV_SH:-.carry/dev_env.sh}" || exit 1
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap GRADER_GPU_TIMEOUT=20 GRADER_CACHE_DIR=/tmp/grader-cache
log="$out/fp8_ffma.log"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; \
  python3 -c "from cuda.bindings import nvrtc; print('nvrtc', nvrtc.nvrtcVersion()[1:])"; } | tee -a "$log"
timeout "${FFMA_S:-240}" python3 dev/ch05_hopper/fp8_ffma.py "${SIZES:-8192}" 2>&1 \
  | grep -E "BUILD|^  fp8|PATCH|CHECK|TIME|Error|rror:" | tee -a "$log"
echo "== done" | tee -a "$log"
