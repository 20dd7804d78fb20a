#!/usr/bin/env bash
# Lesson 05.05's experiments on a Hopper GPU, in one device call (repo root of the copy that travelled):
#   1. ncu: the d-128 kernel of each cell in NCU_CELLS (causal and not) and cuDNN's SDPA, S 4096: speed of
#      light, pipes (tensor / gmma, xu = MUFU, fma, alu), issue slots, warp stall reasons;
#   2. each version in VARIANTS ("label:cell[:stages of the d-128 kernel]" words), in a process of its own with a timeout:
#      checked at a dozen sizes, then timed beside cuDNN SDPA (dev/ch05_hopper/flash3_explore.py variant).
# Usage: NCU_CELLS="a.cu b.cu" VARIANTS="old:a.cu new:b.cu" bash dev/ch05_hopper/flash3_explore.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then source .carry/dev_env.sh || exit 1
else export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; fi
export GRADER_GPU_TIMEOUT=20 GRADER_CACHE_DIR=/tmp/grader-cache
log="$out/flash3_explore.log"
py=dev/ch05_hopper/flash3_explore.py
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u +%F; git log -1 --format=%h 2>/dev/null
  python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } | tee -a "$log"
if [[ -n ${NCU_CELLS:-} ]]; then
  echo "== 1. ncu" | tee -a "$log"
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  "$ncu" --query-metrics --chip gh100 > "$out/ncu_metrics.txt" 2>&1
  metrics=$(python3 - "$out/ncu_metrics.txt" <<'EOF'
import re, sys
have = {ln.split()[0] for ln in open(sys.argv[1]) if ln.strip() and not ln.startswith(("-", "Device", "Metric"))}
want = [(b, ".avg.pct_of_peak_sustained_active") for b in
        ("sm__pipe_tensor_op_gmma_cycles_active", "sm__pipe_tensor_op_hmma_cycles_active", "sm__inst_executed_pipe_xu",
         "sm__pipe_fma_cycles_active", "sm__pipe_alu_cycles_active", "sm__pipe_fmaheavy_cycles_active",
         "smsp__issue_active", "sm__inst_executed_pipe_uniform")]
want += [(b, ".ratio") for b in sorted(have) if re.fullmatch(r"smsp__average_warps_issue_stalled_\w+_per_issue_active", b)]
print(",".join(b + s for b, s in want if b in have))
EOF
)
  echo "metrics: $metrics" >> "$log"
  profile() { timeout "${NCU_S:-90}" "$ncu" --clock-control none -k regex:"flash3|sdpa|fprop|fmha|cudnn" -c 8 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats \
    "$@" --csv --page details python3 $py ncu $NCU_CELLS > "$out/ncu.csv" 2> "$out/ncu.err"; echo "ncu rc $?" | tee -a "$log"; }
  profile ${metrics:+--metrics $metrics}
  grep -q '"Metric Name"' "$out/ncu.csv" || profile          # a metric it refused: the sections alone
  python3 - "$out/ncu.csv" <<'EOF' | tee -a "$log"
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: sys.exit(print("no ncu rows"))
h = rows[0]; K, N, V, U = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value"), h.index("Metric Unit")
keep = ("Duration", "Compute (SM) Throughput", "Issue Slots Busy", "Issued Warp Per Scheduler", "No Eligible",
        "Warp Cycles Per Issued Instruction", "Registers Per Thread", "Executed Ipc Active", "SM Busy", "Memory Throughput")
seen = []
for r in rows[1:]:
    if r[0] not in seen: seen.append(r[0])
for i in seen:
    rs = [r for r in rows[1:] if r[0] == i]
    print(f"-- kernel {i}: {rs[0][K][:90]}")
    for r in rs:
        if r[N].startswith(keep) or "__" in r[N]:
            print(f"   {r[N][:78]:78s} {r[V]} {r[U]}")
EOF
  tail -3 "$out/ncu.err" | tee -a "$log"
fi
echo "== 2. versions" | tee -a "$log"
for v in ${VARIANTS:-}; do
  IFS=: read -r label cell kern <<< "$v"
  timeout "${VARIANT_S:-60}" python3 $py variant "$label" "$cell" ${kern:+"$kern"} 2>&1 \
    | grep -E "VARIANT|TIME|rror" | cut -c1-300 | tee -a "$log"
done
echo "== done" | tee -a "$log"
