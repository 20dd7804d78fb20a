#!/usr/bin/env bash
# The fp8speed helper's last device call: fp8_gpu.sh (check at every visible and hidden size, the wrong
# kernels, timing beside torch._scaled_mm, lesson 04 through the judge; the accumulator step skipped:
# the promotion's arithmetic did not change), then at 8192³ in the same run the two rungs that are not
# in the cell (turns without the lean k loop; no promotion at all), then Nsight Compute on the lesson's
# kernel at 4096³ with the tensor pipe's active cycles. Usage: bash dev/ch05_hopper/fp8speed_final.sh OUTDIR
# TAIL_ONLY=1: only the part after fp8_gpu.sh.
out=$1
mkdir -p "$out"
[ -n "${TAIL_ONLY:-}" ] || SKIP="3" CHECK_S=55 WRONG_S=35 TIME_S=75 NB_S=70 bash dev/ch05_hopper/fp8_gpu.sh "$out"
source .carry/dev_env.sh > /dev/null || exit 1      # fp8_gpu.sh's environment ended with it
echo "== rungs not in the cell (fp8_explore.cu), 8192" | tee -a "$out/fp8_gpu.log"
FP8X_ROUND=3 timeout 45 python3 dev/ch05_hopper/fp8_explore.py time 8192 2>&1 | grep -E "TIME|rror" | tee -a "$out/fp8_gpu.log"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
m=sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
echo "== ncu: the lesson's kernel, 4096" | tee -a "$out/fp8_gpu.log"
timeout 40 "$NCU" --launch-skip 1 --launch-count 1 --section SpeedOfLight --metrics "$m" \
  python3 dev/ch05_hopper/fp8_explore.py once lesson 4096 > "$out/ncu_lesson.txt" 2>&1
grep -E "pct_of_peak|Throughput|Duration|SM Frequency|ERROR" "$out/ncu_lesson.txt" | tee -a "$out/fp8_gpu.log"
echo "== ncu: cuBLAS fp8 tensorwise, 4096" | tee -a "$out/fp8_gpu.log"
timeout 40 "$NCU" --launch-skip 2 --launch-count 1 --section SpeedOfLight --metrics "$m" \
  python3 dev/ch05_hopper/fp8_explore.py once cublas 4096 > "$out/ncu_cublas.txt" 2>&1
grep -E "nvjet|pct_of_peak|Throughput|Duration|SM Frequency|ERROR" "$out/ncu_cublas.txt" | tee -a "$out/fp8_gpu.log"
echo "== final done" | tee -a "$out/fp8_gpu.log"
