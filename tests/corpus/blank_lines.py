"""A correct kernel followed by 60,000 blank lines (a quadratic source scan once took minutes on
this): reading and running it is linear."""
from . import KERNEL, NO_GPU, expect

SOURCE = KERNEL + "\n" * 60_000
EXPECT = expect((2, ""), (2, ""), (0, NO_GPU))
EXPECT_GPU = expect((2, ""), (2, ""), (1, ""))
STATUS = "caught"


def after(result):
    assert result.seconds < 60, result.seconds
