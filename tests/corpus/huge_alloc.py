"""The launch function allocates 4 PiB of scratch: out of memory, said plainly, cell 0."""
from . import KERNEL, NO_GPU, expect

SOURCE = KERNEL.replace("    threads = 256\n",
                        "    scratch = cuda.device_array(1 << 50, dtype=np.float32)\n    threads = 256\n")
EXPECT = expect((0, "out of memory"), (0, "out of memory"), (0, NO_GPU))
EXPECT_GPU = expect((0, "out of memory"), (0, "out of memory"), (0, "out of memory"))
STATUS = "caught"
