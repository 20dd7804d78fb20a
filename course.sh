#!/usr/bin/env bash
# Set up the course in ./.venv and open it in JupyterLab, or run the tests.
#   ./course.sh              set up (first time), then open course/ in JupyterLab (the learner's lab)
#   ./course.sh lab          the same
#   ./course.sh instructor   set up, then open the repository in JupyterLab with nbgrader's
#                            instructor tools (Nbgrader menu, Create Assignment, formgrader)
#   ./course.sh test         set up (first time), then run the test suite (what CI runs)
#   ./course.sh setup        set up only
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
VENV=.venv

setup() {
    if [ ! -x "$VENV/bin/python" ]; then
        "$PY" -m venv "$VENV"
    fi
    local stamp="$VENV/.installed" want
    want=$(cat pyproject.toml | sha256sum | cut -c1-16)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        "$VENV/bin/python" -m pip install -q --upgrade pip
        local extras="test,cluster"      # cluster: Dask, for tests/test_dask_grading.py
        # torch is only for the library peers on a GPU; a CPU machine never downloads it
        if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
            extras="test,cluster,gpu"
        fi
        "$VENV/bin/python" -m pip install -q -e ".[$extras]"
        echo "$want" > "$stamp"
    fi
    "$VENV/bin/python" -m grader doctor || true
}

case "${1:-lab}" in
    setup) setup ;;
    test)
        setup
        shift || true
        exec "$VENV/bin/python" -m pytest -q "$@" ;;
    lab)
        setup
        shift || true
        exec "$VENV/bin/python" -m grader.lab learner course/ "$@" ;;
    instructor)
        setup
        shift || true
        exec "$VENV/bin/python" -m grader.lab instructor . "$@" ;;
    *) echo "usage: ./course.sh [lab|instructor|test|setup]"; exit 2 ;;
esac
