#!/usr/bin/env bash
# fp8_explore.py on a Hopper GPU in one device call: check, time, then Nsight Compute on the lesson's
# kernel, the best variants, the ceilings and cuBLAS (one launch each at 4096³). Usage: bash fp8_explore.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
source .carry/dev_env.sh || exit 1
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap GRADER_GPU_TIMEOUT=20 GRADER_CACHE_DIR=/tmp/grader-cache
log="$out/explore.log"
py=dev/ch05_hopper/fp8_explore.py
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; nvcc --version | tail -1; } | tee -a "$log"
echo "== check" | tee -a "$log"
timeout "${CHECK_S:-60}" python3 $py check 2>&1 | grep -E "CHECK|Error|rror:" | tee -a "$log"
echo "== time" | tee -a "$log"
timeout "${TIME_S:-120}" python3 $py time "${TIME_SIZES:-4096,8192}" 2>&1 | grep -E "TIME|Error|rror:" | tee -a "$log"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "== ncu ($NCU)" | tee -a "$log"
if [ -n "$NCU" ]; then
  mets=$("$NCU" --query-metrics 2>/dev/null | awk '{print $1}' | grep -E "^sm__pipe_tensor_op_gmma_cycles_active$|^sm__inst_executed_pipe_tensor_op_gmma$" | paste -sd, -)
  echo "gmma metrics: $mets" | tee -a "$log"
  for k in ${NCU_KERNELS:-"fp8_gemm<Fp8<128, 128, 6, 2, 8>>" "fp8_gemm<Fp8<128, 128, 6, 2, 8, 1, 0, 0, 1>>" "fp8_gemm<Fp8<128, 128, 6, 2, 8, 2>>" "fp8_gemm<Fp8<128, 256, 4, 2, 8, 1, 1>>" cublas}; do
    [ "$k" = none ] && continue
    echo "-- $k" | tee -a "$log"
    m2=""; [ -n "$mets" ] && m2=$(echo "$mets" | sed 's/\([a-z_]*\)/\1.avg.pct_of_peak_sustained_active/g')
    skip=1; [ "$k" = cublas ] && skip=2          # cublas: torch.ones' fill kernel first
    timeout "${NCU_S:-45}" "$NCU" --launch-skip $skip --launch-count 1 --section SpeedOfLight --section WarpStateStats \
      --section SchedulerStats --section MemoryWorkloadAnalysis ${m2:+--metrics "$m2"} \
      python3 $py once "$k" 4096 > "$out/ncu_tmp.txt" 2>&1
    grep -vE "^==PROF==|^\s*$|----" "$out/ncu_tmp.txt" | grep -E "Throughput|Duration|Pipe|gmma|Stall|Warp Cycles|Issued|Eligible|No Eligible|Active Warps|Busy|Bandwidth|Hit Rate|sm__|Shared|ERROR|ONCE|  [a-z_]+<|sm90|Elapsed|SM Frequency" | cut -c1-160 | tee -a "$log"
    cat "$out/ncu_tmp.txt" >> "$out/ncu_full.txt"
  done
  rm -f "$out/ncu_tmp.txt"
  "$NCU" --query-metrics 2>/dev/null | grep -i "tensor\|gmma" | cut -c1-150 > "$out/tensor_metrics.txt"
  if [ -n "${SRC_KERNEL:-}" ]; then     # where the lesson's warps stall: per SASS instruction
    timeout 60 "$NCU" --launch-skip 1 --launch-count 1 --section SourceCounters --section WarpStateStats \
      --import-source no -f -o /tmp/src python3 $py once "$SRC_KERNEL" 4096 > /dev/null 2>&1
    "$NCU" -i /tmp/src.ncu-rep --page source --csv --print-source sass > "$out/source.csv" 2>&1
    echo "source.csv: $(wc -l < "$out/source.csv") lines" | tee -a "$log"
  fi
fi
echo "== done" | tee -a "$log"
