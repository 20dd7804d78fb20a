#!/bin/bash
# What one device call runs: env facts, `harness.py all` (build check, checks, wrong kernels,
# timing), then optionally Nsight Compute on one launch of the kernels named in $NCU.
# Everything lands in /tmp/ch04out and comes back as $OUT/logs.tgz (the tool returns 8 files at most).
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
W=/tmp/ch04out
mkdir -p $W
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  python3 -c "import torch, cuda.core; print('torch', torch.__version__, 'cuda.core', getattr(cuda.core, '__version__', '?'))"
} 2>&1 | tee $OUT/env.txt
timeout ${ALL_S:-300} python3 harness.py all --out $W > $W/all_stdout.log 2>&1
echo "harness rc=$?"
tail -c 9000 $W/all_stdout.log
cp $W/summary.txt $W/bench.json $OUT/ 2>/dev/null
if [ -n "$NCU" ]; then
  timeout ${NCU_S:-90} ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy \
    -k "regex:^($NCU)\$" python3 harness.py profile > $W/ncu.txt 2>&1
  echo "ncu rc=$?"
  grep -E "^  [a-z0-9_]+ \(|Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|Bank Conflicts|Warp Cycles Per Issued" $W/ncu.txt | head -70
fi
tar czf $OUT/logs.tgz -C $W .
