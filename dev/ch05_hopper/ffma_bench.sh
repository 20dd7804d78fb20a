#!/usr/bin/env bash
# ffma_bench.py (the promotion FFMAs' issue rate under conditions), then fp8_ffma.py's cases named in
# FP8F_ONLY (the real kernel with the winning FFMA policy, checked then timed beside torch._scaled_mm),
# in one device call. Usage: bash dev/ch05_hopper/ffma_bench.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
source "${ENV_SH:-.carry/dev_env.sh}" || exit 1
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap GRADER_GPU_TIMEOUT=20 GRADER_CACHE_DIR=/tmp/grader-cache
log="$out/ffma_bench.log"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; \
  python3 -c "from cuda.bindings import nvrtc; print('nvrtc', nvrtc.nvrtcVersion()[1:])"; } | tee -a "$log"
if [ -z "${SKIP_BENCH:-}" ]; then
  for g in ${FFB_GROUPS:-nochain chain}; do          # a kernel fault kills its process's context
    FFB_GROUP=$g timeout "${BENCH_S:-120}" python3 dev/ch05_hopper/ffma_bench.py 2>&1 | tee -a "$log"
  done
fi
if [ -n "${FP8F_ONLY:-}" ]; then
  timeout "${FFMA_S:-240}" python3 dev/ch05_hopper/fp8_ffma.py "${SIZES:-8192}" 2>&1 \
    | grep -E "BUILD|^  fp8|PATCH|CHECK|TIME|Error|rror:" | tee -a "$log"
fi
echo "== done" | tee -a "$log"
