"""The learner's executed notebook: the graded notebook run top to bottom in a sandbox, with each
graded cell showing the judge's verdict.

The notebook executed is the plan's (the release with the learner's answers), so what the learner
reads is what was graded. Graded cells are not executed there (the judge ran them); their outputs
become the judge's: what the cell printed, and an error for a failed check or a number for partial
credit — the outputs nbgrader itself would read the same points from. Outputs are cut to
:data:`MAX_OUTPUT` characters a cell.

    python -P -s -m grader.judge.feedback IN.ipynb OUT.ipynb     (inside the sandbox)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

MAX_OUTPUT = 20_000
PLACEHOLDER = "# graded by the judge: its verdict replaces this cell's output"


def feedback_notebook(release_nb: Path, plan, keep_tests: bool = False) -> dict:
    """The release notebook (as JSON) with the plan's answer cells put in and graded cells emptied
    (``keep_tests``: left as the release has them, to time the speed cells in the notebook too)."""
    nb = json.loads(Path(release_nb).read_text())
    answers = {cell["id"]: cell["source"] for cell in plan.run if cell["mode"] in ("answer", "cuda")}
    for cell in nb["cells"]:
        md = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") != "code":
            continue
        cell["outputs"], cell["execution_count"] = [], None
        if md.get("grade") and not keep_tests:
            cell["source"] = PLACEHOLDER
        elif cell.get("id") in answers:
            cell["source"] = answers[cell["id"]]
    return nb


def execute(path_in: Path, path_out: Path, timeout_s: int = 600) -> None:
    """Inside the sandbox: run every cell with nbclient, errors allowed, and write the result."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(str(path_in), as_version=4)
    client = NotebookClient(nb, timeout=timeout_s, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(path_in.parent)}})
    try:
        client.execute()
    finally:
        nbformat.write(nb, str(path_out))


def run(nb_json: dict, sandbox, scratch: Path, gpu: bool, env: dict | None = None):
    """Host side: execute ``nb_json`` in ``sandbox``; the executed notebook (dict) or None, and a note."""
    from .sandbox import SCRATCH, Bounded, limit, memory_default, python_executable, sandbox_env

    work = scratch / "feedback"
    work.mkdir(exist_ok=True)
    (work / "in.ipynb").write_text(json.dumps(nb_json))
    extra = {"GRADER_JUDGED": "1", "GRADER_PRECOMPILED": f"{SCRATCH}/modules", "JUPYTER_RUNTIME_DIR": "/tmp/jupyter",
             **(env or {})}
    extra = {k: v for k, v in extra.items() if not (k == "GRADER_JUDGED" and v == "0")}
    cmd = sandbox.command([python_executable(), "-P", "-s", "-m", "grader.judge.feedback", f"{SCRATCH}/feedback/in.ipynb",
                           f"{SCRATCH}/feedback/out.ipynb"], scratch, sandbox_env(extra), gpu=gpu)
    box = Bounded(cmd, wall_s=limit("FEEDBACK_S", 1800), memory_bytes=memory_default(), stdin=None, stdout=None,
                  stderr_path=work / "feedback.log")
    box.wait()
    out = work / "out.ipynb"
    if not out.is_file() or out.stat().st_size > 256 * 2**20:
        return None, f"the executed notebook could not be produced ({box.why or 'no output'})"
    try:
        nb = json.loads(out.read_text())
        assert isinstance(nb, dict) and isinstance(nb.get("cells"), list)
    except (ValueError, AssertionError, UnicodeDecodeError):
        return None, "the executed notebook was unreadable"
    note = f"the notebook's run was stopped: {box.why}" if box.why else ""
    return nb, note


def _cut(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT else text[:MAX_OUTPUT] + f"\n… ({len(text) - MAX_OUTPUT} more characters cut)"


def merge(nb: dict, release_nb: Path, grade, notes: list) -> dict:
    """``nb`` with nbgrader's metadata and sources of the release restored on every graded cell, each
    graded cell's outputs the judge's verdict, every output cut to size, and the notes on top."""
    release = {c.get("id"): c for c in json.loads(Path(release_nb).read_text())["cells"]}
    verdicts = {v.grade_id: v for v in grade.verdicts}
    for cell in nb["cells"]:
        if not isinstance(cell, dict):
            continue
        src = release.get(cell.get("id"))
        if src is not None:
            cell["metadata"] = src.get("metadata", {})
            md = cell["metadata"].get("nbgrader", {})
            if md.get("grade") or md.get("locked"):
                cell["source"] = src["source"]
        md = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and md.get("grade") and md.get("grade_id") in verdicts:
            cell["outputs"] = verdict_outputs(verdicts[md["grade_id"]])
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if isinstance(out, dict) and isinstance(out.get("text"), (str, list)):
                out["text"] = _cut("".join(out["text"]))
    nb["cells"] = [c for c in nb["cells"] if isinstance(c, dict)]
    if notes:
        nb["cells"].insert(0, {"cell_type": "markdown", "metadata": {}, "id": "grading-notes",
                               "source": "**Notes from grading:**\n\n" + "\n".join(f"- {n}" for n in notes)})
    return nb


def verdict_outputs(v) -> list:
    """Outputs of a graded cell from which nbgrader reads the same points as the judge gave."""
    outs = []
    if v.output:
        outs.append({"output_type": "stream", "name": "stdout", "text": _cut(v.output)})
    if v.reason and v.score == 0:
        lines = _cut(v.reason).splitlines() or ["failed"]
        outs.append({"output_type": "error", "ename": "Failed", "evalue": lines[0], "traceback": lines})
    elif v.score < v.max_score:
        outs.append({"output_type": "execute_result", "execution_count": None, "metadata": {},
                     "data": {"text/plain": f"{v.score:g}"}})
    return outs


def main() -> int:
    execute(Path(sys.argv[1]), Path(sys.argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
