"""A kernel that never returns (the index never advances). Simulator: grader.sim stops each
launch after GRADER_SIM_TIMEOUT s. GPU: check's watchdog (GRADER_GPU_TIMEOUT) gives up on the
launch, marks the context lost, and later cells fail at once saying to restart. The ungraded
cells that call the kernel themselves are deleted (a learner may): on a GPU they would wait
for the 600 s cell limit, which the watchdog cannot shorten (README)."""
from . import KERNEL, NO_GPU, expect

SOURCE = KERNEL.replace("    if i < c.size:\n", "    while i < c.size:   # i never advances\n")


def edit(nb):
    nb.cells = [c for c in nb.cells if "launch_vector_add(d_a" not in c.source
                and "sweep_plot" not in c.source]


EXPECT = expect((0, "did not finish within"), (0, "did not finish within"), (0, NO_GPU))
EXPECT_GPU = expect((0, "did not finish within"), (0, "Restart the kernel"), (0, "Restart the kernel"))
STATUS = "caught"
