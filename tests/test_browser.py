"""The course in a real browser (issue 18): headless Chromium drives the course's JupyterLab.

Each lab is started here, as ``./course.sh`` starts it (``python -m grader.lab ROLE FOLDER``, so
with that role's configuration), on a free port of 127.0.0.1 with a token, over a throwaway
copy of the course, with its own Jupyter config/data/settings/workspace folders (nothing of
the user's). Kernels run in Numba's CUDA simulator (conftest.py). What a learner sees:

(a) Run All on an untouched lesson: the visible check says "not implemented yet" in a red
    error box, and every later cell still ran (each has an execution count);
(b) the solution pasted into the exercise cell through the editor (a paste event on
    CodeMirror, as Ctrl+V delivers it): Run All again and the checks pass;
(c) the lesson is not marked unsaved right after opening (its kernel connected);
(d) no Nbgrader menu and no "official Jupyter news" pop-up in the learner's lab; the
    instructor's (``./course.sh instructor``) has the menu;
(e) a ``%%cuda`` cell is highlighted as C++ (its ``// YOUR CODE HERE`` is styled as a comment);
(f) the instructor's class report (``python -m grader report``) shows its figures, without JavaScript.

Screenshots (PNG) go to $GRADER_SCREENSHOTS, else a folder under pytest's temporary
directory; the path is printed at the end of the run. Needs Debian's ``chromium`` and
``chromium-driver`` and pip's ``selenium`` (the ``test`` extra); skipped without them, except
where GRADER_REQUIRE_BROWSER=1 (``.ci/run``), where their absence is an error.
"""
from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest

from grader import lab

ROOT = Path(__file__).resolve().parent.parent
LESSON = "01_elementwise/01_threads_and_blocks.ipynb"
CUDA_LESSON = "03_gemm/00_compiled_cells.ipynb"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
try:
    import selenium  # noqa: F401
except ImportError:
    selenium = None

MISSING = "needs chromium, chromium-driver (apt) and selenium (pip, the test extra)"
if not (CHROMIUM and CHROMEDRIVER and selenium) and os.environ.get("GRADER_REQUIRE_BROWSER") == "1":
    raise RuntimeError(f"GRADER_REQUIRE_BROWSER=1 (CI) but this machine lacks them: {MISSING}")
pytestmark = [pytest.mark.browser, pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER and selenium), reason=MISSING)]


