#!/usr/bin/env bash
# fp8attn_v4.py in one device call: check every variant, then time them (SKIP="check time" skips steps).
# Usage: bash dev/ch05_hopper/fp8attn_v4.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap GRADER_GPU_TIMEOUT=20 GRADER_CACHE_DIR=/tmp/grader-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
log="$out/v4.log"
skip=" ${SKIP:-} "
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } | tee -a "$log"
py=dev/ch05_hopper/fp8attn_v4.py
[[ $skip == *" check "* ]] || { echo "== check" | tee -a "$log"; timeout "${CHECK_S:-120}" python3 $py check 2>&1 | grep -E "CHECK|FAILED|RES|rror" | cut -c1-500 | tee -a "$log"; }
[[ $skip == *" time "* ]] || { echo "== time" | tee -a "$log"; timeout "${TIME_S:-170}" python3 $py time ${REPS:-3} 2>&1 | grep -E "TIME|RES|rror" | tee -a "$log"; }
echo "== done" | tee -a "$log"
