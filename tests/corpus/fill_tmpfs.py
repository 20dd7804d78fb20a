"""A right kernel whose cell writes as much as it can into /tmp and into its scratch folder (its
home). Both are tmpfs of bounded size (and their pages count as the sandbox's memory): the writes
stop with "No space left on device" at the bound, the cell carries on, full points."""
from . import KERNEL, NO_GPU, expect

SOURCE = KERNEL + '''
import os, sys
for folder in ("/tmp", os.environ.get("HOME", "/sandbox")):
    written = 0
    try:
        with open(os.path.join(folder, "filler"), "wb") as f:
            while written < 8 * 2**30:
                f.write(b"x" * 2**24)
                written += 2**24
    except OSError as exc:
        print("STOPPED", folder, written // 2**20, "MiB", exc.strerror, file=sys.__stderr__)
    else:
        print("UNBOUNDED", folder, written // 2**20, "MiB", file=sys.__stderr__)
'''
EXPECT = expect((2, ""), (2, ""), (0, NO_GPU))
EXPECT_GPU = expect((2, ""), (2, ""), (1, ""))
STATUS = "caught"


def after(result):
    assert result.log.count("STOPPED") == 2 and "UNBOUNDED" not in result.log, result.log[-2000:]
