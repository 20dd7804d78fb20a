"""One untouched lesson of each chapter, Run All in the learner's JupyterLab, in headless Chromium (issue 32).

What a learner who has written nothing yet sees after Run → Run All Cells: every cell ran, no cell
shows a Python traceback (the grader's verdicts are one red line) or a ``NameError``, and every graded
cell shows its verdict — "not implemented yet" for a stub, "not graded" where this machine has no GPU.
tests/test_untouched.py checks the same for every lesson through nbclient; this test checks that the
lab shows it: the kernel, the ``raises-exception`` tags that keep Run All going, the rendered outputs.

The lessons are short ones, one per chapter, and 05.09 (Blackwell), which issue 32 names. The lab,
the browser and the helpers are tests/test_browser.py's (its fixtures are imported, not copied), so
this file needs what that one needs and skips or fails the same way (``GRADER_REQUIRE_BROWSER=1``).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.test_browser import (CHROMEDRIVER, CHROMIUM, MISSING, ROOT, browser, code_cells, grade_id,  # noqa: F401
                                learner_lab, lesson_cells, open_notebook, run_all, scroll_to, selenium, shoot,
                                shots)
from tests.test_untouched import VERDICT, runs_a_check

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER and selenium), reason=MISSING)]

LESSONS = [                                  # one short lesson per chapter, and the one the issue names
    "01_elementwise/01_threads_and_blocks.ipynb",
    "02_reduce/02_warps.ipynb",
    "03_gemm/03_wmma.ipynb",
    "04_attention/01_naive_attention.ipynb",
    "05_hopper_blackwell/09_blackwell.ipynb",
]
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|Cell In\[\d+\]|^-{20,}", re.M)


@pytest.fixture(scope="module", autouse=True)
def this_checkout_first():
    """The lab's kernels import this checkout's grader (the lab inherits the environment)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
        yield


def test_every_chapter_has_its_lesson_here():
    chapters = sorted(p.name for p in (ROOT / "course").iterdir() if p.is_dir() and list(p.glob("*.ipynb")))
    assert sorted({lesson.split("/")[0] for lesson in LESSONS}) == chapters
    assert all((ROOT / "course" / lesson).exists() for lesson in LESSONS)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: Path(p).stem)
def test_untouched_lesson_runs_all_to_its_verdicts(browser, learner_lab, shots, lesson):  # noqa: F811
    url, token, course, _ = learner_lab
    cells = lesson_cells(course / lesson)
    open_notebook(browser, url, token, lesson)
    state = run_all(browser, expect_cells=len(cells), timeout=600)

    wrong = []
    for i, (cell, seen) in enumerate(zip(cells, state)):
        where = grade_id(cell) or cell.get("id", f"cell {i}")
        for error in seen["errors"]:
            last = error.strip().splitlines()[-1][:160] if error.strip() else ""
            if "NameError" in error:
                wrong.append(f"{where}: {next(l for l in error.splitlines()[::-1] if 'NameError' in l).strip()[:160]}")
            elif TRACEBACK.search(error):
                wrong.append(f"{where}: a traceback ending {last!r}")
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade") and runs_a_check(cell.source):
            if not VERDICT.search(seen["text"]):
                wrong.append(f"{where} (graded): no 'not implemented yet' / 'not graded' verdict: {seen['text'].strip()[:160]!r}")
    graded = [i for i, c in enumerate(cells) if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    if graded:
        scroll_to(browser, code_cells(browser)[graded[-1]])
    shoot(browser, shots, f"untouched_{Path(lesson).stem}")
    assert graded, f"{lesson} has no graded cell"
    assert not wrong, f"{lesson}, untouched, Run All in the lab:\n" + "\n".join(wrong)
