"""Only the first half of the output is written."""
from . import KERNEL, expect

SOURCE = KERNEL.replace("if i < c.size:", "if i < c.size // 2:")
EXPECT = expect((0, "never written"), (0, "never written"), (0, "not graded: no GPU"))
EXPECT_GPU = expect((0, "never written"), (0, "never written"), (0, "timed runs"))
STATUS = "caught"
