"""The hidden-test and speed cells deleted: nbgrader puts the locked cells back and grades them."""
from . import H, NO_GPU, S, expect


def edit(nb):
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in (H, S)]


EXPECT = expect((2, ""), (2, ""), (0, NO_GPU))
EXPECT_GPU = expect((2, ""), (2, ""), (1, ""))
STATUS = "caught"
