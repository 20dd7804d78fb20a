"""Every untouched lesson, Run All, as a learner without a GPU sees it (issue 32).

Each released lesson (``course/*/*.ipynb``, found by glob: a new lesson is covered without editing
this file) is executed top to bottom with nbclient in a fresh kernel, in Numba's CUDA simulator
(conftest.py), exactly as it is released: no exercise filled in. Every cell runs (errors allowed, as
Run All does in the course's lab, where every cell from the first exercise on carries the
``raises-exception`` tag). Then, for the whole notebook:

* no error output with a multi-line traceback: the grader's verdicts (``CheckFailed``,
  ``RubricFailed``, a stub's ``not implemented yet``) render as one line; anything longer is a crash
  a learner should never see;
* no ``NameError`` (a later cell using a name only the solution defines) and no bare
  ``NotImplementedError`` with an empty message (a stub called by a demonstration cell);

and for every graded cell (nbgrader ``grade: true``):

* it produced output (unless its tests are all hidden: a released cell of assignments and
  definitions only has nothing to say), and that output is a verdict: a one-line error or printed text, saying "not
  implemented yet" (a stub, Python or ``// YOUR CODE HERE``) or "not graded" (a speed or correctness
  cell this machine cannot run, e.g. "speed not graded: no GPU"). Any other verdict on an untouched
  lesson ("values are wrong", "no element was written") means a stub ran as if it were an answer:
  on a GPU that is a launched stub, which ``grader.cuda.module.StubLaunch`` forbids for ``%%cuda``
  cells.

Why every lesson, whole, rather than a cheaper subset: the bugs this catches live in the cells
between the exercises (a demonstration that calls the learner's launch, a picture that needs the
solution's names), so only Run All finds them. The cost on a 2-core machine with a warm compile
cache (tests/test_notebooks.py runs first and compiles the same ``%%cuda`` cells) is about 5–20 s a
lesson. To keep CI's wall time down, the selected lessons run ``GRADER_UNTOUCHED_JOBS`` at a time
(default: 2, or 1 on a single core) in a background pool started when the first test needs it; each
test waits only for its own lesson. The per-lesson seconds are printed at the end of the run, and
written as JSON to ``$GRADER_UNTOUCHED_TIMES`` when that is set.

On a GPU machine, ``GRADER_TEST_GPU=1`` (conftest.py) runs the same lessons on the GPU instead of the
simulator: the same rules then catch what only a GPU shows, such as a stub kernel launched anyway
(Numba ignores a kernel's ``raise`` unless it is compiled with ``debug=True``, so the check reports
"never written" instead of "not implemented yet").
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "course").glob("*/*.ipynb"))
CELL_TIMEOUT = 600                  # seconds for one cell (compiling a CUTLASS cell cold takes ~1 min)
VERDICT = re.compile(r"not implemented yet|not graded", re.I)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def execute(path: Path) -> tuple[nbformat.NotebookNode, float]:
    """Run All on a copy of the released lesson, in its own folder; the outputs and the seconds."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    t0 = time.monotonic()
    # the kernel imports this checkout's grader, in the simulator; its own log (a warning about TCP) is not ours
    client.execute(env=env, stderr=subprocess.DEVNULL)
    return nb, time.monotonic() - t0


def runs_a_check(source: str) -> bool:
    """Whether a graded cell, as released, calls anything (a check, an assert): a cell whose tests are
    all hidden (only assignments and definitions are left for the learner) has nothing to say untouched."""
    import ast

    from IPython.core.inputtransformer2 import TransformerManager

    try:
        tree = ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return True
    quiet = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)
    return any(not isinstance(node, quiet) for node in tree.body)


