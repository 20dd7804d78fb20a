"""A sum that loses about 3 decimal digits (here: a 0.1% error, as from half precision)."""
from . import KERNEL, expect

SOURCE = KERNEL.replace("c[i] = a[i] + b[i]", "c[i] = (a[i] + b[i]) * 0.999")
EXPECT = expect((0, "values are wrong"), (0, "values are wrong"), (0, "not graded: no GPU"))
EXPECT_GPU = expect((0, "values are wrong"), (0, "values are wrong"), (0, "timed runs"))
STATUS = "caught"
