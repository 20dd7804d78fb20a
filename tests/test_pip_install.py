"""The course installs with plain pip, as on a free cloud GPU (Colab-like: only pip there).

A fresh virtual environment (nothing in it but pip), ``pip install <a copy of the repository>``
(not editable: a wheel is built, so only what the package declares is installed), then the
first cell of a lesson, run from a folder outside the repository. Every file of the source's
grader/ (the C++ header, the lab settings and extension, …) must be in the installed copy.
Slow: pip installs every dependency (numba, JupyterLab, nbgrader, the CUDA wheels; not torch),
from pip's cache when the course's own set-up has just filled it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
LESSON = ROOT / "course" / "01_elementwise" / "01_threads_and_blocks.ipynb"


def _repository_files() -> list[Path]:
    """The files a clone would have: tracked plus new, not ignored (else all but build outputs)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, check=True).stdout
        return [Path(p) for p in out.decode().split("\0") if p and (ROOT / p).is_file()]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", ".nbgrader", "__pycache__", "build", "dist"}
        return [p.relative_to(ROOT) for p in ROOT.rglob("*")
                if p.is_file() and not skip.intersection(p.relative_to(ROOT).parts)]


@pytest.mark.slow
def test_plain_pip_install_runs_a_lessons_first_cell(tmp_path):
    src = tmp_path / "course-src"
    files = _repository_files()
    for rel in files:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)

    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    pip = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                          str(src)], env=base, capture_output=True, text=True)
    assert pip.returncode == 0, f"pip install failed:\n{pip.stdout[-3000:]}\n{pip.stderr[-3000:]}"

    # the lesson's first code cell (import grader, print(grader.mode())), outside the repository
    first = next(c.source for c in nbformat.read(LESSON, as_version=4).cells if c.cell_type == "code")
    assert "import grader" in first and "grader.mode()" in first
    learner = tmp_path / "learner"
    learner.mkdir()
    script = learner / "first_cell.py"
    script.write_text(first + "\nimport pathlib\nprint('GRADER_AT', pathlib.Path(grader.__file__).parent)\n")
    run = subprocess.run([str(python), str(script)], cwd=learner, env=base, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "simulator" in run.stdout or "GPU" in run.stdout, run.stdout     # grader.mode()'s line
    installed = Path(run.stdout.split("GRADER_AT", 1)[1].strip())
    assert env_dir in installed.parents, f"grader was imported from {installed}, not the new environment"

    # every source file of the package, data included, is in the installed copy
    wanted = {p.relative_to("grader") for p in files if p.parts[0] == "grader" and p.suffix != ".pyc"}
    missing = sorted(str(p) for p in wanted if not (installed / p).is_file())
    assert not missing, f"not installed (add them to [tool.setuptools.package-data]): {missing}"
    assert (installed / "include" / "course.cuh").is_file()
