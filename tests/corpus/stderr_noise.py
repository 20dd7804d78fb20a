"""A correct kernel whose launch prints pages of warnings to stderr: keeps every point (the
runner's output goes to a bounded log; the judge's verdicts do not read it)."""
from . import KERNEL, NO_GPU, expect

SOURCE = "import sys\n" + KERNEL.replace(
    "    threads = 256\n",
    "    for k in range(200):\n        print(f'UserWarning: something looks odd ({k})', file=sys.stderr)\n"
    "    threads = 256\n")
EXPECT = expect((2, ""), (2, ""), (0, NO_GPU))
EXPECT_GPU = expect((2, ""), (2, ""), (1, ""))
STATUS = "caught"
