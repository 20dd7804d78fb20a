#!/bin/bash
# One device call for chapter 04 (run from the repo root of the copy that travelled, after
# .carry/dev_env.sh): the solution notebooks autograded on the GPU (gpu_run.py), then the
# gpu-marked tests (every C++ mistake caught, the C++ references right). Each step under a
# timeout; logs and the autograded notebooks come back as $OUT/ch04_run.tgz, the merged
# scoreboard as $OUT/scoreboard.json.
export PYTHONUNBUFFERED=1
W=$OUT/work
mkdir -p "$W"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c "import torch, numba, numpy, cuda.core; print('torch', torch.__version__, 'numba', numba.__version__, 'numpy', numpy.__version__, 'cuda.core', cuda.core.__version__)"
  date -u; } > "$W/env.txt" 2>&1
cat "$W/env.txt"
timeout "${NB_S:-320}" python3 dev/ch04_attention/gpu_run.py "$W" > "$W/notebooks.log" 2>&1
echo "notebooks rc=$?"
cp "$W/scoreboard.json" "$OUT/" 2>/dev/null
tar czf "$OUT/ch04_run.tgz" -C "$W" .                 # what the notebooks left, before the tests
grep -E "^\[|^  (test|speed)|^04_attention|^kernel|bf16|fp32|nbgrader points|lost:" "$W/notebooks.log" | tail -60
GRADER_TEST_GPU=1 timeout "${TEST_S:-90}" python3 -m pytest -q -s -m gpu -p no:cacheprovider \
  tests/test_ch04_attention.py > "$W/gputests.log" 2>&1
echo "gpu tests rc=$?"
tar czf "$OUT/ch04_run.tgz" -C "$W" .
tail -30 "$W/gputests.log"
