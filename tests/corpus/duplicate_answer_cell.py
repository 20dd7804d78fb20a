"""The answer cell appears twice with the same cell id (the second right, the first wrong): the
first is graded, and the grade says why."""
from . import KERNEL, NO_GPU, WRONG, WRONG_KERNEL, expect

SOURCE = WRONG_KERNEL


def edit_json(nb: dict) -> None:
    """On the saved JSON (nbformat would repair duplicate ids on writing)."""
    import copy

    i = next(k for k, c in enumerate(nb["cells"]) if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "v1_vector_add")
    twin = copy.deepcopy(nb["cells"][i])
    twin["source"] = KERNEL
    nb["cells"].insert(i + 1, twin)


EXPECT = expect((0, WRONG), (0, WRONG), (0, NO_GPU))
EXPECT_GPU = expect((0, WRONG), (0, WRONG), (0, "no timed runs"))
STATUS = "caught"


def after(result):
    assert any("appears 2 times" in n for n in result.notes), result.notes
