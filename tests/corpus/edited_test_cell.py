"""A wrong kernel, and the visible test cell rewritten to pass (source, points, lock): the judge
runs the source's test cells, never the submission's, and the wrong kernel is graded."""
from . import V, WRONG_KERNEL, expect

SOURCE = WRONG_KERNEL


def edit(nb):
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == V)
    cell.source = 'print("all tests passed")'
    cell.metadata["nbgrader"].update(points=100, locked=False)


EXPECT = expect((0, "values are wrong"), (0, "values are wrong"), (0, "not graded: no GPU"))
EXPECT_GPU = expect((0, "values are wrong"), (0, "values are wrong"), (0, "no timed runs"))
STATUS = "caught"
