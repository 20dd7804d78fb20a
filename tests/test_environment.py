"""environment.yml (conda) and pyproject.toml (pip) ask for the same packages."""
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pins(reqs) -> dict:
    return {_name(r): re.sub(r"\s+", "", r.split(";")[0]).lower().replace("_", "-") for r in reqs}


def test_conda_and_pip_agree():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    pip_side = _pins(project["dependencies"] + extras["test"] + extras["cluster"])
    text = (ROOT / "environment.yml").read_text()
    pip_block = text.split("- pip:")[1]
    conda_side = _pins(r for r in re.findall(r"^\s+- ([^#\n]+?)\s*(?:#.*)?$", pip_block, re.M)
                       if not r.startswith("-e"))
    assert conda_side == pip_side
    assert re.search(r"^\s+- python=3\.11", text, re.M)


def test_numpy_is_pinned_below_2_5_everywhere():
    for path in ("pyproject.toml", "environment.yml"):
        assert re.search(r"numpy[^\n]*<2\.5", (ROOT / path).read_text()), path


def test_the_readme_conda_lines_are_the_environment_and_course_sh():
    """conda is not installable on the CI machine: what can be checked without it is that the
    README's two lines name environment.yml's environment and run ./course.sh's own lab command,
    and that the Python environment.yml names is one the package accepts."""
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("## With conda"):]
    block = block[block.index("```bash\n") + 8:block.index("\n```", block.index("```bash\n"))]
    name = re.search(r"^name: (\S+)", (ROOT / "environment.yml").read_text(), re.M).group(1)
    assert f"conda env create -f environment.yml && conda activate {name}" in block
    lab = re.search(r"-m (grader\.lab learner course/)", (ROOT / "course.sh").read_text()).group(1)
    assert f"python -m {lab}" in block
    assert re.search(r"^\s+- -e \.$", (ROOT / "environment.yml").read_text(), re.M)     # the package itself
    python = re.search(r"^\s+- python=(\d+)\.(\d+)", (ROOT / "environment.yml").read_text(), re.M).groups()
    floor = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert tuple(map(int, python)) >= tuple(map(int, re.search(r">=(\d+)\.(\d+)", floor).groups()))
