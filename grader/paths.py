"""Where the course's folders are: the checkout (solutions/, course/, results/) and its chapters.

The package may be installed apart from the course (``pip install`` of a clone, as on Colab): then
the course folder is found from the notebook being graded (:func:`find_course`), or named by
``python -m grader grade --course DIR``, which sets ``$GRADER_COURSE`` for :func:`repo_root`.
"""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHAPTERS = ["01_elementwise", "02_reduce", "03_gemm", "04_attention", "05_hopper_blackwell"]
COURSE_ENV = "GRADER_COURSE"
NOT_FOUND = ("cannot find the course folder (the one holding solutions/ and course/): run from your clone "
             "of the course, or pass --course DIR")


def is_course(folder: Path) -> bool:
    """A course folder holds the instructor's solutions/ and the learner's course/."""
    return (folder / "solutions").is_dir() and (folder / "course").is_dir()


def find_course(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` (a notebook or a folder) that is a course folder."""
    start = Path(start).resolve()
    for cand in (start, *start.parents):
        if cand.is_dir() and is_course(cand):
            return cand
    return None


def repo_root() -> Path:
    """The course checkout: ``$GRADER_COURSE`` when set, else the package's parent (a clone or an
    editable install), else the current folder or one above it."""
    named = os.environ.get(COURSE_ENV)
    if named:
        if (Path(named) / "solutions").is_dir():
            return Path(named).resolve()
        raise FileNotFoundError(f"{COURSE_ENV}={named} holds no solutions/ folder: {NOT_FOUND}")
    if (PACKAGE.parent / "solutions").is_dir():
        return PACKAGE.parent
    found = find_course(Path.cwd())
    if found is not None:
        return found
    if (Path.cwd() / "solutions").is_dir():
        return Path.cwd()
    raise FileNotFoundError(NOT_FOUND)


def results_dir(root: Path | None = None) -> Path:
    """results/ of the checkout (beside the package: it is there in a sandbox too, read-only)."""
    return (root or PACKAGE.parent) / "results"


def chapters_in(root: Path) -> list[str]:
    """The chapters of CHAPTERS that have solution notebooks."""
    return [c for c in CHAPTERS if any((root / "solutions" / c).glob("*.ipynb"))]


def shown(path: Path | str, course: Path | str) -> str:
    """``path`` as a page shows it, never with the machine's absolute folders: relative to the course
    folder where it lies inside it, else relative to the grader's checkout (saying so), else its
    file name."""
    path = Path(path).resolve()
    try:
        return path.relative_to(Path(course).resolve()).as_posix()
    except ValueError:
        pass
    try:
        return f"{path.relative_to(PACKAGE.parent.resolve()).as_posix()} (the grader's checkout)"
    except ValueError:
        return path.name
