"""No bounds guard: the last block writes past the end. Simulator: IndexError; GPU: the write
lands in the poisoned guard zone after the output and is reported."""
from . import KERNEL, NO_GPU, expect

SOURCE = KERNEL.replace("    if i < c.size:\n        c[i]", "    if True:\n        c[i]")
EXPECT = expect((0, "guard with `if i < n:`"), (0, "guard with `if i < n:`"), (0, NO_GPU))
EXPECT_GPU = expect((0, "wrote past the end of the array"), (0, "wrote past the end of the array"),
                    (0, "no timed runs"))   # right at the benchmark size (a multiple of 256)
STATUS = "caught"
