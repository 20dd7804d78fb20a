"""Lessons teach; the lab notebook lives in results/<chapter>/NOTES.md (CONVENTIONS.md, "A lesson
teaches"). For every lesson: at most 10% of its markdown words sit in cells that read as a run log
(a date, a results/ or dev/ path, a run number, an _h100_/_h200_ log name, "session"): the same rule
as the shared tools/lesson_stats.py. Also: every lesson links the glossary, and its links to the
headers and figures it cites resolve in the release."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "solutions").glob("*/*.ipynb"))
LOG = re.compile(r"20\d\d-\d\d-\d\d|\bresults/|\bdev/|\brun ?\d+\b|_h100_|_h200_|\bsession\b", re.I)
MAX_LOG_SHARE = 0.10


def log_share(path: Path) -> float:
    words = logged = 0
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "markdown":
            continue
        n = len(cell.source.split())
        words += n
        logged += n if LOG.search(cell.source) else 0
    return logged / max(words, 1)


def test_the_rule_sees_a_lab_log():
    assert LOG.search("measured on 2026-11-24 (`results/ch05/fp8_h100_2026-11-25_run3.log`)")
    assert not LOG.search("On an H100 expect about 62% of cuBLAS at 4096³.")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_lesson_is_not_a_lab_log(lesson):
    share = log_share(lesson)
    assert share <= MAX_LOG_SHARE, (f"{lesson.name}: {100 * share:.1f}% of its prose reads as a run log: move "
                                    "dated runs, log paths and run numbers to results/<chapter>/NOTES.md")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_lesson_links_what_the_learners_lab_can_open(lesson):
    released = ROOT / "course" / lesson.parent.name / lesson.name
    text = "\n".join(c.source for c in nbformat.read(released, as_version=4).cells if c.cell_type == "markdown")
    assert "../GLOSSARY.md" in text, f"{lesson.name}: no link to the glossary (../GLOSSARY.md)"
    assert "grader/include/" not in text, f"{lesson.name}: cites grader/include/, which the learner's lab cannot open"
    for target in re.findall(r"\]\(((?:\.\./include/|figures/|\.\./GLOSSARY)[^)#\s]*)", text):
        assert (released.parent / target).exists(), f"{lesson.name}: the link {target} does not resolve in course/"
