"""Graded results as they are measured: appended to the JSON-lines file named by $GRADER_RECORD
(the scoreboard reads it) and handed to every :func:`collecting` block open in this process.

:func:`collecting` is how the host keeps what its judge measured for one submission
(``python -m grader autograde`` writes it to that student's ``grading.json``): a list in the
host's memory, which no learner code can reach. Records made in another process (the runner, an
executed notebook) never arrive in it.
"""
from __future__ import annotations

import contextlib
import json
import os
import time

_open: list[list] = []          # the lists of the collecting() blocks now open, innermost last


def record(kind: str, **data) -> None:
    row = {"kind": kind, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **data}
    for rows in _open:
        rows.append(json.loads(json.dumps(row, default=float)))      # plain JSON values, as the file has them
    path = os.environ.get("GRADER_RECORD")
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps(row, default=float) + "\n")


@contextlib.contextmanager
def collecting():
    """``with collecting() as rows:`` every record made in this process inside the block is
    appended to ``rows`` (as well as written where $GRADER_RECORD says)."""
    rows: list = []
    _open.append(rows)
    try:
        yield rows
    finally:
        del _open[next(i for i, open_rows in enumerate(_open) if open_rows is rows)]   # this list, not an equal one
