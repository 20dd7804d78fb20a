"""Apply a dev variant (a unified diff against a lesson's cell, as `diff -u` writes it) in Python:
the device image need not have `patch`. Every context and removed line must match, so a variant made
against an older cell fails loudly instead of compiling something else."""
from __future__ import annotations

import re
from pathlib import Path

_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply(base: str, diff: str) -> str:
    old, out, pos = base.splitlines(keepends=True), [], 0
    lines = diff.splitlines(keepends=True)
    i = next(n for n, ln in enumerate(lines) if ln.startswith("@@"))
    while i < len(lines):
        start = int(_HUNK.match(lines[i]).group(1)) - 1 if lines[i].startswith("@@") else None
        if start is None:
            raise ValueError(f"not a hunk header: {lines[i]!r}")
        start += 0 if _HUNK.match(lines[i]).group(2) != "0" else 1
        out += old[pos:start]
        pos, i = start, i + 1
        while i < len(lines) and not lines[i].startswith("@@"):
            tag, text = lines[i][:1], lines[i][1:]
            if tag == "\\":                              # "\ No newline at end of file"
                i += 1
                continue
            if tag in " -":
                if pos >= len(old) or old[pos].rstrip("\n") != text.rstrip("\n"):
                    raise ValueError(f"the variant does not match the cell at line {pos + 1}: made against another version")
                if tag == " ":
                    out.append(old[pos])
                pos += 1
            elif tag == "+":
                out.append(text if text.endswith("\n") else text + "\n")
            i += 1
    return "".join(out + old[pos:])


def variant_source(path: str | Path, cell: str | Path) -> str:
    """The source of a variant: a .patch applied to ``cell``, or a whole file as it is."""
    p = Path(path)
    return apply(Path(cell).read_text(), p.read_text()) if p.suffix == ".patch" else p.read_text()
