"""The hidden-test and speed cells deleted: the judge grades the source's test cells, not the
submission's."""
from . import H, NO_GPU, S, expect


def edit(nb):
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in (H, S)]


EXPECT = expect((2, ""), (2, ""), (0, NO_GPU))
EXPECT_GPU = expect((2, ""), (2, ""), (1, ""))
STATUS = "caught"
