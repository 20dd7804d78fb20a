#!/usr/bin/env bash
# Set up the course in ./.venv and open it in JupyterLab, or run the tests. `./course.sh help` says how.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
VENV=.venv

usage() {
    cat <<'EOF'
usage: ./course.sh [MODE] [ARGUMENTS]

  ./course.sh                 set up .venv (the first time), then open course/ in JupyterLab
  ./course.sh lab             the same (the learner's lab)
  ./course.sh instructor      the repository in JupyterLab with nbgrader's instructor tools
  ./course.sh test [ARGS]     set up, then the test suite (what CI runs); ARGS go to pytest
  ./course.sh setup           set up only, then what `python -m grader doctor` finds on this machine
  ./course.sh help            this text

MODE is one of the words above. Without one, every argument goes to Jupyter and the learner's lab
opens: ./course.sh --port 9000 --no-browser  is  ./course.sh lab --port 9000 --no-browser
(./course.sh lab --help lists Jupyter's options).
As root (Docker, a cloud VM) the lab adds Jupyter's --allow-root itself, and says so.
EOF
}

setup() {
    if [ ! -x "$VENV/bin/python" ]; then
        echo "course.sh: first set-up: a virtual environment in $VENV, then pip installs the course's packages"
        echo "           (numba, JupyterLab, nbgrader, the CUDA compiler wheels: ~1.2 GB, about 2 minutes)"
        "$PY" -m venv "$VENV"
    fi
    local stamp="$VENV/.installed" want
    want=$(cat pyproject.toml | sha256sum | cut -c1-16)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
        local extras="test,cluster"      # cluster: Dask, for tests/test_dask_grading.py
        # torch is only for the library peers on a GPU; a CPU machine never downloads it
        if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
            extras="test,cluster,gpu"
        fi
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[$extras]"
        echo "$want" > "$stamp"
    fi
    "$VENV/bin/python" -m grader doctor || true
}

mode=lab
case "${1:-}" in
    lab|instructor|test|setup) mode=$1; shift ;;
    help|-h|--help) usage; exit 0 ;;
    "") ;;
    -*) ;;                                  # Jupyter's options, for the learner's lab
    *) echo "course.sh: '$1' is not a mode (lab, instructor, test, setup, help) nor a Jupyter option"; echo
       usage; exit 2 ;;
esac

case "$mode" in
    setup) setup ;;
    test)
        setup
        if [ $# -eq 0 ]; then
            # measured on 2 CPU cores without a GPU: 44 min on 2026-11-28 with other suites beside it
            echo "course.sh: the whole test suite takes 20-45 minutes on 2 CPU cores without a GPU" \
                 "(./course.sh test tests/test_lab.py runs one file)"
        fi
        exec "$VENV/bin/python" -m pytest -q "$@" ;;
    lab)
        setup
        exec "$VENV/bin/python" -m grader.lab learner course/ "$@" ;;
    instructor)
        setup
        exec "$VENV/bin/python" -m grader.lab instructor . "$@" ;;
esac
