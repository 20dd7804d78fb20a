#!/usr/bin/env bash
# Nsight Compute on lesson 05.08's FP8 kernel and 05.07's bf16 kernel (B 4, H 32, S 4096, d 128, non-causal),
# one launch each, in one device call: --set full with source counters, the report exported as text:
#   ncu_details.csv   every section's metrics (both kernels) + pipe metrics named below
#   src_fp8.csv, src_bf16.csv   per SASS instruction: executed count, stall samples by reason
# Usage: bash dev/ch05_hopper/fp8attn_ncu.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
log="$out/ncu.log"
"$NCU" --version | tail -1 | tee -a "$log"
want="sm__pipe_tensor_cycles_active sm__pipe_tensor_op_gmma_cycles_active sm__inst_executed_pipe_xu sm__pipe_xu_cycles_active
sm__pipe_fma_cycles_active sm__pipe_alu_cycles_active sm__inst_executed_pipe_fma sm__inst_executed_pipe_alu
smsp__issue_active sm__pipe_shared_cycles_active sm__inst_executed_pipe_uniform sm__inst_executed_pipe_adu"
"$NCU" --query-metrics --chip gh100 > /tmp/mets.txt 2>&1
mets=$(for w in $want; do grep -qE "^$w\b" /tmp/mets.txt && echo "$w.avg.pct_of_peak_sustained_active"; done | paste -sd, -)
echo "metrics: $mets" | tee -a "$log"
timeout "${NCU_S:-170}" "$NCU" --clock-control none --set full --import-source no -k regex:flash3 -c 2 \
  ${mets:+--metrics "$mets"} -f -o /tmp/prof python3 dev/ch05_hopper/fp8attn_ncu.py > "$out/ncu_run.txt" 2>&1
echo "ncu rc $?" | tee -a "$log"
grep -E "NCU|ERROR|rror" "$out/ncu_run.txt" | head -20 | tee -a "$log"
"$NCU" -i /tmp/prof.ncu-rep --page details --csv > "$out/ncu_details.csv" 2>&1
"$NCU" -i /tmp/prof.ncu-rep --page raw --csv > /tmp/raw.csv 2>&1
gzip -c /tmp/raw.csv > "$out/ncu_raw.csv.gz"
"$NCU" -i /tmp/prof.ncu-rep -k regex:flash3_fp8 --page source --csv --print-source sass > "$out/src_fp8.csv" 2>&1
"$NCU" -i /tmp/prof.ncu-rep -k regex:'^flash3$' --page source --csv --print-source sass > "$out/src_bf16.csv" 2>&1
wc -l "$out"/*.csv | tee -a "$log"
