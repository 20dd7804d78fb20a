"""The instructor's class report (issue 18): ``python -m grader report ASSIGNMENT``.

A small class of lesson 01.01 is graded in the simulator by ``autograde_assignment`` (as
tests/test_class_batch.py grades one): a correct student, a wrong one (off by one), one whose answer
cell does not parse, one whose code ends its own process, one who handed in nothing, one whose file
is not a notebook, one the gradebook knows who submitted nothing, and one whose notebook forges a
judge's speed record (made, written and printed in its own process: none of it reaches the report). The report must show every
student and every graded cell with the gradebook's points and the judge's reasons, list the
notebooks that did not grade with why, and say "no GPU: speed not measured" instead of a plot.

Speed needs a GPU, so the speed figure and leaderboard are checked on a copy of the class whose
``grading.json`` files are rewritten as a GPU run writes them (the fixture: records shaped like the
judge's record of the reference in results/scoreboard.json, the gradebook set to match): the
figure's dots sit at the students' fractions, the device is named, and the target, the floor and
the reference solution's fraction are drawn as labelled lines.

Each check is a function that returns what is wrong with a report; the last tests show each one
flags a report with a student, a cell, a reason, a not-graded row or a mark taken out or changed,
and that the report itself says so when the gradebook and the judge's record disagree.
"""
from __future__ import annotations

import base64
import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from grader.autograde import autograde_assignment, make_scratch_course
from tests.corpus import KERNEL
from tests.test_class_batch import CH, LESSON, limits, submit  # noqa: F401  (limits: a fixture)

ROOT = Path(__file__).resolve().parent.parent
H100 = "NVIDIA H100 80GB HBM3"                                        # the committed example's GPU
GPU = json.loads((ROOT / "results" / "scoreboard.json").read_text())["chapters"][CH]["device"]  # the reference's
OTHER_GPU = "NVIDIA A100-SXM4-40GB"
NOT_HANDED_IN = "the notebook was not handed in"
OFF_BY_ONE = KERNEL.replace("if i < c.size:", "if i < c.size - 1:")
NO_PARSE = KERNEL.replace("def launch_vector_add(a, b, c):", "def launch_vector_add(a, b, c)")
FORGED = {"kind": "speed", "by": "judge", "problem": "vector add", "fraction": 9.0, "value": 27000.0, "unit": "GB/s",
          "points": 1.0, "max_points": 1, "target": 0.5, "floor": 0.1, "device": "FORGED GPU"}
FORGER = KERNEL + f"""
import json, os, grader.record
grader.record.record(**{FORGED!r})                      # the learner's own process: nobody collects it
os.environ["GRADER_RECORD"] = "records.jsonl"
grader.record.record(**{FORGED!r})
print(json.dumps({FORGED!r}))
"""
V, H, S = "test_vector_add_visible", "test_vector_add_hidden", "speed_vector_add"
BOOK = "01_threads_and_blocks"

# what the report must show per student, per cell: (points, max, a piece of the reason)
EXPECT = {
    "ada": {V: (2, 2, ""), H: (2, 2, ""), S: (0, 1, "speed not graded: no GPU")},
    "mal": {V: (2, 2, ""), H: (2, 2, ""), S: (0, 1, "speed not graded: no GPU")},
    "ken": {V: (0, 2, "never written"), H: (0, 2, "never written"), S: (0, 1, "speed not graded: no GPU")},
    "bob": {V: (0, 2, "launch_vector_add' is not defined"), H: (0, 2, "is not defined"), S: (0, 1, "is not defined")},
    "eve": {V: (0, 2, "ended its own process"), H: (0, 2, "ended its own process"), S: (0, 1, "ended its own process")},
    "nia": {V: (0, 2, NOT_HANDED_IN), H: (0, 2, NOT_HANDED_IN), S: (0, 1, NOT_HANDED_IN)},
    "una": {V: (0, 2, "could not be read as a notebook"), H: (0, 2, "could not be read"), S: (0, 1, "could not be read")},
}
NOT_GRADED = {"eve": ("runner stopped", "ended its own process"), "nia": ("not handed in", NOT_HANDED_IN),
              "una": ("unreadable", "not valid JSON"), "zed": ("not graded", "no submission collected")}


