"""An honest notebook saved with 50 MB of outputs (a big printout in the answer cell and in other
cells). A learner's outputs are not their answer: the plan reads only the cells' sources (outputs
are dropped as the file is parsed), so it earns its points."""
from . import KERNEL, NO_GPU, expect

SOURCE = KERNEL


def edit(nb):
    import nbformat

    blob = "x" * (10 * 2**20)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=blob)]
            blob = blob[: len(blob) // 2] if len(blob) > 2**20 else blob


EXPECT = expect((2, ""), (2, ""), (0, NO_GPU))
EXPECT_GPU = expect((2, ""), (2, ""), (1, ""))
STATUS = "caught"
