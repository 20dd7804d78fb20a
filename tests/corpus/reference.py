"""The solution as written: every correctness point; speed only on a GPU."""
from . import NO_GPU, expect

EXPECT = expect((2, ""), (2, ""), (0, NO_GPU))
EXPECT_GPU = expect((2, ""), (2, ""), (1, ""))
STATUS = "caught"
