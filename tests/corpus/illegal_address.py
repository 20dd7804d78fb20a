"""A write 4 TiB past the output. GPU: an illegal address that poisons the CUDA context: the
cell says so and to restart, and every later graded cell fails at once with the same advice."""
from . import KERNEL, NO_GPU, expect

SOURCE = KERNEL.replace("c[i] = a[i] + b[i]", "c[i + (1 << 40)] = a[i] + b[i]")
EXPECT = expect((0, "indexed outside an array"), (0, "indexed outside an array"), (0, NO_GPU))
EXPECT_GPU = expect((0, "restart the kernel"), (0, "Restart the kernel"), (0, "Restart the kernel"))
STATUS = "caught"
