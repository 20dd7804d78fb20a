"""A kernel that does nothing."""
from . import KERNEL, expect

SOURCE = KERNEL.replace("c[i] = a[i] + b[i]", "pass")
EXPECT = expect((0, "no element was written"), (0, "no element was written"), (0, "not graded: no GPU"))
EXPECT_GPU = expect((0, "no element was written"), (0, "no element was written"), (0, "timed runs"))
STATUS = "caught"
