"""The lessons' compiled cells in tests: a %%cuda cell built as the magic builds it, and a graded
SASS-rubric cell of a solution notebook run against a module. Shared by the chapter 04–05 tests."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

from grader.notebooks import cell_source, run_source
from tests.conftest import ROOT, solution


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


def check_in_own_process(setup: str, checks: str, timeout: int = 240) -> str:
    """Run ``setup`` (Python lines), then ``checks`` (lines that call ``check``) in a fresh process --
    a wrong kernel may trap, and a trap loses the CUDA context -- and return its ``RESULT:`` line:
    "RESULT: passed" or "RESULT: <the CheckFailed message on one line>" (else the output's tail)."""
    script = (f"import os, sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom grader.check import CheckFailed, check\n"
              + textwrap.dedent(setup).strip() + "\ntry:\n" + textwrap.indent(textwrap.dedent(checks).strip(), "    ")
              + '\n    print("RESULT: passed")\nexcept CheckFailed as e:\n    print("RESULT:", str(e).replace(chr(10), " | "))\n'
              + "sys.stdout.flush()\nos._exit(0)\n")
    env = {**os.environ, "GRADER_GPU_TIMEOUT": "10", "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    return next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT:")), r.stdout[-500:] + r.stderr[-1500:])
