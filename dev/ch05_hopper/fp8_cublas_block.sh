#!/usr/bin/env bash
# cuBLAS's block-scaled FP8 GEMM beside lesson 05.04's kernel, in one device call (dev/ch05_hopper/
# fp8_cublas_block.py): STEPS (default "check names time") of: check (cuBLAS blockwise against the
# problem's reference), checkcell (the lesson's cell file in full), names (the cuBLAS kernels the profiler sees), time (TIME_SIZES, ROUNDS; FP8_EXTRA
# adds instantiations of the lesson's cell), ncu (Nsight Compute's per-instruction SASS and warp-stall
# samples of cuBLAS blockwise and of NCU_KERNELS at NCU_N³, as CSV), pipe (Nsight Compute: the tensor
# pipe's activity for the lesson's kernel and cuBLAS blockwise at NCU_N³). Usage: bash ... OUTDIR
set -u
out=$1
mkdir -p "$out"
source dev/ch05_hopper/env_min.sh >/dev/null || exit 1
export GRADER_GPU_TIMEOUT=10 GRADER_CACHE_DIR=/tmp/grader-cache
py=dev/ch05_hopper/fp8_cublas_block.py
log="$out/fp8_cublas_block.log"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u +"%F %H:%M UTC"; \
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"; } | tee -a "$log"
for step in ${STEPS:-check names time}; do
  echo "== $step" | tee -a "$log"
  case $step in
    check) timeout 100 python3 $py check 2>&1 | grep -E "CHECK|rror" | tee -a "$log" ;;
    checkcell) timeout 200 python3 $py checkcell 2>&1 | grep -E "BUILD|CHECK|✓|✗|rror" | cut -c1-600 | tee -a "$log" ;;
    names) timeout 100 python3 $py names "${NCU_N:-8192}" 2>&1 | grep -E "KERNELS|rror" | tee -a "$log" ;;
    time) timeout "${TIME_S:-280}" python3 $py time "${TIME_SIZES:-8192,4096}" "${ROUNDS:-2}" 2>&1 \
            | grep -E "TIME|PATCH|rror" | tee -a "$log" ;;
    pipe)    # Nsight Compute: the tensor pipe's active cycles, the lesson's kernel and cuBLAS blockwise, at NCU_N³
      n=${NCU_N:-8192}
      m=sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
      for what in ours once; do
        re=fp8_gemm; args=(ours "fp8_gemm<Fp8<128, 192, 4, 1, 8>>" "$n"); [ $what = once ] && { re=nvjet; args=(once "$n"); }
        timeout 150 ncu --kernel-name "regex:$re" --launch-skip 1 --launch-count 1 --section SpeedOfLight --metrics "$m" \
          python3 $py "${args[@]}" > "$out/ncu_pipe_$what.txt" 2>&1
        echo "ncu pipe $what ($re, $n³):" | tee -a "$log"
        grep -E "nvjet|fp8_gemm|pct_of_peak|Compute \(SM\) Throughput|Duration|SM Frequency|ERROR" "$out/ncu_pipe_$what.txt" | cut -c1-160 | tee -a "$log"
      done ;;
    ncu)
      n=${NCU_N:-4096}
      ncu_sass() {   # KERNEL_REGEX OUTFILE ARGS...: one launch (the second) of the script's run, per-instruction CSV
        local re=$1 f=$2; shift 2
        timeout 150 ncu --kernel-name "regex:$re" --launch-skip 1 --launch-count 1 --section SourceCounters \
          --page source --print-source sass --csv python3 $py "$@" > "$f" 2>>"$out/ncu.err"
      }
      ncu_sass nvjet "$out/ncu_sass_cublas_blockwise_$n.csv" once "$n"
      echo "ncu cuBLAS blockwise: rc $?" | tee -a "$log"
      IFS=';' read -ra ks <<< "${NCU_KERNELS:-}"
      for k in "${ks[@]}"; do
        ncu_sass fp8_gemm "$out/ncu_sass_$(echo "$k" | tr -c 'A-Za-z0-9\n' '_')_$n.csv" ours "$k" "$n"
        echo "ncu $k: rc $?" | tee -a "$log"
      done ;;
  esac
done
echo "== done" | tee -a "$log"
