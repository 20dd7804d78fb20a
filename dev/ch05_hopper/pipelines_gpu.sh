#!/usr/bin/env bash
# Lesson 05.03 on a Hopper GPU, in one device call (repo root of the copy that travelled, .whl and .carry):
#   0. cluster occupancy of each configuration (probe), and the CUTLASS cell built by nvcc in the background;
#   1. the reference at every visible and hidden size, each configuration at a few (check);
#   2. each wrong kernel of tests/wrong/ch05_pipelines.py that can hang, in its own process, all at once;
#   3. CUTLASS checked at every visible and hidden size;
#   4. the ladder and the variants beside cuBLAS (TIME_SIZES, default 4096,8192);
#   5. lesson 03 through the judge (--in-notebook; the chapter's other lessons removed from this copy to save time);
#   6. Nsight Compute: tensor-pipe activity of the lesson's kernel and of cuBLAS at 8192³.
# Each step has its own timeout (seconds: CHECK_S, WRONG_S, CUTLASS_S, TIME_S, NB_S, NCU_S); SKIP="0 2 6" skips
# steps 0, 2 and 6 (the others always run).
# Usage: bash dev/ch05_hopper/pipelines_gpu.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
source .carry/dev_env.sh || exit 1
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap GRADER_GPU_TIMEOUT=20 GRADER_CACHE_DIR=/tmp/grader-cache
log="$out/pipelines_gpu.log"
skip=" ${SKIP:-} "
py=dev/ch05_hopper/pipelines_gpu.py
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u +%F; nvcc --version | tail -1; } \
  | tee "$out/device.txt" | tee -a "$log"
( timeout "${CUTLASS_S:-200}" python3 $py build > /tmp/cutlass_build.log 2>&1 ) &
build=$!
if [[ $skip != *" 0 "* ]]; then
  echo "== 0. probe" | tee -a "$log"
  timeout 60 python3 $py probe 2>&1 | grep -E "PROBE|SMs|Error" | tee -a "$log"
fi
echo "== 1. check" | tee -a "$log"
timeout "${CHECK_S:-100}" python3 $py check 2>&1 | grep -vE "^\s*$" | tail -25 | tee -a "$log"
if [[ $skip != *" 2 "* ]]; then
  echo "== 2. wrong kernels" | tee -a "$log"
  names=$(python3 -c "from tests.wrong.ch05_pipelines import HANGS; print(' '.join(sorted(HANGS)))")
  printf '%s\n' $names | xargs -P 4 -I{} timeout "${WRONG_S:-60}" python3 $py wrong {} 2>&1 \
    | grep -E "RESULT|Error|error" | cut -c1-400 | tee -a "$log"
fi
echo "== 3. CUTLASS" | tee -a "$log"
wait $build; tail -5 /tmp/cutlass_build.log | tee -a "$log"
timeout "${CHECK_S:-100}" python3 $py cutlass 2>&1 | grep -vE "^\s*$" | tail -8 | tee -a "$log"
if [[ $skip != *" 4 "* ]]; then
  echo "== 4. timing" | tee -a "$log"
  timeout "${TIME_S:-170}" python3 $py time "${TIME_SIZES:-4096,8192}" 2>&1 | grep -E "TIME|WRONG|Error|rror:" \
    | tee -a "$log"
fi
if [[ $skip != *" 5 "* ]]; then
  echo "== 5. scoreboard (lesson 03)" | tee -a "$log"
  find solutions/05_hopper_blackwell course/05_hopper_blackwell -name "*.ipynb" ! -name "03_pipelines.ipynb" -delete
  cp results/scoreboard.json "$out/"
  /usr/bin/time -f "scoreboard: %e s wall" timeout "${NB_S:-150}" python3 -m grader scoreboard 05_hopper_blackwell \
    --in-notebook --out "$out" > "$out/scoreboard_ch05.log" 2>&1
  tail -8 "$out/scoreboard_ch05.log" | tee -a "$log"
fi
if [[ $skip != *" 6 "* ]]; then
  echo "== 6. ncu" | tee -a "$log"
  command -v ncu >/dev/null || export PATH=$PATH:$(dirname $(ls /opt/nvidia/nsight-compute/*/ncu | head -1))
  metrics=$(ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}' \
    | grep -E '^sm__pipe_tensor_op_(gmma|hmma)_cycles_active$|^sm__inst_executed_pipe_tensor_op_gmma$' \
    | sed 's/cycles_active$/cycles_active.avg.pct_of_peak_sustained_active/; s/_gmma$/_gmma.sum/' | paste -sd, -)
  echo "metrics: $metrics" | tee -a "$log"
  timeout "${NCU_S:-90}" ncu --clock-control none -k regex:"ws_gemm|gemm|nvjet|xmma" --launch-skip 2 --launch-count 2 \
    --metrics "${metrics:+$metrics,}gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed" \
    python3 $py ncu > "$out/ncu.log" 2>&1
  grep -E "ws_gemm|nvjet|sm90|gemm|Kernel|pipe_tensor|gpu__time|sm__throughput|==PROF==|ERR" "$out/ncu.log" | cut -c1-200 | tail -30 \
    | tee -a "$log"
fi
echo "== done" | tee -a "$log"
