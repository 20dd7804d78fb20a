"""The first ten minutes (issue 34): the README's first screen, ./course.sh's grammar, `grade` outside
a clone, doctor's rows, and the hosted notebook's first cell run as a fresh environment runs it.

The hosted cell (README, "On Colab or Kaggle") is run as written but for its three variables: the
course comes from a git repository holding this working tree's files (a ``file://`` URL, a branch:
no release tag needed), the notebook graded is lesson 01.01's reference solution. It runs in a
fresh virtual environment outside any clone, whose only link to this machine's packages is a
``.pth`` file naming the course environment's site-packages (so nothing is downloaded but the
build backend, and nothing of the course comes from there: the package is pip-installed from the
clone, not editable). The points table must give every correctness point.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from grader import cli, doctor, paths
from grader.judge.sandbox import Bwrap
from tests.test_pip_install import _repository_files

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
FIRST_LESSON = "course/01_elementwise/01_threads_and_blocks.ipynb"
SOLUTION = "solutions/01_elementwise/01_threads_and_blocks.ipynb"
MARK = "<!-- the hosted first cell"


# ------------------------------------------------------------------ the README's first screen
def test_the_first_screen_names_the_first_lesson_and_the_two_commands():
    first = "\n".join(README.splitlines()[:25])
    assert "./course.sh " in first and "./course.sh test" in first
    assert re.search(r"start here", first, re.I) and FIRST_LESSON in first
    assert (ROOT / FIRST_LESSON).is_file()


def test_the_readme_keeps_its_pointers():
    for link in ("docs/GRADING.md", "results/README.md", "**What is caught**", "**What is not**"):
        assert link in README, link
    assert (ROOT / "results" / "README.md").is_file()


# ------------------------------------------------------------------ ./course.sh's grammar
@pytest.fixture
def fake_course(tmp_path):
    """course.sh beside a set-up .venv whose python prints its arguments (nothing is installed)."""
    shutil.copy(ROOT / "course.sh", tmp_path / "course.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    py = tmp_path / ".venv" / "bin" / "python"
    py.parent.mkdir(parents=True)
    py.write_text('#!/bin/sh\necho "python $*"\n')
    py.chmod(py.stat().st_mode | stat.S_IEXEC)
    stamp = subprocess.run(["sha256sum", str(tmp_path / "pyproject.toml")], capture_output=True, text=True).stdout[:16]
    (tmp_path / ".venv" / ".installed").write_text(stamp + "\n")

    def run(*args):
        return subprocess.run(["bash", str(tmp_path / "course.sh"), *args], capture_output=True, text=True, timeout=60)
    return run


def test_course_sh_without_a_mode_passes_every_argument_to_jupyter(fake_course):
    for args in (["--port", "9000"], ["--allow-root"], []):
        r = fake_course(*args)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[-1] == " ".join(["python -m grader.lab learner course/", *args]).strip()
    r = fake_course("lab", "--port", "9000")
    assert r.stdout.splitlines()[-1] == "python -m grader.lab learner course/ --port 9000"
    r = fake_course("instructor", "--no-browser")
    assert r.stdout.splitlines()[-1] == "python -m grader.lab instructor . --no-browser"


def test_course_sh_modes_and_usage(fake_course):
    r = fake_course("help")
    assert r.returncode == 0 and "usage: ./course.sh [MODE]" in r.stdout and "--port 9000" in r.stdout
    r = fake_course("tets")
    assert r.returncode == 2 and "'tets' is not a mode" in r.stdout and "usage:" in r.stdout
    r = fake_course("test")
    assert "the whole test suite takes 20-45 minutes" in r.stdout and r.stdout.splitlines()[-1] == "python -m pytest -q"
    r = fake_course("test", "tests/test_lab.py")
    assert "minutes" not in r.stdout and r.stdout.splitlines()[-1] == "python -m pytest -q tests/test_lab.py"
    r = fake_course("setup")
    assert r.stdout.splitlines() == ["python -m grader doctor"]


# ------------------------------------------------------------------ grade: the course, the sandbox, in one line
def test_grade_says_in_one_line_when_it_finds_no_course(tmp_path, monkeypatch, capsys):
    nb = tmp_path / "01_threads_and_blocks.ipynb"
    shutil.copy(ROOT / FIRST_LESSON, nb)
    monkeypatch.setattr(paths, "PACKAGE", tmp_path / "site-packages" / "grader")    # as pip installs it
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(paths.COURSE_ENV, raising=False)
    assert cli.main(["grade", str(nb), "--sandbox", "none"]) == 2
    out = capsys.readouterr().out.strip()
    assert out == f"{nb}: {paths.NOT_FOUND}" and "--course DIR" in out
    assert cli.main(["grade", str(nb), "--sandbox", "none", "--course", str(tmp_path)]) == 2
    assert "no solutions/ and course/ folders there" in capsys.readouterr().out


def test_the_course_is_found_from_the_notebook(tmp_path, monkeypatch):
    monkeypatch.delenv(paths.COURSE_ENV, raising=False)
    clone = tmp_path / "clone"
    (clone / "solutions").mkdir(parents=True)
    (clone / "course" / "01_elementwise").mkdir(parents=True)
    nb = clone / "course" / "01_elementwise" / "x.ipynb"
    nb.write_text("{}")
    assert cli.course_for(nb, None) == (clone.resolve(), "")
    assert cli.course_for(tmp_path / "elsewhere.ipynb", clone) == (clone.resolve(), "")
    assert cli.course_for(nb, None, named=str(ROOT))[0] == ROOT.resolve()      # $GRADER_COURSE wins


def test_bwrap_asked_for_but_missing_is_one_line(tmp_path):
    env = {**os.environ, "GRADER_BWRAP": str(tmp_path / "no-bwrap"), "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "grader", "grade", FIRST_LESSON, "--sandbox", "bwrap"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "bubblewrap is not installed" in lines[0] and "--sandbox none" in lines[0]


# ------------------------------------------------------------------ doctor's rows
def test_doctor_compares_the_driver_with_the_cuda_wheels():
    wheels = (13, "cuda-bindings 13.4.4, nvidia-cuda-nvrtc 13.5.37")
    item, ok, found, fix = doctor.driver_row(1, "CUDA 12.4", wheels)
    assert ok is False and "CUDA 13" in found and "580" in fix
    assert doctor.driver_row(1, "CUDA 13.0", wheels)[1] is True
    assert doctor.driver_row(1, "CUDA 12.8", (12, "nvidia-cuda-nvrtc-cu12 12.8.93"))[1] is True
    assert doctor.driver_row(0, None, wheels)[1] is True                     # no GPU: no driver needed
    assert doctor.driver_row(1, None, wheels)[1] is False


def test_doctor_has_rows_for_the_sandbox_and_the_user(monkeypatch, tmp_path):
    rows = {r[0]: r for r in doctor.checks()}
    assert {"sandbox (bubblewrap)", "user", "driver"} <= set(rows)
    monkeypatch.setenv("GRADER_BWRAP", str(tmp_path / "no-bwrap"))
    item, ok, found, fix = doctor.sandbox_row()
    assert ok is None and "without a sandbox" in found and "apt-get install bubblewrap" in fix
    text, _ = doctor.report()
    assert "\nnote sandbox (bubblewrap)" in "\n" + text


# ------------------------------------------------------------------ the hosted first cell, in a fresh environment
def hosted_cell() -> str:
    block = README[README.index(MARK):]
    return block[block.index("```python\n") + len("```python\n"):block.index("\n```", block.index("```python\n"))]


def test_the_hosted_cell_has_its_three_variables_first():
    cell = hosted_cell()
    head = [ln.split("=")[0].strip() for ln in cell.splitlines()[:3]]
    assert head == ["COURSE_REPO", "COURSE_RELEASE", "LESSON"]
    assert re.search(r'^COURSE_RELEASE = "v\d+\.\d+\.\d+"', cell, re.M)
    assert re.search(rf'^LESSON = "{FIRST_LESSON}"', cell, re.M)


def _snapshot_repository(dst: Path, branch: str) -> None:
    """A git repository holding this working tree's files (as a clone of it would), on ``branch``."""
    for rel in _repository_files():
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dst / rel)
    git = ["git", "-C", str(dst), "-c", "user.name=first-run", "-c", "user.email=first-run@localhost"]
    for args in (["init", "-q", "-b", branch], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run(git + args, check=True, capture_output=True)


def _fresh_environment(where: Path) -> Path:
    """A new virtual environment that sees the course environment's packages through a .pth file:
    their folder, and the import hooks of its own .pth files (numba-cuda's ``numba.cuda``
    redirector), but not an editable install of the course (``__editable__.*``); and the NVIDIA
    wheels' libraries (``nvidia/``) through a link, where cuda-pathfinder looks for them."""
    venv.EnvBuilder(with_pip=True, clear=True).create(where)
    python = where / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    theirs = Path(sysconfig.get_paths()["purelib"]).resolve()       # a linked .venv: its real folder
    hooks = [line for pth in sorted(theirs.glob("*.pth")) if not pth.name.startswith("__editable__")
             for line in pth.read_text().splitlines() if line.startswith("import ")]
    (Path(site) / "course_dependencies.pth").write_text("\n".join([str(theirs), *hooks]) + "\n")
    if (theirs / "nvidia").is_dir():        # cuda-pathfinder finds NVRTC in the environment's own site-packages
        (Path(site) / "nvidia").symlink_to(theirs / "nvidia", target_is_directory=True)
    return python


def test_the_hosted_cell_grades_a_lesson_in_a_fresh_environment(tmp_path):
    source, branch = tmp_path / "published", "first-run"
    _snapshot_repository(source, branch)
    python = _fresh_environment(tmp_path / "env")
    sandbox = "bwrap" if Bwrap().available() is None and os.environ.get("GRADER_SANDBOX") != "none" else "none"
    cell = hosted_cell()
    cell = re.sub(r'^COURSE_REPO = "[^"]*"', f'COURSE_REPO = "file://{source}"', cell, flags=re.M)
    cell = re.sub(r'^COURSE_RELEASE = "[^"]*"', f'COURSE_RELEASE = "{branch}"', cell, flags=re.M)
    cell = re.sub(r'^LESSON = "[^"]*"', f'LESSON = "{SOLUTION}"', cell, flags=re.M)
    assert cell.count('"--sandbox", "none"') == 1
    cell = cell.replace('"--sandbox", "none"', f'"--sandbox", "{sandbox}"')
    # then, in the same process, what a lesson's first cell does
    cell += "\nimport grader\nprint(grader.mode())\nprint('GRADER_AT', grader.__file__)\n"
    learner = tmp_path / "learner"          # the hosted notebook's folder: no clone, no course here
    learner.mkdir()
    (learner / "first_cell.py").write_text(cell)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", paths.COURSE_ENV)}
    run = subprocess.run([str(python), "first_cell.py"], cwd=learner, env=env, capture_output=True, text=True,
                         timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    clone = learner / "gpu-kernel-course"
    assert (clone / "solutions").is_dir() and (clone / ".git").is_dir()
    for cell_id, points in (("test_vector_add_visible", 2), ("test_vector_add_hidden", 2)):
        assert re.search(rf"^{cell_id}\s+{points}\.00 / {points}$", out, re.M), out[-4000:]
    assert re.search(r"^total\s+\d+\.\d\d / 5$", out, re.M)
    installed = Path(out.split("GRADER_AT", 1)[1].split()[0])
    assert (tmp_path / "env") in installed.parents, f"grader came from {installed}, not the new environment"
    assert "Traceback" not in out and "BuildBackendWarning" not in out
