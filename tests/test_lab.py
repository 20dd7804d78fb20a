"""The course's JupyterLab settings (grader/lab/): what each role gets, without a browser
(tests/test_browser.py drives them in Chromium)."""
import asyncio
import hashlib
import json
import os

import nbformat

from grader import lab
from grader.lab.contents import CourseContentsManager, fill_language_info, kernel_language_info

EXTENSION = lab.LABEXTENSIONS / "@gpu-kernel-course" / "cuda-cells"


def test_each_role_puts_its_config_first():
    learner = lab.environ("learner", {"JUPYTER_CONFIG_PATH": "/mine"})["JUPYTER_CONFIG_PATH"].split(os.pathsep)
    assert learner == [str(lab.HERE / "learner"), str(lab.HERE / "common"), "/mine"]
    assert lab.environ("instructor", {})["JUPYTER_CONFIG_PATH"] == str(lab.HERE / "common")


def test_the_learner_has_no_nbgrader_tools():
    server = json.loads((lab.HERE / "learner" / "jupyter_server_config.json").read_text())
    assert set(server["ServerApp"]["jpserver_extensions"].values()) == {False}
    page = json.loads((lab.HERE / "learner" / "labconfig" / "page_config.json").read_text())
    assert page["disabledExtensions"] == {"@jupyter/nbgrader": True}


def test_the_extension_file_name_carries_its_hash():
    """The browser caches labextension files: a changed file must get a new name."""
    build = json.loads((EXTENSION / "package.json").read_text())["jupyterlab"]["_build"]
    path = EXTENSION / build["load"]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    assert path.name == f"remoteEntry.{digest}.js", (
        f"rename {path.name} to remoteEntry.{digest}.js and update package.json's jupyterlab._build.load")
    assert [p.name for p in (EXTENSION / "static").iterdir()] == [path.name]


def _lesson(kernel="python3", language="python"):
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"name": kernel, "display_name": "x", "language": language},
                   "language_info": {"name": language}}
    return nb


def test_a_python_lesson_opens_with_the_kernels_language_info(tmp_path):
    nbformat.write(_lesson(), tmp_path / "lesson.ipynb")
    model = asyncio.run(CourseContentsManager(root_dir=str(tmp_path)).get("lesson.ipynb"))
    info = model["content"]["metadata"]["language_info"]
    assert info == kernel_language_info() and info["version"]          # what ipykernel will report
    assert "version" not in nbformat.read(tmp_path / "lesson.ipynb", as_version=4).metadata.language_info


def test_other_kernels_are_left_alone():
    for nb in (_lesson(kernel="julia-1.10", language="julia"), _lesson(kernel="conda-env-x")):
        before = json.dumps(nb.metadata, sort_keys=True)
        fill_language_info(nb)
        assert json.dumps(nb.metadata, sort_keys=True) == before


def _started(monkeypatch, argv, root):
    """What grader.lab.main would exec, as root or not (nothing is started)."""
    seen = {}
    monkeypatch.setattr(lab, "as_root", lambda: root)
    monkeypatch.setattr(lab.os, "execvpe", lambda exe, cmd, env: seen.update(cmd=cmd, env=env))
    lab.main(argv)
    return seen["cmd"]


def test_as_root_the_lab_adds_allow_root_and_says_so(monkeypatch, capsys):
    cmd = _started(monkeypatch, ["learner", "course/", "--port", "9000"], root=True)
    assert cmd[-4:] == ["course/", "--port", "9000", "--allow-root"]
    assert capsys.readouterr().out.count("--allow-root") == 1                    # one line says so
    assert _started(monkeypatch, ["learner", "course/", "--allow-root"], root=True).count("--allow-root") == 1
    assert "--allow-root" not in _started(monkeypatch, ["instructor", "."], root=False)
    assert capsys.readouterr().out == ""
