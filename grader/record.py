"""Append graded results to a JSON-lines file named by $GRADER_RECORD (the scoreboard reads it)."""
from __future__ import annotations

import json
import os
import time


def record(kind: str, **data) -> None:
    path = os.environ.get("GRADER_RECORD")
    if not path:
        return
    row = {"kind": kind, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **data}
    with open(path, "a") as f:
        f.write(json.dumps(row, default=float) + "\n")
