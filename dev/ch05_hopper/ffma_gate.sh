#!/usr/bin/env bash
# gate.patch (after ffma_bench.py) on the device in one call: fp8_ffma.py on the reference and lean
# (one process), then on the gate variants and their FFMA policies (another: a hang there loses
# nothing else), checked then timed beside torch._scaled_mm; then fp8_timeline.py on lean and gate.
# Usage: ENV_SH=dev/ch05_hopper/env_min.sh bash dev/ch05_hopper/ffma_gate.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
source "${ENV_SH:-.carry/dev_env.sh}" || exit 1
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap GRADER_GPU_TIMEOUT=20 GRADER_CACHE_DIR=/tmp/grader-cache
log="$out/ffma_gate.log"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; \
  python3 -c "from cuda.bindings import nvrtc; print('nvrtc', nvrtc.nvrtcVersion()[1:])"; } | tee -a "$log"
for only in "${SAFE:-ref,lean,lean noturns}" \
            "${GATES:-gate,gate+reuse_all,gate+stick_all,gate+yield_all,gate+early,gate+late,gate+late+reuse_all}"; do
  FP8F_ONLY="$only" timeout "${FFMA_S:-150}" python3 dev/ch05_hopper/fp8_ffma.py "${SIZES:-8192,4096}" 2>&1 \
    | grep -E "BUILD|^  fp8|PATCH|CHECK|TIME|Error|rror:" | tee -a "$log"
done
TL_ONLY="${TL_ONLY:-lean,gate,gate+reuse_all}" timeout "${TL_S:-60}" python3 dev/ch05_hopper/fp8_timeline.py 2>&1 | tee -a "$log"
echo "== done" | tee -a "$log"
