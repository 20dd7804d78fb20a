"""Every script in dev/ still runs at HEAD as far as a machine without a GPU can tell (CPU only, ~20 s).

* Each ``dev/**/*.py`` is imported (as its chapter folder's module, the way ``python dev/<ch>/<x>.py``
  finds its siblings) in one child process, so a renamed grader API, a missing sibling or a broken
  module-level load fails here, not on the lent GPU.
* What the scripts name is checked without running them: every repository path in a string
  (``solutions/…``, ``dev/…``, ``tests/…``; a glob must match), every notebook name (``06_fp8_gemm.ipynb``),
  every cell id a call hands to grader.notebooks (``cell_source(NB, "v_fp8")``, ``load("x.ipynb", [...])``),
  every ``from tests… / grader… import NAME`` and ``ALIAS.NAME`` of such a module (function-level
  imports included), and sibling imports.
* Shell scripts: every repository path they name exists (a glob matches), every notebook they keep
  exists, every ``python3 dev/…`` or ``python3 -c "from M import N"`` they run resolves.
* dev/README.md describes every file in dev/ and names no file that is not there.
* Scripts that rewrite a lesson's cell text are dry-run (the rewrite must still apply).
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEV = ROOT / "dev"
PY = sorted(DEV.rglob("*.py"))
# scripts that run at import (no __main__ guard): the chapter's test runs each whole, in its own process
RUN_BY_TESTS = {"dev/ch01_elementwise/compile.py": "tests/test_ch01_elementwise.py",
                "dev/ch02_reduce/compile.py": "tests/test_ch02_reduce.py"}
IMPORTED = [p for p in PY if str(p.relative_to(ROOT)) not in RUN_BY_TESTS]
SH = sorted(DEV.rglob("*.sh"))
REPO_DIRS = ("dev", "solutions", "course", "tests", "grader", "results", "docs")
PATH_RE = re.compile(r"(?<![\w./$-])((?:%s)/[\w.*?\[\]/{}-]*[\w*\]}])" % "|".join(REPO_DIRS))
NOTEBOOK_CALLS = {"cell_source", "run_cells", "definitions", "code_cells", "load", "lesson_cell", "lesson",
                  "lesson_variant"}

# Imports every dev/*.py in one process, folder by folder (each folder first on sys.path, its modules
# forgotten after it: ch01 and ch02 both have a common.py), and prints {path: error or ""} as JSON.
_IMPORTER = r"""
import importlib.util, json, os, sys, traceback
os.environ.setdefault("GRADER_FORCE_SIM", "1"); os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
root = sys.argv[1]
sys.path.insert(0, root)
import grader  # noqa: F401  (the simulator, before any script imports numba)
result, by_folder = {}, {}
for path in sys.argv[2:]:
    by_folder.setdefault(os.path.dirname(path), []).append(path)
for folder, paths in by_folder.items():
    sys.path.insert(0, folder)
    before = set(sys.modules)
    for path in paths:
        name = os.path.splitext(os.path.basename(path))[0]
        try:
            module = sys.modules.get(name) or importlib.util.module_from_spec(
                importlib.util.spec_from_file_location(name, path))
            if name not in sys.modules:
                sys.modules[name] = module
                module.__spec__.loader.exec_module(module)
            result[path] = ""
        except BaseException:
            sys.modules.pop(name, None)
            result[path] = traceback.format_exc(limit=4)[-1500:]
    for name in set(sys.modules) - before:
        if getattr(sys.modules[name], "__file__", "") and os.path.dirname(sys.modules[name].__file__) == folder:
            del sys.modules[name]
    sys.path.remove(folder)
