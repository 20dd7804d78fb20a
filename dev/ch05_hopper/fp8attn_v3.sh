#!/usr/bin/env bash
# Session 3's FP8 attention variants in one device call: check, time (beside the bf16 kernel and cuDNN), then
# Nsight Compute (fp8attn_ncu.sh: the reference, the bf16 kernel and NCU_V3). SKIP="check seeds time ncu" skips steps.
# Usage: bash dev/ch05_hopper/fp8attn_v3.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap GRADER_GPU_TIMEOUT=20 GRADER_CACHE_DIR=/tmp/grader-cache PYTHONUNBUFFERED=1
log="$out/v3.log"
skip=" ${SKIP:-} "
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } | tee -a "$log"
py=dev/ch05_hopper/fp8attn_v3.py
[[ $skip == *" check "* ]] || { echo "== check" | tee -a "$log"; timeout "${CHECK_S:-100}" python3 $py check 2>&1 | grep -E "CHECK|FAILED|RES|rror" | cut -c1-500 | tee -a "$log"; }
[[ $skip == *" seeds "* ]] || { echo "== seeds (the lesson's reference, fresh seeds)" | tee -a "$log"; timeout "${SEEDS_S:-60}" python3 dev/ch05_hopper/fp8attn_seeds.py 3 2>&1 | grep -E "SEEDS|FAILED|round|rror" | cut -c1-500 | tee -a "$log"; }
[[ $skip == *" time "* ]] || { echo "== time" | tee -a "$log"; timeout "${TIME_S:-170}" python3 $py time 2>&1 | grep -E "TIME|rror" | tee -a "$log"; }
[[ $skip == *" ncu "* ]] || { echo "== ncu" | tee -a "$log"; bash dev/ch05_hopper/fp8attn_ncu.sh "$out" "${NCU_V3:-perm lazy BN192 ring 4 ones}"; cat "$out/ncu.log" >> "$log"; }
echo "== done" | tee -a "$log"
