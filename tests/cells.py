"""The lessons' compiled cells in tests: a %%cuda cell built as the magic builds it, and a graded
SASS-rubric cell of a solution notebook run against a module. Shared by the chapter 04–05 tests."""
from __future__ import annotations

import re

from grader.notebooks import cell_source, run_source
from tests.conftest import solution


def compile_cell(source: str, name: str | None = None, only: str | None = None):
    """A %%cuda cell's source compiled as the magic would (the GPU's arch, else the cell's --arch or
    sm_90a). ``name``: the module's name instead of the cell's; ``only``: build just that kernel."""
    ns: dict = {}
    first, _, body = source.partition("\n")
    if name:
        first = re.sub(r"^%%cuda \w+", f"%%cuda {name}", first)
    if only:
        first = re.sub(r' -k "[^"]*"', "", first) + f' -k "{only}"'
    run_source(first + "\n" + body, "cell", ns)
    return next(iter(ns.values()))


def run_rubric(chapter: str, notebook: str, cell_id: str, **modules) -> None:
    """Run the solution's rubric cell ``cell_id`` with ``modules`` bound to the names it reads."""
    from grader.cuda import sass

    code = compile(cell_source(solution(chapter, notebook), cell_id), cell_id, "exec")
    exec(code, {"sass": sass, **modules})