print("IMPORTED " + json.dumps(result))
"""


@pytest.fixture(scope="module")
def imported() -> dict:
    r = subprocess.run([sys.executable, "-c", _IMPORTER, str(ROOT), *map(str, IMPORTED)], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("IMPORTED ")), None)
    assert line, r.stdout[-2000:] + r.stderr[-3000:]
    return json.loads(line[len("IMPORTED "):])


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


def _notebooks() -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for nb in (ROOT / "solutions").glob("*/*.ipynb"):
        found.setdefault(nb.name, []).append(nb)
    return found


def _cell_ids(nb: Path, cache: dict = {}) -> set:  # noqa: B006  (a per-process cache)
    if nb not in cache:
        cache[nb] = {c.get("id") for c in json.loads(nb.read_text())["cells"]}
    return cache[nb]


def _path_exists(token: str) -> bool:
    token = token.rstrip(".,;:)")
    if "{" in token:                                     # {a,b} alternatives: each must exist
        head, _, rest = token.partition("{")
        alts, _, tail = rest.partition("}")
        return all(_path_exists(head + a + tail) for a in alts.split(","))
    if any(ch in token for ch in "*?["):
        return any(ROOT.glob(token))
    return (ROOT / token).exists()


def _missing_paths(text: str) -> list[str]:
    return sorted({m for m in PATH_RE.findall(text) if not _path_exists(m)})


def test_the_scripts_are_found():
    assert len(PY) >= 20 and len(SH) >= 8, (len(PY), len(SH))


@pytest.mark.parametrize("script", IMPORTED, ids=_rel)
def test_script_imports(imported, script):
    error = imported[str(script)]
    assert not error, f"{_rel(script)} does not import at HEAD:\n{error}"


def test_the_scripts_not_imported_are_run_by_their_chapter_test():
    for script, test in RUN_BY_TESTS.items():
        assert Path(script).name in (ROOT / test).read_text() and (ROOT / script).exists(), (script, test)


def _module_paths(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound to a notebook path (NB = ROOT / "solutions" / ... / "x.ipynb") -> the file name."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names = [c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                     and c.value.endswith(".ipynb")]
            if names:
                out[node.targets[0].id] = names[0].split("/")[-1]
    return out


def _strings(node) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                       for e in node.elts):
        return [e.value for e in node.elts]
    if isinstance(node, ast.Starred):
        return _strings(node.value)
    return None


def _problems(script: Path) -> list[str]:
    """What a script names that is not at HEAD (see the module's docstring)."""
    text = script.read_text()
    tree = ast.parse(text)
    notebooks = _notebooks()
    paths = _module_paths(tree)
    bad = [f"path {p}" for p in _missing_paths(text)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"\d\d_\w+\.ipynb", node.value):
            if node.value not in notebooks:
                bad.append(f"notebook {node.value}")
        if isinstance(node, ast.Call):
            fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if fn not in NOTEBOOK_CALLS:
                continue
            nb_name, ids = None, []
            for arg in node.args:
                if isinstance(arg, ast.Name) and arg.id in paths:
                    nb_name = paths[arg.id]
                elif (s := _strings(arg)) is not None:
                    if len(s) == 1 and s[0].endswith(".ipynb"):
                        nb_name = s[0].split("/")[-1]
                    else:
                        ids += s
                elif isinstance(arg, ast.BinOp):             # SOL / "x.ipynb"
                    names = [c.value for c in ast.walk(arg) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                             and c.value.endswith(".ipynb")]
                    if names:
                        nb_name = names[0].split("/")[-1]
            if nb_name and ids:
                known = set().union(*(_cell_ids(nb) for nb in notebooks.get(nb_name, [])))
                bad += [f"cell {nb_name}:{i}" for i in ids if i not in known]
    bad += _import_problems(tree, script)
    return bad


def _import_problems(tree: ast.Module, script: Path) -> list[str]:
    """from tests…/grader… import NAME, ALIAS.NAME of such a module, sibling modules: each must resolve."""
    import importlib

    bad, aliases = [], {}
    siblings = {p.stem for p in script.parent.glob("*.py")}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            if top in ("tests", "grader"):
                try:
                    mod = importlib.import_module(node.module)
                except Exception as e:                       # noqa: BLE001
                    bad.append(f"import {node.module}: {e}")
                    continue
                for a in node.names:
                    if a.name == "*":
                        continue
                    if not hasattr(mod, a.name):
                        try:
                            sub = importlib.import_module(f"{node.module}.{a.name}")
                        except ImportError:
                            bad.append(f"from {node.module} import {a.name}")
                            continue
                        aliases[a.asname or a.name] = sub
                    elif isinstance(getattr(mod, a.name), type(importlib)):
                        aliases[a.asname or a.name] = getattr(mod, a.name)
            elif top not in siblings and (script.parent / f"{top}.py").exists() is False and top.startswith("dev"):
                bad.append(f"import {node.module}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in ("tests", "grader"):
                    try:
                        aliases[a.asname or a.name] = importlib.import_module(a.name)
                    except Exception as e:                   # noqa: BLE001
                        bad.append(f"import {a.name}: {e}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            mod = aliases[node.value.id]
            if not hasattr(mod, node.attr):
                bad.append(f"{node.value.id}.{node.attr} ({mod.__name__} has no {node.attr})")
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                and isinstance(node.value.value, ast.Name) and node.value.value.id in aliases
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            table = getattr(aliases[node.value.value.id], node.value.attr, None)
            if isinstance(table, dict) and node.slice.value not in table:
                bad.append(f"{node.value.value.id}.{node.value.attr}[{node.slice.value!r}]")
    return bad


@pytest.mark.parametrize("script", PY, ids=_rel)
def test_what_the_script_names_exists(script):
    import grader  # noqa: F401  (the simulator, before tests.wrong imports numba)

    assert not _problems(script), f"{_rel(script)} names what HEAD does not have: {_problems(script)}"


@pytest.mark.parametrize("script", SH, ids=_rel)
def test_shell_script_names_what_exists(script):
    import importlib

    import grader  # noqa: F401

    text = script.read_text()
    bad = [f"path {p}" for p in _missing_paths(text)]
    notebooks = _notebooks()
    bad += [f"notebook {n}" for n in re.findall(r'-name "(\d\d_\w+\.ipynb)"', text) if n not in notebooks]
    for module, names in re.findall(r"from ((?:tests|grader)[\w.]*) import ([\w, ]+?)(?:;|\"|'|\)|$)", text, re.M):
        mod = importlib.import_module(module)
        names = [x.split(" as ")[0].strip() for x in names.split(",")]
        bad += [f"from {module} import {n}" for n in names if n and not hasattr(mod, n)]
    assert not bad, f"{_rel(script)} names what HEAD does not have: {bad}"


def test_the_readme_describes_what_is_there():
    readme = (DEV / "README.md").read_text()
    files = [p for p in DEV.rglob("*") if p.is_file() and p.name != "README.md" and "__pycache__" not in p.parts]
    undescribed = [_rel(p) for p in files if f"`{p.name}`" not in readme and f"`{p.relative_to(DEV)}`" not in readme]
    assert not undescribed, f"dev/README.md does not describe these: {undescribed}"
    here = {p.name for p in files} | {str(p.relative_to(DEV)) for p in files}
    elsewhere = {p.name for p in ROOT.glob("tests/*.py")} | {p.name for p in ROOT.glob("tools/*.py")}
    named = set(re.findall(r"`([\w./-]+\.(?:py|sh|cu|cuh|patch))`", readme))
    unknown = {n for n in named if "/" not in n} - here - elsewhere     # paths with a folder: _missing_paths
    assert not unknown, f"dev/README.md names files that are not there: {sorted(unknown)}"
    assert not _missing_paths(readme), _missing_paths(readme)


def test_the_decode_sweep_still_rewrites_the_lesson_cell():
    sys.path.insert(0, str(DEV / "ch04_attention"))
    try:
        import decode_sweep
    finally:
        sys.path.remove(str(DEV / "ch04_attention"))
    for cfg in decode_sweep.CONFIGS:
        src = decode_sweep.variant_source(cfg)
        assert f"DecConfig<D, {cfg[0]}, {cfg[1]}, {cfg[2]}, false, {cfg[3]}>" in src


def test_the_flush_study_and_launch_overhead_name_cells_that_exist():
    """Their lesson lists are tables, not calls: each notebook and cell id must be there."""
    sys.path.insert(0, str(DEV / "timing"))
    sys.path.insert(0, str(DEV / "integrity"))
    try:
        import flush_study
        import launch_overhead
    finally:
        sys.path.remove(str(DEV / "timing"))
        sys.path.remove(str(DEV / "integrity"))
    for key, nb, speed_cell, *_ in flush_study.ITEMS:
        path = ROOT / "solutions" / f"{nb}.ipynb"
        assert path.exists() and speed_cell in _cell_ids(path), (key, nb, speed_cell)
    for nb, (cell, *_rest) in launch_overhead.LESSONS.items():
        assert cell in _cell_ids(launch_overhead.CH / nb), (nb, cell)


def test_the_checker_catches_a_stale_script(tmp_path):
    """The static checks can fail: a script naming a removed tools/ cell, an old notebook, a missing cell id."""
    script = tmp_path / "stale.py"
    script.write_text('from pathlib import Path\nfrom grader.notebooks import cell_source\n'
                      'ROOT = Path(__file__).parents[2]\n'
                      'NB = ROOT / "solutions" / "05_hopper_blackwell" / "06_fp8_gemm.ipynb"\n'
                      'OLD = "dev/ch05_hopper/fp8_variants/cell_v1.cu"\n'
                      'src = cell_source(NB, "v_fp8_gone")\n'
                      'other = cell_source("04_fp8.ipynb", "v_fp8")\n'
                      'from tests.wrong import ch05_fp8 as W\nW.NO_SUCH_TABLE\n')
    found = _problems(script)
    assert any("fp8_variants/cell_v1.cu" in p for p in found), found
    assert "cell 06_fp8_gemm.ipynb:v_fp8_gone" in found and "notebook 04_fp8.ipynb" in found, found
    assert any("NO_SUCH_TABLE" in p for p in found), found

