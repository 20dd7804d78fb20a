#!/usr/bin/env bash
# fp8attn_v5.py in one device call: check every kernel, time them, then the new reference and the best cut at
# every size with fresh seeds, and the wrong kernels of tests/wrong/ch05_flash3_fp8.py on both (SKIP="check
# time full wrong" skips steps; WRONG_ON="cell cuts": on the cuts too (run 1); V5_RUN=1: run 1). Usage: bash fp8attn_v5.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
export GRADER_GPU_TIMEOUT=20 GRADER_CACHE_DIR=/tmp/grader-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
log="$out/v5.log"
skip=" ${SKIP:-} "
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } | tee -a "$log"
py=dev/ch05_hopper/fp8attn_v5.py
[[ $skip == *" check "* ]] || { echo "== check" | tee -a "$log"; timeout "${CHECK_S:-150}" python3 $py check 2>&1 | grep -E "CHECK|FAILED|RES|rror" | cut -c1-500 | tee -a "$log"; }
[[ $skip == *" time "* ]] || { echo "== time" | tee -a "$log"; timeout "${TIME_S:-200}" python3 $py time ${REPS:-5} 2>&1 | grep -E "TIME|RES|rror" | tee -a "$log"; }
[[ $skip == *" full "* ]] || { echo "== full (at every visible and hidden size, fresh seeds)" | tee -a "$log"; timeout "${FULL_S:-90}" python3 $py full ${ROUNDS:-3} 2>&1 | grep -E "FULL|rror" | cut -c1-500 | tee -a "$log"; }
if [[ $skip != *" wrong "* ]]; then
  echo "== wrong kernels on the cell's reference and on the best cut" | tee -a "$log"
  names=$(python3 -c "from tests.wrong.ch05_flash3_fp8 import ON_GPU; print(' '.join(sorted(ON_GPU)))")
  for on in ${WRONG_ON:-cell}; do printf '%s\n' $names | xargs -P 3 -I{} timeout "${WRONG_S:-60}" python3 $py wrong {} $on 2>&1 | grep -E "RESULT|rror" | cut -c1-400 | tee -a "$log"; done
fi
echo "== done $(date -u)" | tee -a "$log"
