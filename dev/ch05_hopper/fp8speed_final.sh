#!/usr/bin/env bash
# The fp8speed helper's second device call: fp8_gpu.sh (check, wrong kernels, accumulator, timing,
# lesson 04 through the judge), then Nsight Compute on the lesson's kernel at 4096³ with the tensor
# pipe's metrics this ncu knows. Usage: bash dev/ch05_hopper/fp8speed_final.sh OUTDIR
out=$1
CHECK_S=60 WRONG_S=35 ACCUM_S=30 TIME_S=80 NB_S=75 bash dev/ch05_hopper/fp8_gpu.sh "$out"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
mets=$("$NCU" --query-metrics 2>/dev/null | awk '{print $1}' | grep -E "^sm__pipe_tensor.*(cycles_active|inst_executed)|^sm__inst_executed_pipe_tensor" | head -6)
echo "== ncu: tensor-pipe metrics found: $(echo $mets)" | tee -a "$out/fp8_gpu.log"
m2=$(for m in $mets; do printf '%s.avg.pct_of_peak_sustained_active,' $m; done | sed 's/,$//')
timeout 40 "$NCU" --launch-skip 1 --launch-count 1 --section SpeedOfLight ${m2:+--metrics "$m2"} \
  python3 dev/ch05_hopper/fp8_explore.py once lesson 4096 > "$out/ncu_lesson.txt" 2>&1
grep -E "pct_of_peak|Throughput|Duration|SM Frequency|ERROR" "$out/ncu_lesson.txt" | tee -a "$out/fp8_gpu.log"
