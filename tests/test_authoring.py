"""docs/AUTHORING.md's walkthroughs run as written (no GPU): an attention problem with an SDPA peer
checked in the simulator, an sm_100a-only problem compiled and graded on its SASS, and a lesson edited
by an nbformat script (on a copy; from the repository root, as the page says)."""
from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT

DOC = ROOT / "docs" / "AUTHORING.md"


def blocks(tag: str) -> str:
    found = re.findall(rf"```python {tag}\n(.*?)```", DOC.read_text(), flags=re.S)
    assert found, f"no `{tag}` code block in {DOC}"
    return "\n".join(found)


@pytest.mark.parametrize("tag", ["walkthrough-a", "walkthrough-b", "walkthrough-c"])
def test_walkthrough_runs_as_written(tag, capsys, monkeypatch):
    import grader  # noqa: F401  (simulator first)

    monkeypatch.chdir(ROOT)

    exec(compile(blocks(tag), f"AUTHORING.md:{tag}", "exec"), {"__name__": tag})
    out = capsys.readouterr().out
    if tag == "walkthrough-a":
        assert "✓ attention (demo) correct (simulator)" in out
    elif tag == "walkthrough-b":
        assert "compiled and inspected only: running it needs a Blackwell GPU" in out
