#!/usr/bin/env bash
# The 128 × 192 FP8 kernel on a Hopper GPU in one device call: fp8_gpu.sh (the reference at every
# visible and hidden size, its variants at the smoke sizes, the value-caught wrong kernels, timing at
# 4096³ and 8192³ beside torch._scaled_mm with the previous 128 × 128 lesson kernel (FP8_PREV) and the
# no-promotion ceiling in the same process, the FP8 notebook through the judge), then Nsight Compute's
# tensor-pipe activity for the reference and cuBLAS at 8192³. Usage: bash dev/ch05_hopper/fp8wide_gpu.sh OUTDIR
out=$1
mkdir -p "$out"
SKIP="3" CHECK_S=${CHECK_S:-60} WRONG_S=${WRONG_S:-40} TIME_S=${TIME_S:-130} NB_S=${NB_S:-90} bash dev/ch05_hopper/fp8_gpu.sh "$out"
source .carry/dev_env.sh > /dev/null || exit 1
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
m=sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
for what in lesson cublas; do
  echo "== ncu: $what, ${NCU_N:-8192}" | tee -a "$out/fp8_gpu.log"
  skip=1; [ "$what" = cublas ] && skip=2
  timeout "${NCU_S:-45}" "$NCU" --launch-skip $skip --launch-count 1 --section SpeedOfLight --metrics "$m" \
    python3 dev/ch05_hopper/fp8_explore.py once $what "${NCU_N:-8192}" > "$out/ncu_$what.txt" 2>&1
  grep -E "nvjet|fp8_gemm|pct_of_peak|Throughput|Duration|SM Frequency|ERROR" "$out/ncu_$what.txt" | cut -c1-160 | tee -a "$out/fp8_gpu.log"
done
echo "== wide done" | tee -a "$out/fp8_gpu.log"
