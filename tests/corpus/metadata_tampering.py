"""Cell metadata edited: the graded cells switched to grade: false, points raised, a grade id
duplicated, an extra graded cell added: the judge reads no metadata of the submission."""
from . import KERNEL, NO_GPU, expect

SOURCE = KERNEL


def edit(nb):
    import copy

    for cell in nb.cells:
        md = cell.metadata.get("nbgrader")
        if md and md.get("grade"):
            md.update(grade=False, points=1000)
    extra = copy.deepcopy(nb.cells[2])
    extra.id = "tampered-extra-cell"     # a cell of its own (a copied id would be renumbered by nbformat, with a warning)
    extra.metadata["nbgrader"] = {"grade": True, "grade_id": "test_vector_add_visible", "points": 50,
                                  "locked": False, "solution": False, "schema_version": 3}
    extra.source = "print('free points')"
    nb.cells.append(extra)


EXPECT = expect((2, ""), (2, ""), (0, NO_GPU))
EXPECT_GPU = expect((2, ""), (2, ""), (1, ""))
STATUS = "no effect"
