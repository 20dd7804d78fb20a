#!/usr/bin/env bash
# The judge on a GPU machine (run through the device tool, from the repo root, with .whl and .carry):
#   1. the sandbox sees the GPU (bubblewrap carried as .carry/bwrap/bwrap: the device has none);
#   2. the scoreboard of the given chapters through the judge, with --in-notebook: every speed cell
#      timed by the judge and, in the same run, inside the executed notebook, recorded side by side.
#      IN_NOTEBOOK=0: without it, the notebook run as a student's grading runs it (GRADER_RUNNER=1:
#      demonstrations timed briefly, graded cells run once): judge_seconds are then what grading costs.
#   The chapters are graded in one process; the scoreboard prints each chapter's wall as it ends.
# Usage: [IN_NOTEBOOK=0] bash dev/integrity/judge_gpu.sh OUTDIR CHAPTER...
set -u
out=$1; shift
source .carry/dev_env.sh || exit 1
export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap
python3 - <<'PY'
import sys, subprocess, tempfile
from pathlib import Path
from grader.judge.sandbox import choose, sandbox_env
from grader.judge.bounds import default_bounds
box = choose("bwrap")
with tempfile.TemporaryDirectory() as tmp:
    code = "import torch, numba.cuda as c; print('in the sandbox:', torch.cuda.get_device_name(), c.get_current_device().name)"
    r = subprocess.run(box.command([sys.executable, "-c", code], Path(tmp), sandbox_env(), default_bounds(60), gpu=True), capture_output=True, text=True)
    print(r.stdout.strip(), r.stderr.strip()[-500:])
PY
mode=--in-notebook
[ "${IN_NOTEBOOK:-1}" = 0 ] && mode=
# the bytecode pip leaves with an install: the carried wheels go in with --no-compile and the image's
# torch has none, and a sandbox cannot write it (every runner would compile them from source)
python3 -m compileall -q -j 16 /tmp/site "$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')" >/dev/null 2>&1
# one process for all the chapters, as a student's course is graded: the compiled cells of every
# notebook are built on the CPU (grader.judge.build.BuildAhead) while the GPU grades the first ones
/usr/bin/time -f "$*: %e s wall" python3 -m grader scoreboard "$@" $mode --out "$out" 2>&1