def problems(nb) -> list[str]:
    """What a learner should not see in the executed untouched lesson, one line each."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cid = cell.get("id", "?")
        graded = cell.get("metadata", {}).get("nbgrader", {}).get("grade", False)
        shown = []                                      # what the learner reads in this cell
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                lines = [ANSI.sub("", t) for t in out.get("traceback", [])]
                text = "\n".join(lines)
                if out.ename == "NameError":
                    found.append(f"{cid}: NameError: {out.evalue}")
                elif out.ename == "NotImplementedError" and not out.evalue.strip():
                    found.append(f"{cid}: a bare NotImplementedError (a stub reached from a cell that is not a check)")
                elif len(lines) > 1:                    # a verdict renders as one entry (errors.py)
                    found.append(f"{cid}: a {len(lines)}-line traceback: {out.ename}: {out.evalue.splitlines()[0][:120] if out.evalue else ''}")
                shown.append(text)
            elif out.output_type == "stream":
                shown.append(out.get("text", ""))
            elif out.output_type in ("execute_result", "display_data"):
                shown.append(out.get("data", {}).get("text/plain", ""))
        if graded and runs_a_check(cell.source):
            said = "\n".join(shown)
            if not said.strip():
                found.append(f"{cid} (graded): no output, so no verdict")
            elif not VERDICT.search(said):
                first = said.strip().splitlines()[0][:160]
                found.append(f"{cid} (graded): not a 'not implemented yet' / 'not graded' verdict: {first!r}")
    return found


# ------------------------------------------------------------------ running the lessons, a few at a time
_times: dict[str, float] = {}


@pytest.fixture(scope="module")
def runs(request):
    """lesson name -> Future of (executed notebook, seconds), for the lessons this session selected."""
    selected = [item.callspec.params["lesson"] for item in request.session.items
                if getattr(item, "originalname", "") == "test_untouched_lesson" and hasattr(item, "callspec")]
    cores = os.cpu_count() or 1
    jobs = max(1, int(os.environ.get("GRADER_UNTOUCHED_JOBS", "2" if cores > 1 else "1")))
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="untouched")
    futures = {_name(p): pool.submit(execute, p) for p in selected}
    try:
        yield futures
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _report(request, jobs)


def _report(request, jobs: int) -> None:
    if not _times:
        return
    lines = [f"untouched lessons, Run All in the simulator ({jobs} at a time), seconds each:"]
    lines += [f"  {secs:6.1f}  {name}" for name, secs in sorted(_times.items())]
    lines.append(f"  {sum(_times.values()):6.1f}  total ({len(_times)} lessons)")
    where = os.environ.get("GRADER_UNTOUCHED_TIMES")
    if where:
        Path(where).write_text(json.dumps({"jobs": jobs, "seconds": _times}, indent=1))
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("\n" + "\n".join(lines))


# ------------------------------------------------------------------ the test
@pytest.mark.parametrize("lesson", LESSONS, ids=_name)
def test_untouched_lesson(lesson, runs):
    nb, seconds = runs[_name(lesson)].result()
    _times[_name(lesson)] = seconds
    graded = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    assert graded, f"{_name(lesson)} has no graded cell"
    assert all(c.get("execution_count") for c in nb.cells if c.cell_type == "code"), "a cell did not run"
    found = problems(nb)
    assert not found, f"{_name(lesson)}, untouched, Run All:\n" + "\n".join(found)


def test_the_rules_catch_what_they_must():
    """The checks above on hand-made outputs: each kind of problem is found, a verdict is not."""
    def cell(outputs, graded=False, cid="c", source="grader.check(launch, P.problem)"):
        c = nbformat.v4.new_code_cell(source, metadata={"nbgrader": {"grade": graded}} if graded else {})
        c.id, c.outputs, c.execution_count = cid, [nbformat.from_dict(o) for o in outputs], 1
        return c

    def err(ename, evalue, tb):
        return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": tb}

    def text(s):
        return {"output_type": "stream", "name": "stdout", "text": s}

    verdict = err("CheckFailed", "sum failed at n=1:\nnot implemented yet: replace …",
                  ["\x1b[31mCheckFailed\x1b[0m: sum failed at n=1:\nnot implemented yet: replace …"])
    ok = nbformat.v4.new_notebook(cells=[cell([verdict], graded=True, cid="a"),
                                         cell([text("sum: speed not graded: no GPU (0 of 2 points).")], graded=True, cid="b"),
                                         cell([verdict], cid="c"),
                                         cell([], graded=True, cid="d", source="_rng = np.random.default_rng()")])
    assert problems(ok) == []
    bad = {
        "traceback": cell([err("ValueError", "boom", ["Traceback …", "  File x", "ValueError: boom"])]),
        "NameError": cell([err("NameError", "name 'launch_v1' is not defined", ["NameError: …"])]),
        "bare NotImplementedError": cell([err("NotImplementedError", "", ["NotImplementedError"])]),
        "no output": cell([], graded=True),
        "launched stub": cell([err("CheckFailed", "values are wrong", ["CheckFailed: values are wrong"])], graded=True),
    }
    for why, c in bad.items():
        assert problems(nbformat.v4.new_notebook(cells=[c])), why
