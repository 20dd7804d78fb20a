"""Authoring aid: build an nbgrader source notebook from Python.

The .ipynb under solutions/ is the single source of truth; this only saves
hand-writing nbgrader's cell metadata. Typical use in a throwaway script:

    from tools.nbbuild import md, code, solution, tests, write
    write("solutions/01_elementwise/01_x.ipynb", [md("# Title"), solution("...", "v1"), ...])

Cell kinds:
  md / code      read-only markdown / ordinary code the learner may run and edit
  solution       an exercise cell: BEGIN/END SOLUTION regions become stubs
  tests          a locked, autograded cell worth ``points`` (may hold HIDDEN TESTS)
"""
from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

_count = 0


def _meta(grade_id: str, *, grade=False, solution=False, locked=False, points=None) -> dict:
    m = {"grade": grade, "solution": solution, "locked": locked, "grade_id": grade_id,
         "schema_version": 3, "task": False}
    if points is not None:
        m["points"] = points
    return {"nbgrader": m}


def _next(prefix: str) -> str:
    global _count
    _count += 1
    return f"{prefix}-{_count:02d}"


def md(text: str, grade_id: str | None = None):
    gid = grade_id or _next("md")
    return new_markdown_cell(text.strip("\n"), metadata=_meta(gid, locked=True), id=gid)


def code(src: str, grade_id: str | None = None):
    gid = grade_id or _next("code")
    return new_code_cell(src.strip("\n"), id=gid)


def solution(src: str, grade_id: str):
    return new_code_cell(src.strip("\n"), metadata=_meta(grade_id, solution=True), id=grade_id)


def tests(src: str, grade_id: str, points: float):
    return new_code_cell(src.strip("\n"), metadata=_meta(grade_id, grade=True, locked=True, points=points),
                         id=grade_id)


def write(path: str, cells: list) -> None:
    global _count
    from grader.lesson_metadata import normalize

    nb = new_notebook(cells=cells)
    normalize(nb)          # kernelspec, language_info, raises-exception tags (as the release does)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    _count = 0


def write_chapter(root, chapter: str, lessons: list) -> None:
    """Write ``solutions/<chapter>/`` from lesson modules (each has NAME and cells()); a generator
    script (tools/make_ch0*.py) calls this with its chapter's lessons."""
    from pathlib import Path

    out = Path(root) / "solutions" / chapter
    out.mkdir(parents=True, exist_ok=True)
    for lesson in lessons:
        write(str(out / lesson.NAME), lesson.cells())
        print("wrote", out / lesson.NAME)
