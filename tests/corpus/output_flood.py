"""A correct kernel whose cell prints 200 MB: the sandbox's output is kept as a bounded tail, the
grade is unaffected."""
from . import KERNEL, NO_GPU, expect

SOURCE = KERNEL + '''
import sys
line = "x" * 1_000_000 + "\\n"
for _ in range(200):
    sys.stdout.write(line)
'''
EXPECT = expect((2, ""), (2, ""), (0, NO_GPU))
EXPECT_GPU = expect((2, ""), (2, ""), (1, ""))
STATUS = "caught"


def after(result):
    assert len(result.log) < 100_000
