#!/usr/bin/env bash
# The committed class report (docs/class_report_example/): five submissions of lesson 01.01
# (dev/report/example_class.py) graded by `python -m grader autograde` in a temporary nbgrader
# course, then `python -m grader report`; the page, its PNGs, the log and the judge's grading.json
# files (gathered into one file, class_grading.json: student -> grading.json) are copied to OUTDIR.
#
#   bash dev/report/example.sh [OUTDIR]        (default: $OUT, else docs/class_report_example)
#
# Runs from the repository root. With a GPU the speed cells are timed and the report draws them;
# without one (the simulator) it says "no GPU: speed not measured". On the device machine, first:
#   source .carry/dev_env.sh && export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap
# PYTHON picks the interpreter (default python3). FEEDBACK=1 also executes each feedback notebook
# (the report does not read them; on a GPU it adds ~30 s a student).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-${OUT:-docs/class_report_example}}
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
work=$(mktemp -d /tmp/class-report-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
log="$out/example.log"
{
  echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname)"
  "$py" -c "import grader; print('device:', grader.device.info().name)"
  "$py" dev/report/example_class.py "$work/course"
  feedback=--no-feedback
  [ "${FEEDBACK:-0}" = 1 ] && feedback=
  start=$SECONDS
  "$py" -m grader autograde 01_elementwise --course "$work/course" $feedback
  echo "autograde: $((SECONDS - start)) s wall"
  "$py" -m grader report 01_elementwise --course "$work/course" --out "$work/report"
} 2>&1 | grep -v -e "SAWarning" -e "for notebook in submission" -e "return \[x for x in self._base_cells" | tee "$log"
cp "$work"/report/report.html "$work"/report/*.png "$out"/
"$py" - "$work/course/autograded" "$out/class_grading.json" <<'PY'
import json, sys
from pathlib import Path
found = sorted(Path(sys.argv[1]).glob("*/01_elementwise/grading.json"))
Path(sys.argv[2]).write_text(json.dumps({p.parent.parent.name: json.loads(p.read_text()) for p in found}, indent=1))
PY
echo "copied to $out: $(cd "$out" && ls | tr '\n' ' ')" | tee -a "$log"
