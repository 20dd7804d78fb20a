#!/usr/bin/env bash
# One device call (repo root, with .whl and .carry): the launch functions' host time against their
# kernels' GPU time, in this process and inside the judge's sandbox (dev/integrity/launch_overhead.py).
set -u
source .carry/dev_env.sh >/dev/null || exit 1
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap
python3 dev/integrity/launch_overhead.py
python3 dev/integrity/launch_overhead.py --in-sandbox
