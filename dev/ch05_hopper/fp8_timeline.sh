#!/usr/bin/env bash
# fp8_timeline.py, then fp8_ffma.py on the reference, NOPROMO and the ceiling, in one device call.
# Usage: bash dev/ch05_hopper/fp8_timeline.sh OUTDIR  (ENV_SH: the environment script; default .carry/dev_env.sh)
set -u
out=$1
mkdir -p "$out"
source "${ENV_SH:-.carry/dev_env.sh}" || exit 1
export GRADER_GPU_TIMEOUT=20 GRADER_CACHE_DIR=/tmp/grader-cache
log="$out/fp8_timeline.log"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } | tee -a "$log"
TL_ONLY="${TL_ONLY:-}" timeout "${TL_S:-90}" python3 dev/ch05_hopper/fp8_timeline.py 2>&1 | tee -a "$log"
FP8F_ONLY="${FP8F_ONLY:-ref,nopromo TIMING ONLY,ceiling TIMING ONLY}" timeout "${FFMA_S:-120}" python3 dev/ch05_hopper/fp8_ffma.py "${SIZES:-8192}" 2>&1 \
  | grep -E "BUILD|^  fp8|PATCH|CHECK|TIME|Error|rror:" | tee -a "$log"
echo "== done" | tee -a "$log"
