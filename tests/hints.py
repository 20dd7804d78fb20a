"""The hints a lesson's markdown offers (``<details><summary>Hint 1: …`` blocks), for the chapter tests
that prove a lesson's first hint says what its failing check prints."""
from __future__ import annotations

import re

import nbformat


def first_hints(notebook) -> list[str]:
    """The text of every "Hint 1" ``<details>`` block in a lesson's markdown, tags removed, whitespace collapsed."""
    out = []
    for cell in nbformat.read(str(notebook), as_version=4).cells:
        if cell.cell_type == "markdown":
            for m in re.finditer(r"<details><summary>Hint 1\b.*?</details>", cell.source, re.S):
                out.append(" ".join(re.sub(r"</?(?:details|summary)>", " ", m.group(0)).split()))
    return out
