"""A hard-coded grid of 17 blocks: enough for the simulator's visible sizes (≤ 4099), not the
hidden 5003. On a GPU (visible sizes up to 2^24) it fails the visible tests already."""
from . import KERNEL, expect

SOURCE = KERNEL.replace("vector_add[(c.size + threads - 1) // threads, threads]", "vector_add[17, threads]")
EXPECT = expect((2, ""), (0, "elements were never written"), (0, "not graded: no GPU"))
EXPECT_GPU = expect((0, "elements were never written"), (0, "elements were never written"), (0, "timed runs"))
STATUS = "caught"
