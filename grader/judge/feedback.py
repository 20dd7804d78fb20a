"""The learner's executed notebook: the graded notebook with each cell's outputs from the one run the
runner made of it, and each graded cell showing the judge's verdict.

The runner executes the plan (the release with the learner's answers) top to bottom while it is
graded, and hands over each cell's outputs on its pipe (grader.judge.runner). Those outputs come
from the learner's process, so they are validated here like any reply: known output types only,
text as text, images as base64 PNG or JPEG (no HTML, SVG or JavaScript, which a browser showing the
feedback would run), every text cut to :data:`MAX_OUTPUT` characters, every image to
:data:`MAX_IMAGE` bytes, the whole to what the pipe allowed (grader.judge.remote.NOTEBOOK_LIMITS).

Graded cells were not run there (the judge ran them); their outputs become the judge's: what the
cell printed, and an error for a failed check or a number for partial credit — the outputs nbgrader
itself would read the same points from.
"""
from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path

MAX_OUTPUT = 20_000
MAX_IMAGE = 4 * 2**20
MAX_OUTPUTS_PER_CELL = 100
IMAGE_MIMES = {"image/png": b"\x89PNG", "image/jpeg": b"\xff\xd8\xff"}
PLACEHOLDER = "# graded by the judge: its verdict replaces this cell's output"
NOT_RUN = "(not run while grading: the notebook's time for running cells was spent; its definitions were kept)"


def _text(v) -> str | None:
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        v = "".join(v)
    return _cut(v) if isinstance(v, str) else None


def _image(v, mime: str) -> str | None:
    if not isinstance(v, str) or len(v) > MAX_IMAGE * 4 // 3 + 8:
        return None
    try:
        raw = base64.b64decode(v.replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        return None
    return v if raw.startswith(IMAGE_MIMES[mime]) else None


def clean_output(out) -> dict | None:
    """One output from the runner as the feedback may show it, or None when it is not one."""
    if not isinstance(out, dict):
        return None
    kind = out.get("output_type")
    if kind == "stream":
        text = _text(out.get("text"))
        if text is None or out.get("name") not in ("stdout", "stderr"):
            return None
        return {"output_type": "stream", "name": out["name"], "text": text}
    if kind in ("display_data", "execute_result"):
        data = out.get("data")
        if not isinstance(data, dict):
            return None
        clean = {}
        if _text(data.get("text/plain")) is not None:
            clean["text/plain"] = _text(data["text/plain"])
        for mime in IMAGE_MIMES:
            img = _image(data.get(mime), mime)
            if img is not None:
                clean[mime] = img
        if not clean:
            return None
        row = {"output_type": kind, "data": clean, "metadata": {}}
        if kind == "execute_result":
            row["execution_count"] = None
        return row
    if kind == "error":
        tb = out.get("traceback")
        tb = [_cut(str(x)) for x in tb[:200]] if isinstance(tb, list) else []
        ename, evalue = out.get("ename"), out.get("evalue")
        return {"output_type": "error", "ename": str(ename)[:200] if isinstance(ename, str) else "Error",
                "evalue": _cut(evalue) if isinstance(evalue, str) else "", "traceback": tb}
    return None


def clean_outputs(reply) -> tuple[dict, list, list]:
    """(cell id -> outputs, ids of cells run only for their definitions, records) from the runner's
    ``notebook`` reply, everything malformed dropped."""
    cells, skipped, records = {}, [], []
    if not isinstance(reply, dict):
        return cells, skipped, records
    for row in reply.get("cells", [])[:5000] if isinstance(reply.get("cells"), list) else []:
        if isinstance(row, dict) and isinstance(row.get("id"), str) and isinstance(row.get("outputs"), list):
            outs = [o for o in (clean_output(x) for x in row["outputs"][:MAX_OUTPUTS_PER_CELL]) if o]
            cells[row["id"][:100]] = outs
    if isinstance(reply.get("skipped"), list):
        skipped = [s for s in reply["skipped"] if isinstance(s, str)][:5000]
    if isinstance(reply.get("records"), list):
        records = [r for r in reply["records"][:1000] if isinstance(r, dict)]
    return cells, skipped, records


def feedback_notebook(release_nb: Path, plan, outputs: dict | None = None, skipped: list | None = None) -> dict:
    """The release notebook (as JSON) with the plan's answer cells put in, each run cell's outputs
    (``outputs``: cell id -> cleaned outputs) and graded cells emptied for the judge's verdicts."""
    nb = json.loads(Path(release_nb).read_text())
    answers = {cell["id"]: cell["source"] for cell in plan.run if cell["mode"] in ("answer", "cuda")}
    outputs, skipped = outputs or {}, set(skipped or ())
    count = 0
    for cell in nb["cells"]:
        md = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") != "code":
            continue
        cell["outputs"], cell["execution_count"] = [], None
        if md.get("grade"):
            cell["source"] = PLACEHOLDER
            continue
        if cell.get("id") in answers:
            cell["source"] = answers[cell["id"]]
        if cell.get("id") in skipped:
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": NOT_RUN + "\n"}]
        elif cell.get("id") in outputs:
            count += 1
            cell["outputs"], cell["execution_count"] = list(outputs[cell["id"]]), count
            for out in cell["outputs"]:
                if out["output_type"] == "execute_result":
                    out["execution_count"] = count
    return nb


def _cut(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT else text[:MAX_OUTPUT] + f"\n… ({len(text) - MAX_OUTPUT} more characters cut)"


def merge(nb: dict, release_nb: Path, grade, notes: list) -> dict:
    """``nb`` with nbgrader's metadata and sources of the release restored on every graded cell, each
    graded cell's outputs the judge's verdict, and the notes on top."""
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