def run_report(course: Path, out: Path, *extra: str) -> str:
    r = subprocess.run([sys.executable, "-m", "grader", "report", CH, "--course", str(course), "--out", str(out), *extra],
                       cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"wrote {out / 'report.html'}" in r.stdout
    return (out / "report.html").read_text()


def build_class(where: Path) -> Path:
    """The class above, graded in this process by autograde_assignment (the simulator: no speed)."""
    from nbgrader.api import Gradebook

    course = make_scratch_course(CH, where, lessons=[LESSON])
    submit(course, "ada", KERNEL)
    submit(course, "ken", OFF_BY_ONE)
    submit(course, "mal", FORGER)
    submit(course, "bob", NO_PARSE)
    submit(course, "eve", "import os\nos._exit(3)\n")
    (course / "submitted" / "nia" / CH).mkdir(parents=True)            # collected, but no notebook in it
    (course / "submitted" / "una" / CH).mkdir(parents=True)
    (course / "submitted" / "una" / CH / LESSON).write_text('{"cells": [')
    autograde_assignment(course, CH, feedback=False, env={"GRADER_SIM_TIMEOUT": "20"})
    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        gb.update_or_create_student("zed")                             # on the roster, handed in nothing
    return course


@pytest.fixture(scope="module")
def klass(tmp_path_factory, limits):  # noqa: F811
    return build_class(tmp_path_factory.mktemp("class") / "course")


@pytest.fixture(scope="module")
def page(klass, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return out, run_report(klass, out)


# ------------------------------------------------------------------ the checks (each returns what is wrong)
def soup(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "html.parser")


def cell_problems(html: str, expect: dict) -> list[str]:
    """Every student has a section; in it every graded cell shows its points / max and its reason."""
    wrong, doc = [], soup(html)
    for student, cells in expect.items():
        head = doc.find("h3", id=f"student-{student}")
        if head is None:
            wrong.append(f"{student}: no section")
            continue
        table = head.find_next("table")
        rows = {tr.find_all("td")[1].get_text(): tr.find_all("td") for tr in table.find_all("tr") if tr.find_all("td")}
        for gid, (points, maxi, why) in cells.items():
            if gid not in rows:
                wrong.append(f"{student} {gid}: no row")
                continue
            shown = rows[gid][2].get_text().strip()
            if not shown.startswith(f"{points:g} / {maxi:g}"):
                wrong.append(f"{student} {gid}: shows {shown}, not {points:g} / {maxi:g}")
            reason = rows[gid][3].get_text()
            if why and why not in reason:
                wrong.append(f"{student} {gid}: the reason {reason[:80]!r} lacks {why!r}")
            if not why and reason.strip():
                wrong.append(f"{student} {gid}: a reason for a cell with full points: {reason[:80]!r}")
        matrix = doc.find("table", class_="matrix")
        if matrix is None or not matrix.find("a", href=f"#student-{student}"):
            wrong.append(f"{student}: not in the points table")
    return wrong


def not_graded_problems(html: str, expect: dict) -> list[str]:
    """Every notebook that did not grade is listed with what happened and why."""
    table = soup(html).find("table", class_="not-graded")
    rows = {} if table is None else {tr.find_all("td")[0].get_text(): [td.get_text() for td in tr.find_all("td")]
                                     for tr in table.find_all("tr") if tr.find_all("td")}
    wrong = []
    for student, (what, why) in expect.items():
        row = rows.get(student)
        if row is None:
            wrong.append(f"{student}: not in the did-not-grade table")
        elif row[2] != what or why not in row[3]:
            wrong.append(f"{student}: listed as {row[2]!r}, {row[3][:80]!r}; expected {what!r}, {why!r}")
    wrong += [f"{s}: listed as not graded" for s in rows if s not in expect]
    return wrong


def image_problems(html: str, out: Path) -> list[str]:
    """Every figure is embedded as a PNG and written beside the page, the same bytes."""
    wrong = []
    for img in soup(html).find_all("img"):
        src, name = img.get("src", ""), img.get("data-file", "")
        if not src.startswith("data:image/png;base64,"):
            wrong.append(f"{name}: not embedded")
        elif not (out / name).is_file() or base64.b64decode(src.split(",", 1)[1]) != (out / name).read_bytes():
            wrong.append(f"{name}: not written beside the page, or other bytes")
    return wrong


# ------------------------------------------------------------------ the class in the simulator
def test_report_shows_every_student_cell_reason_and_who_did_not_grade(page):
    out, html = page
    assert cell_problems(html, EXPECT) == []
    assert not_graded_problems(html, NOT_GRADED) == []
    raised = soup(html).find(string=re.compile("an answer cell raised")).find_next("table").get_text()
    assert "bob" in raised and "SyntaxError" in raised                 # graded, but its answer cell did not parse
    head = soup(html).find("table", class_="meta").get_text()
    assert CH in head and "no GPU (Numba's CUDA simulator) (7 students)" in head and re.search(r"\d{4}-\d\d-\d\d", head)
    assert soup(html).find("h3", id="student-zed") is not None         # on the roster: in the report
    assert soup(html).find("table", class_="matrix").find("a", href="#student-ada").find_parent("tr") \
        .find_all("td")[1].get_text() == "4 / 5"
    assert "disagreements" not in html                                 # the gradebook and the judge agree
    assert "<script" not in html.lower()


def test_without_a_gpu_the_report_says_so_instead_of_plotting(page):
    out, html = page
    section = soup(html).find("h3", id="speed-vector_add")
    assert section is not None
    text = section.find_next("p").get_text()
    assert "no GPU: speed not measured" in text
    assert not list(out.glob("speed_*.png")) and not soup(html).find("img", attrs={"data-file": re.compile("^speed_")})
    assert sorted(p.name for p in out.glob("*.png")) == ["points.png"]
    assert image_problems(html, out) == []


def test_a_long_reason_is_folded_and_keeps_its_lines(page):
    _, html = page
    row = soup(html).find("h3", id="student-ken").find_next("table").find(string=V).find_parent("tr")
    folded = row.find("details")
    assert folded is not None and folded.find("summary").get_text().startswith("vector add failed at n=1")
    assert len(folded.find("pre").get_text().splitlines()) > 3       # the verdict's lines, as the judge wrote them


def test_records_made_in_the_learners_process_never_reach_the_report(klass, page):
    from grader.record import collecting, record

    data = json.loads((klass / "autograded" / "mal" / CH / "grading.json").read_text())
    assert data["notebooks"][0]["status"] == "graded" and data["notebooks"][0]["records"] == []
    _, html = page
    text = soup(html).get_text()
    assert "FORGED" not in html
    # the forged fraction (900.0%) and figure (27,000 GB/s); bare digits may be in a seed (591900905)
    assert not re.search(r"(?<![\d.,])900(\.\d+)?\s*%", text) and not re.search(r"(?<![\d.,])27,?000(?![\d,])", text)
    with collecting() as rows:                                       # what the host collects: its own records
        with collecting() as inner:
            record("speed", by="judge", problem="p", fraction=0.5)
        record("sweep", problem="p")
    record("speed", by="judge", problem="after")
    assert [r["kind"] for r in rows] == ["speed", "sweep"] and [r["problem"] for r in inner] == ["p"]


# ------------------------------------------------------------------ speed: the class as a GPU run records it (fixture)
def reference_record() -> tuple[dict, str]:
    data = json.loads((ROOT / "results" / "scoreboard.json").read_text())
    entry = data["chapters"][CH]
    row = next(r for r in entry["records"] if r.get("by") == "judge" and r.get("problem") == "vector add")
    return row, entry["date"]


def as_on_gpu(course: Path, student: str, fraction: float, device: str = GPU) -> float:
    """Rewrite ``student``'s grading.json as the judge writes it on a GPU (the vector add speed
    cell timed at ``fraction`` of the copy peer) and set the gradebook's speed score to match."""
    from nbgrader.api import Gradebook

    from grader.score import points_for

    base, _ = reference_record()
    points = points_for(fraction, base["target"], base["floor"], 1)
    value = fraction * base["peer_value"]
    rec = {**copy.deepcopy(base), "time": "2026-11-24T10:00:00", "value": value, "fraction": fraction,
           "points": points, "device": device, "median_ms": base["bytes"] / value / 1e6}
    path = course / "autograded" / student / CH / "grading.json"
    data = json.loads(path.read_text())
    data.update(device=device, simulator=False)
    nb = data["notebooks"][0]
    nb["records"] = [rec]
    for c in nb["cells"]:
        if c["grade_id"] == S:
            c["score"], c["reason"] = points, "" if points >= 1 else f"target 50% of {base['peer']} (floor 10%): {points:g} of 1 points"
    path.write_text(json.dumps(data))
    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        gb.find_grade(S, BOOK, CH, student).auto_score = points
        gb.db.commit()
    return points


@pytest.fixture(scope="module")
def gpu_class(klass, tmp_path_factory):
    course = tmp_path_factory.mktemp("gpu") / "course"
    shutil.copytree(klass, course)
    fractions = {"ada": 0.97, "ken": 0.31}       # ken's fixture record stands for a slow, correct kernel
    points = {s: as_on_gpu(course, s, f) for s, f in fractions.items()}
    return course, fractions, points


def speed_figure_problems(fig, fractions: dict, device: str, marks: list[str]) -> list[str]:
    """The figure: a dot per student at 100 × its fraction, the device in the title, each mark a
    labelled vertical line at its value."""
    ax = fig.axes[0]
    wrong = []
    dots = {ax.get_yticklabels()[int(round(line.get_ydata()[0]))].get_text(): line.get_xdata()[0]
            for line in ax.lines if line.get_marker() not in ("None", None, "") and len(line.get_xdata()) == 1}
    for student, f in fractions.items():
        if student not in dots or abs(dots[student] - 100 * f) > 1e-6:
            wrong.append(f"{student}: dot at {dots.get(student)}, not {100 * f}")
    if device not in ax.get_title():
        wrong.append(f"the title {ax.get_title()!r} does not name {device}")
    vlines = [line for line in ax.lines if len(set(line.get_xdata())) == 1 and line.get_marker() in ("None", None, "")]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    for mark in marks:
        if not any(mark in label for label in labels):
            wrong.append(f"no legend entry {mark!r} in {labels}")
        value = float(re.search(r"([\d.]+)%", mark).group(1))
        if not any(abs(line.get_xdata()[0] - value) < 0.6 for line in vlines):
            wrong.append(f"no vertical line at {value}% ({mark})")
    return wrong


def figures_of(monkeypatch) -> list:
    """The speed figures the report draws (grader.plot.class_speeds, wrapped)."""
    import grader.plot

    drawn, real = [], grader.plot.class_speeds

    def keep(*a, **k):
        drawn.append(real(*a, **k))
        return drawn[-1]

    monkeypatch.setattr(grader.plot, "class_speeds", keep)
    return drawn


def test_speed_figure_and_leaderboard_from_the_judges_records(gpu_class, tmp_path, monkeypatch):
    from grader.report import gather
    from grader.report_page import write

    course, fractions, points = gpu_class
    base, date = reference_record()
    drawn = figures_of(monkeypatch)
    html = write(gather(course, CH), tmp_path).read_text()
    ref = f"reference solution {100 * base['fraction']:.0f}% ({GPU}, {date})"
    marks = ["target 50%", "floor 10%", ref]
    assert len(drawn) == 1 and speed_figure_problems(drawn[0], fractions, GPU, marks) == []
    img = soup(html).find("img", attrs={"data-file": "speed_vector_add.png"})
    assert img is not None and (tmp_path / "speed_vector_add.png").is_file() and image_problems(html, tmp_path) == []
    assert all(m in img["alt"] for m in marks) and GPU in img["alt"]
    board = soup(html).find("table", class_="leaderboard")
    rows = [[td.get_text() for td in tr.find_all("td")] for tr in board.find_all("tr") if tr.find_all("td")]
    assert [r[1] for r in rows] == ["ada", "ken"]                      # best first
    for r, student in zip(rows, ("ada", "ken")):
        value = fractions[student] * base["peer_value"]
        assert r[2] == f"{value:,.0f}" and r[3] == "GB/s" and r[5] == f"{100 * fractions[student]:.1f}%"
        assert r[6] == f"{points[student]:g} / 1" and r[7] == GPU and "copy bandwidth" in r[4]
    missing = soup(html).find("h3", id="speed-vector_add").find_next(string="Not measured:").find_next("table").get_text()
    assert "bob" in missing and "no GPU: speed not measured" in missing     # still graded in the simulator
    assert "disagreements" not in html                                 # the gradebook was set to match


def test_reference_from_another_device_or_none_is_said_not_drawn(gpu_class, tmp_path, monkeypatch):
    from grader.report import gather
    from grader.report_page import write

    course, fractions, _ = gpu_class
    data = json.loads((ROOT / "results" / "scoreboard.json").read_text())
    other = copy.deepcopy(data)
    for entry in other["chapters"].values():
        entry["device"] = "NVIDIA A100-SXM4-40GB"
        for r in entry["records"]:
            r["device"] = "NVIDIA A100-SXM4-40GB"
    (tmp_path / "other.json").write_text(json.dumps(other))
    (tmp_path / "none.json").write_text(json.dumps({"chapters": {}}))
    for board, says in (("other.json", "recorded on NVIDIA A100-SXM4-40GB"), ("none.json", "no record of the reference")):
        drawn = figures_of(monkeypatch)
        html = write(gather(course, CH, scoreboard=tmp_path / board), tmp_path / board[:-5]).read_text()
        labels = [t.get_text() for t in drawn[-1].axes[0].get_legend().get_texts()]
        assert not any("reference" in label for label in labels)                 # no line invented
        assert says in drawn[-1].texts[0].get_text() and says in html
        assert speed_figure_problems(drawn[-1], fractions, GPU, ["target 50%", "floor 10%"]) == []


# ------------------------------------------------------------------ the checks catch wrong reports
def test_each_check_flags_a_wrong_report(page):
    out, html = page
    doc = soup(html)
    doc.find("h3", id="student-ken").decompose()                      # a student left out
    assert cell_problems(str(doc), EXPECT) == ["ken: no section"]
    wrong_points = html.replace(f"<td>{H}</td><td class=\"num full\">2 / 2", f"<td>{H}</td><td class=\"num full\">1 / 2", 1)
    assert cell_problems(wrong_points, EXPECT) == [f"ada {H}: shows 1 / 2, not 2 / 2"]
    no_reason = html.replace("ended its own process (exit status 3)", "something", 3)
    assert any(p.startswith(f"eve {V}: the reason") for p in cell_problems(no_reason, EXPECT))
    doc = soup(html)
    doc.find("table", class_="not-graded").find(string="una").find_parent("tr").decompose()
    assert not_graded_problems(str(doc), NOT_GRADED) == ["una: not in the did-not-grade table"]
    assert not_graded_problems(html, {**NOT_GRADED, "ada": ("not handed in", NOT_HANDED_IN)}) == \
        ["ada: not in the did-not-grade table"]
    assert image_problems(html.replace("data:image/png;base64,", "points.png#", 1), out) == ["points.png: not embedded"]


def test_speed_check_flags_a_wrong_figure(gpu_class, tmp_path, monkeypatch):
    from grader.report import gather
    from grader.report_page import write

    course, fractions, _ = gpu_class
    drawn = figures_of(monkeypatch)
    write(gather(course, CH, scoreboard=tmp_path / "missing.json"), tmp_path)    # no reference
    fig = drawn[-1]
    assert speed_figure_problems(fig, {**fractions, "ken": 0.4}, GPU, []) == ["ken: dot at 31.0, not 40.0"]
    assert speed_figure_problems(fig, fractions, OTHER_GPU, []) != []
    assert speed_figure_problems(fig, fractions, GPU, ["reference solution 101%"]) == \
        ["no legend entry 'reference solution 101%' in ['full points', 'partial points', 'no points', "
         "'target 50% (full points)', 'floor 10% (no points)']", "no vertical line at 101.0% (reference solution 101%)"]


def test_a_gradebook_that_disagrees_with_the_judge_is_reported(klass, tmp_path):
    from nbgrader.api import Gradebook

    course = tmp_path / "course"
    shutil.copytree(klass, course)
    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        gb.find_grade(H, BOOK, CH, "ada").auto_score = 1.0             # edited after the judge graded
        gb.find_grade(V, BOOK, CH, "ken").manual_score = 1.5           # an instructor's manual grade
        gb.db.commit()
    (course / "autograded" / "nia" / CH / "grading.json").unlink()   # graded before grading.json existed
    html = run_report(course, tmp_path / "out")
    box = soup(html).find(id="disagreements").get_text()
    assert "ada: 01_threads_and_blocks test_vector_add_hidden: the gradebook's score is 1, the judge's grading.json says 2" in box
    assert "ken: 01_threads_and_blocks test_vector_add_visible: a manual grade is 1.5" in box
    assert "nia: (all)" in box and "no grading.json" in box
    expect = copy.deepcopy(EXPECT)
    expect["ada"][H] = (1, 2, "")                                      # the gradebook's points are shown
    expect["ken"][V] = (1.5, 2, "never written")
    expect["nia"] = {V: (0, 2, ""), H: (0, 2, ""), S: (0, 1, "")}       # no reasons known without grading.json
    assert cell_problems(html, expect) == []
    assert "1 / 2 †" in soup(html).find("table", class_="matrix").get_text()
    assert cell_problems(html, EXPECT) != []                            # the judge's points are not what is shown


def test_an_assignment_that_is_not_there_is_said_so(klass, tmp_path):
    r = subprocess.run([sys.executable, "-m", "grader", "report", "no_such_assignment", "--course", str(klass),
                        "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and "no such assignment" in r.stdout and not (tmp_path / "report.html").exists()


def test_the_committed_example_embeds_the_figures_beside_it():
    """docs/class_report_example/ (an H100 run of dev/report/example.sh): the page's figures are the PNGs beside it."""
    folder = ROOT / "docs" / "class_report_example"
    html = (folder / "report.html").read_text()
    assert image_problems(html, folder) == [] and len(soup(html).find_all("img")) == 2
    assert H100 in soup(html).find("table", class_="meta").get_text()


def test_the_page_shows_no_machine_paths(klass, tmp_path):
    """The header names the course folder and shows paths relative to it (or to the grader's
    checkout), never the instructor's absolute folders; the committed example too."""
    html = run_report(klass, tmp_path / "out")
    meta = soup(html).find("table", class_="meta").get_text()
    assert str(klass) not in html and str(ROOT) not in html and "course (paths on this page" in meta
    assert "<code>results/scoreboard.json (the grader" in html
    example = (ROOT / "docs" / "class_report_example" / "report.html").read_text()
    assert not re.search(r"<code>/(tmp|work|root|home)/", example)
