"""A lesson's kernel text exists in one place: its notebook in solutions/.

Tests, dev scripts and the judge load a kernel from the notebook (``grader.notebooks``); a copy
elsewhere drifts from the lesson the learner runs. For every code cell of ``solutions/*/*.ipynb``
that defines a kernel (a ``%%cuda`` cell, a Python cell with ``@cuda.jit``), no run of
``WINDOW`` consecutive normalized lines may stand in a tracked file outside ``solutions/`` and
``course/`` (generated from solutions/). Normalized: comments and white space dropped, blank and
trivial lines (lone braces, ``else:``, ``return``, imports, includes, nbgrader's markers) skipped.
Every window is hashed once, so the whole tree is read in a second or two.

ALLOWED names the one file that must hold a lesson's kernel text, and why; it may not go stale.

Run as a script (``python tests/test_one_source.py``) it lists every copy it finds."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WINDOW = 6
EXCLUDED = ("solutions/", "course/")
MAX_BYTES = 2 << 20
# file -> why it holds a lesson kernel's text
ALLOWED = {
    "grader/problems/attention_naive.py":
        "lesson 04.02's peer is lesson 04.01's naive attention as the grader ships it: the judge times this "
        "trusted copy, never the learner's own lesson-01 kernels, and a learner's machine has no solutions/",
}

_BLOCK_COMMENT = re.compile(r"/\*.*?\*/")
_LINE_COMMENT = re.compile(r"(^|\s)//.*$")
_PY_COMMENT = re.compile(r"(^|\s)#(?!include|pragma|define|if|endif|else|elif|undef)\s.*$")
_TRIVIAL = re.compile(r"^(?:[{}()\[\];,:]*|else:?|else\s*\{|\}\s*else\s*\{|return;?|pass|break;?|continue;?"
                      r"|(?:from\s+\S+\s+)?import\s.*|#\s*include\b.*|#\s*pragma\s+(?:unroll|once)\b.*"
                      r"|%%\w+.*|#+\s*(?:BEGIN|END)\s+(?:SOLUTION|HIDDEN TESTS).*|\"\"\"|''')$")


def normalize(line: str) -> str | None:
    """A line as compared: comments and white space dropped; None for a blank or trivial line."""
    s = _BLOCK_COMMENT.sub(" ", line)
    s = _LINE_COMMENT.sub("", s)
    if s.lstrip().startswith("#") and not re.match(r"\s*#\s*(include|pragma|define|if|endif|else|elif|undef)\b", s):
        return None
    s = _PY_COMMENT.sub("", s)
    s = " ".join(s.split())
    if not s or _TRIVIAL.match(s):
        return None
    return s


def windows(lines: list[str]) -> list[tuple[int, int]]:
    """(hash of WINDOW consecutive normalized lines, the first one's line number, 1-based)."""
    kept = [(i + 1, n) for i, raw in enumerate(lines) if (n := normalize(raw)) is not None]
    return [(hash("\n".join(n for _, n in kept[k:k + WINDOW])), kept[k][0]) for k in range(len(kept) - WINDOW + 1)]


def is_kernel_cell(source: str) -> bool:
    return source.startswith("%%cuda") or "@cuda.jit" in source


def lesson_windows(root: Path = ROOT) -> dict[int, str]:
    """Every window of every kernel-defining cell of the solutions: hash -> 'notebook:cell id:line'."""
    found: dict[int, str] = {}
    for nb in sorted((root / "solutions").glob("*/*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if cell["cell_type"] != "code" or not is_kernel_cell(src):
                continue
            for h, line in windows(src.splitlines()):
                found.setdefault(h, f"{nb.relative_to(root)}:{cell.get('id')}:{line}")
    return found


def file_lines(path: Path) -> list[str] | None:
    """A file's text as lines (a notebook: its code cells, one after another); None for binary or huge files."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) > MAX_BYTES or b"\0" in data[:8192]:
        return None
    text = data.decode("utf-8", errors="replace")
    if path.suffix == ".ipynb":
        try:
            cells = json.loads(text)["cells"]
        except (ValueError, KeyError):
            return text.splitlines()
        out: list[str] = []
        for c in cells:
            if c.get("cell_type") == "code":
                src = c["source"]
                out += ("".join(src) if isinstance(src, list) else src).splitlines() + [""]
        return out
    return text.splitlines()


def tracked(root: Path = ROOT) -> list[Path]:
    """The files git tracks (or would: untracked, not ignored) outside EXCLUDED; without git, every file
    but the virtual environment's and caches."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                             capture_output=True, check=True).stdout.decode()
        names = [p for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "__pycache__", ".pytest_cache", "node_modules"}
        names = [str(p.relative_to(root)) for p in root.rglob("*")
                 if p.is_file() and not skip & set(p.relative_to(root).parts)]
    return [root / p for p in names if not p.startswith(EXCLUDED) and (root / p).is_file()]


def copies(files: list[Path], lessons: dict[int, str], root: Path = ROOT) -> list[str]:
    """'file:line ~ notebook:cell:line' for every window of ``files`` that is a window of a lesson kernel
    (the first of each run of overlapping windows)."""
    hits: list[str] = []
    for path in files:
        lines = file_lines(path)
        if not lines:
            continue
        last = -10**9
        for h, line in windows(lines):
            if h in lessons:
                if line > last + WINDOW:
                    name = path.relative_to(root) if path.is_relative_to(root) else path
                    hits.append(f"{name}:{line} ~ {lessons[h]}")
                last = line
    return hits


def test_no_lesson_kernel_text_outside_the_notebooks():
    lessons = lesson_windows()
    assert len(lessons) > 1000, "the solutions' kernel cells were not found"
    hits = [h for h in copies(tracked(), lessons) if h.split(":")[0] not in ALLOWED]
    assert not hits, ("a lesson kernel's text stands outside its notebook (load it with grader.notebooks "
                      "instead):\n" + "\n".join(hits))


def test_the_allowed_copies_are_still_copies():
    """An entry of ALLOWED whose file no longer holds a lesson's text is removed, not kept as a loophole."""
    lessons = lesson_windows()
    for name in ALLOWED:
        assert copies([ROOT / name], lessons), f"{name} no longer copies a lesson kernel: drop it from ALLOWED"


def test_a_planted_copy_is_flagged(tmp_path):
    """The check can fail: six lines of a lesson's kernel pasted into a file (re-indented, with a comment
    added) are found, and the same file without them is not."""
    nb = ROOT / "solutions" / "04_attention" / "04_decoding.ipynb"
    cell = next(c for c in json.loads(nb.read_text())["cells"]
                if c["cell_type"] == "code" and "".join(c["source"]).startswith("%%cuda"))
    body = [ln for ln in "".join(cell["source"]).splitlines() if normalize(ln) is not None][10:10 + WINDOW]
    assert len(body) == WINDOW
    clean = tmp_path / "clean.py"
    clean.write_text('KERNEL = r"""\n__global__ void mine(float* x) {\n  x[0] = 1.0f;\n}\n"""\n')
    planted = tmp_path / "planted.py"
    planted.write_text('KERNEL = r"""\n' + "\n".join("    " + ln.strip() + "  // mine" for ln in body) + '\n"""\n')
    lessons = lesson_windows()
    assert copies([clean], lessons) == []
    hits = copies([planted], lessons)
    assert len(hits) == 1 and "04_decoding.ipynb" in hits[0], hits


def test_five_lines_are_not_a_copy(tmp_path):
    nb = ROOT / "solutions" / "04_attention" / "04_decoding.ipynb"
    cell = next(c for c in json.loads(nb.read_text())["cells"]
                if c["cell_type"] == "code" and "".join(c["source"]).startswith("%%cuda"))
    body = [ln for ln in "".join(cell["source"]).splitlines() if normalize(ln) is not None][10:10 + WINDOW - 1]
    short = tmp_path / "short.cu"
    short.write_text("\n".join(body) + "\nint unrelated_line_here = 42;\n")
    assert copies([short], lesson_windows()) == []


if __name__ == "__main__":
    found = copies(tracked(), lesson_windows())
    print("\n".join(h + ("  (allowed)" if h.split(":")[0] in ALLOWED else "") for h in found) or "no copies")
