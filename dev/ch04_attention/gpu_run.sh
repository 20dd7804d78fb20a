#!/bin/bash
# One device call for chapter 04 (from the repo root of the copy that travelled, with .whl and
# .carry): the solution notebooks graded through the judge on the GPU, each speed cell also timed
# inside the executed notebook (dev/integrity/judge_gpu.sh: `python -m grader scoreboard
# 04_attention --in-notebook`), then the gpu-marked tests (the C++ references right, every C++
# mistake caught). The scoreboard comes back as $OUT/scoreboard.json, the logs as $OUT/*.log.
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
cp results/scoreboard.json "$OUT/"                    # chapter 04 is merged into the repo's scoreboard
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  date -u; } > "$OUT/env.txt" 2>&1
timeout "${NB_S:-360}" bash dev/integrity/judge_gpu.sh "$OUT" 04_attention 2>&1 | tee "$OUT/notebooks.log" | tail -40
source .carry/dev_env.sh
GRADER_TEST_GPU=1 timeout "${TEST_S:-120}" python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_ch04_attention.py > "$OUT/gputests.log" 2>&1
echo "gpu tests rc=$?"
tail -15 "$OUT/gputests.log"