# ------------------------------------------------------------------ the lab and the browser
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_lab(role: str, folder: Path, home: Path):
    """``python -m grader.lab ROLE FOLDER`` on 127.0.0.1; yields its base URL and token."""
    port, token = _free_port(), secrets.token_hex(16)
    env = lab.environ(role)
    for var, sub in [("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                     ("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTERLAB_SETTINGS_DIR", "settings"),
                     ("JUPYTERLAB_WORKSPACES_DIR", "workspaces")]:
        env[var] = str(home / role / sub)
    args = [str(folder), "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
            f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--allow-root")           # CI containers run as root
    log = home / f"{role}-lab.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(lab.command(args), env=env, cwd=folder, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.25)
        yield url, token, log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def shots(tmp_path_factory, request):
    folder = Path(os.environ.get("GRADER_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    yield folder
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():        # else pytest captures it with the teardown
            reporter.write_line(f"\nbrowser screenshots: {folder}")


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000",
                "--disable-gpu", "--no-first-run"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))   # Debian's driver: no download
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


def wait_for(what: str, predicate, timeout: float = 60, every: float = 0.25):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def js(driver, script: str, *args):
    return driver.execute_script(script, *args)


def open_notebook(driver, url: str, token: str, path: str) -> None:
    driver.get(f"{url}/lab/tree/{path}?token={token}")
    name = Path(path).name
    wait_for(f"{name} to open", lambda: js(driver, """
        const tab = [...document.querySelectorAll('.lm-DockPanel-tabBar .lm-TabBar-tab')]
            .find(t => t.textContent.includes(arguments[0]));
        return tab && tab.classList.contains('lm-mod-current') && document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell');
    """, name))
    wait_for("the kernel to be idle", lambda: kernel_idle(driver), timeout=90)


def kernel_idle(driver) -> bool:
    return bool(js(driver, """
        return [...document.querySelectorAll('.jp-StatusBar-Widget, .jp-StatusBar-TextItem')]
            .some(e => /\\|\\s*Idle/.test(e.textContent));"""))


def tab_is_dirty(driver, name: str) -> bool:
    return bool(js(driver, """
        const tab = [...document.querySelectorAll('.lm-DockPanel-tabBar .lm-TabBar-tab')]
            .find(t => t.textContent.includes(arguments[0]));
        return tab.classList.contains('jp-mod-dirty');""", name))


def menu_labels(driver) -> list[str]:
    return js(driver, "return [...document.querySelectorAll('.lm-MenuBar-itemLabel')].map(e => e.textContent)")


def news_popup(driver) -> bool:
    return bool(js(driver, "return document.body.innerText.includes('official Jupyter news')"))


_CELLS = """
    const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
    const cells = panel ? [...panel.querySelectorAll('.jp-Cell.jp-CodeCell')] : [];
"""


def code_cells(driver):
    """The open notebook's code cells (DOM elements), in order."""
    return js(driver, _CELLS + "return cells;")


def cell_state(driver) -> list[dict]:
    """Per code cell: its prompt ("[3]:"), its error outputs' text, all its outputs' text."""
    return js(driver, _CELLS + """
        return cells.map(c => ({
            prompt: (c.querySelector('.jp-InputPrompt') || {}).textContent || '',
            errors: [...c.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
                        .map(e => e.textContent),
            text: (c.querySelector('.jp-OutputArea') || {}).textContent || '',
        }));""")


def _count(prompt: str) -> int | None:
    m = re.fullmatch(r"\[(\d+)\]:", prompt.strip())
    return int(m.group(1)) if m else None


def run_all(driver, expect_cells: int, timeout: float = 240) -> list[dict]:
    """Run → Run All Cells from the menu; wait until every code cell has a new execution count."""
    from selenium.webdriver.common.by import By

    before = max([_count(s["prompt"]) or 0 for s in cell_state(driver)] + [0])
    driver.find_element(By.XPATH, "//div[contains(@class,'lm-MenuBar-itemLabel') and text()='Run']").click()
    driver.find_element(By.XPATH, "//li[contains(@class,'lm-Menu-item')]"
                                  "[.//div[contains(@class,'lm-Menu-itemLabel') and text()='Run All Cells']]").click()

    last = {"state": None, "since": time.monotonic()}

    def finished():
        state = cell_state(driver)
        counts = [_count(s["prompt"]) for s in state]
        idle = kernel_idle(driver)
        if len(state) == expect_cells and all(c is not None and c > before for c in counts) and idle:
            return state
        if state != last["state"] or not idle:
            last.update(state=state, since=time.monotonic())
        elif time.monotonic() - last["since"] > 10:      # idle, and nothing changed for 10 s: it stopped
            raise AssertionError("Run All stopped before the end (the kernel is idle and nothing changed for 10 s)")
        return None

    try:
        return wait_for("Run All to finish", finished, timeout=timeout, every=0.5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; prompts {[s['prompt'] for s in cell_state(driver)]}") from None


def editor_text(driver, cell) -> str:
    return js(driver, """return [...arguments[0].querySelectorAll('.cm-content .cm-line')]
                             .map(l => l.textContent).join('\\n');""", cell)


def scroll_to(driver, element) -> None:
    js(driver, "arguments[0].scrollIntoView({block: 'center'});", element)
    time.sleep(0.4)


def shoot(driver, folder: Path, name: str) -> Path:
    path = folder / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def lesson_cells(path: Path) -> list:
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def grade_id(cell) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


# ------------------------------------------------------------------ the tests
@pytest.fixture(scope="module")
def learner_lab(tmp_path_factory):
    home = tmp_path_factory.mktemp("lab")
    course = home / "course"
    shutil.copytree(ROOT / "course", course)
    with running_lab("learner", course, home) as (url, token, log):
        yield url, token, course, log


def test_learner_runs_an_untouched_lesson_then_pastes_the_solution(browser, learner_lab, shots):
    url, token, course, log = learner_lab
    cells = lesson_cells(course / LESSON)
    ids = [grade_id(c) for c in cells]
    visible, hidden = ids.index("test_vector_add_visible"), ids.index("test_vector_add_hidden")
    exercise = ids.index("v1_vector_add")

    open_notebook(browser, url, token, LESSON)
    time.sleep(2)      # the kernel's language_info and kernelspec have reached the notebook by now
    shoot(browser, shots, "1_learner_opened")
    # (c) an untouched lesson is not marked unsaved
    assert not tab_is_dirty(browser, Path(LESSON).name), "the lesson is marked unsaved right after opening"
    # (d) no instructor tools, no news pop-up
    assert "Nbgrader" not in menu_labels(browser), menu_labels(browser)
    assert "Run" in menu_labels(browser)

    # (a) Run All on the untouched stub: the check fails visibly, and every cell runs
    state = run_all(browser, expect_cells=len(cells))
    assert any("not implemented yet" in e for e in state[visible]["errors"]), state[visible]
    assert any("not implemented yet" in e for e in state[hidden]["errors"]), state[hidden]
    assert all(re.fullmatch(r"\[\d+\]:", s["prompt"].strip()) for s in state[visible:])
    scroll_to(browser, code_cells(browser)[visible])
    shoot(browser, shots, "2_learner_run_all_untouched_check")
    scroll_to(browser, code_cells(browser)[-1])
    shoot(browser, shots, "3_learner_run_all_last_cell")
    assert not news_popup(browser), "the 'official Jupyter news' pop-up is shown"

    # (b) the solution, pasted into the exercise cell through the editor
    from selenium.webdriver.common.keys import Keys

    source = next(c.source for c in lesson_cells(ROOT / "solutions" / LESSON) if grade_id(c) == "v1_vector_add")
    solution = "\n".join(l for l in source.splitlines() if "### BEGIN SOLUTION" not in l and "### END SOLUTION" not in l)
    cell = code_cells(browser)[exercise]
    scroll_to(browser, cell)
    editor = cell.find_element("css selector", ".cm-content")
    editor.click()
    editor.send_keys(Keys.CONTROL, "a")                 # select the stub …
    js(browser, """                                     // … and paste over it, as Ctrl+V would
        const data = new DataTransfer();
        data.setData('text/plain', arguments[1]);
        arguments[0].dispatchEvent(new ClipboardEvent('paste', {clipboardData: data, bubbles: true, cancelable: true}));
    """, editor, solution)
    wait_for("the pasted solution in the editor", lambda: editor_text(browser, cell).strip() == solution.strip(),
             timeout=10)
    state = run_all(browser, expect_cells=len(cells))
    for i in (visible, hidden):
        assert not state[i]["errors"], state[i]
        assert "✓ vector add correct" in state[i]["text"], state[i]
    scroll_to(browser, code_cells(browser)[visible])
    shoot(browser, shots, "4_learner_solution_passes")
    assert tab_is_dirty(browser, Path(LESSON).name)    # the edit is unsaved: the dirty mark works


def test_cuda_cells_are_highlighted_as_cpp(browser, learner_lab, shots):
    """(e) In a %%cuda cell, `// YOUR CODE HERE` gets the style of a Python comment, and
    `#include` does not (as Python, `//` is an operator and `#include` a comment)."""
    url, token, course, _ = learner_lab
    open_notebook(browser, url, token, CUDA_LESSON)
    cells = lesson_cells(course / CUDA_LESSON)
    exercise = next(i for i, c in enumerate(cells) if c.source.startswith("%%cuda") and "// YOUR CODE HERE" in c.source)
    python = next(i for i, c in enumerate(cells) if not c.source.startswith("%%") and "  # " in c.source)
    span_class = """   // the class of the token that starts with the text, once its line is drawn
        const line = [...arguments[0].querySelectorAll('.cm-line')].find(l => l.textContent.includes(arguments[1]));
        if (!line) return null;
        const s = [...line.querySelectorAll('span')].find(s => s.textContent.startsWith(arguments[1]));
        return s ? s.className : '(not one token)';"""

    def style_of(index: int, text: str) -> str:
        cell = code_cells(browser)[index]
        scroll_to(browser, cell)
        return wait_for(f"{text!r} in cell {index}", lambda: js(browser, span_class, cell, text), timeout=20)

    py_comment = style_of(python, "# ")
    cpp_comment, include = style_of(exercise, "// YOUR CODE HERE"), style_of(exercise, "#include")
    shoot(browser, shots, "5_cuda_cell_highlighted_as_cpp")
    assert cpp_comment == py_comment, "the %%cuda cell's // comment is not styled as a comment"
    assert include != py_comment, "#include in a %%cuda cell is styled as a Python comment"
    assert not tab_is_dirty(browser, Path(CUDA_LESSON).name)


def test_instructor_lab_has_nbgrader_tools(browser, tmp_path_factory, shots):
    """(d) ``./course.sh instructor`` opens the nbgrader course directory with nbgrader's tools."""
    home = tmp_path_factory.mktemp("instructor")
    root = home / "repo"
    for part in ("solutions", "course"):
        shutil.copytree(ROOT / part, root / part)
    shutil.copy(ROOT / "nbgrader_config.py", root)
    with running_lab("instructor", root, home) as (url, token, _):
        open_notebook(browser, url, token, f"solutions/{LESSON}")
        wait_for("the Nbgrader menu", lambda: "Nbgrader" in menu_labels(browser), timeout=20)
        from selenium.webdriver.common.by import By

        browser.find_element(By.XPATH, "//div[contains(@class,'lm-MenuBar-itemLabel') and text()='Nbgrader']").click()
        items = wait_for("the Nbgrader menu's items", lambda: js(browser, """
            return [...document.querySelectorAll('.lm-Menu .lm-Menu-itemLabel')].map(e => e.textContent)
                .filter(Boolean);"""), timeout=10)
        shoot(browser, shots, "6_instructor_lab")
        assert any("Formgrader" in i for i in items), items
        assert not news_popup(browser)


# ------------------------------------------------------------------ the instructor's class report
def rendered_images(driver) -> list[dict]:
    return js(driver, """return [...document.images].map(i => ({file: i.dataset.file, complete: i.complete,
                                                               width: i.naturalWidth, height: i.naturalHeight}));""")


def open_report(driver, page: Path, figures: set) -> None:
    """Open a report page from disk; every figure decoded (naturalWidth > 0), no script on it."""
    driver.get(page.resolve().as_uri())
    images = wait_for(f"the figures of {page}", lambda: (lambda imgs: imgs if imgs and all(i["complete"] for i in imgs)
                                                         else None)(rendered_images(driver)), timeout=20)
    assert {i["file"] for i in images} == figures, images
    assert all(i["width"] > 100 and i["height"] > 100 for i in images), images
    assert js(driver, "return document.scripts.length") == 0
    assert "Class report: 01_elementwise" in js(driver, "return document.querySelector('h1').textContent")


def test_class_report_shows_its_figures(browser, tmp_path, shots):
    """(f) A report generated here (the class of tests/test_report.py graded in the simulator, two
    students' speed rewritten as a GPU run records it) and the committed example graded on an H100
    (docs/class_report_example/): every figure renders. The screenshots are of the example."""
    from grader.report import gather
    from grader.report_page import write
    from tests.test_report import CH, as_on_gpu, build_class

    course = build_class(tmp_path / "course")
    for student, fraction in (("ada", 0.97), ("ken", 0.31)):
        as_on_gpu(course, student, fraction)
    page = write(gather(course, CH), tmp_path / "report")
    open_report(browser, page, {"points.png", "speed_vector_add.png"})

    example = ROOT / "docs" / "class_report_example" / "report.html"
    size = browser.get_window_size()
    browser.set_window_size(1300, 2200)
    try:
        open_report(browser, example, {"points.png", "speed_vector_add.png"})
        shoot(browser, shots, "class_report")
        scroll_to(browser, browser.find_element("id", "speed"))
        js(browser, "document.getElementById('speed').scrollIntoView({block: 'start'});")
        shoot(browser, shots, "class_report_speed")
    finally:
        browser.set_window_size(size["width"], size["height"])
