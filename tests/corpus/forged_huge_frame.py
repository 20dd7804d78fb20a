"""A right kernel whose cell forges a reply that announces a 3 GiB array. The judge checks what a
reply announces against what the request can carry (its outputs' bytes) before reading any of it:
nothing is allocated, the runner is stopped, every graded cell 0 with the reason."""
from . import KERNEL, expect

SOURCE = KERNEL + '''
import json, os, stat, struct
head = json.dumps({"errors": {}, "arrays": [{"name": "x", "dtype": "uint8", "shape": [3 * 2**30]}]}).encode()
frame = struct.pack("<Q", len(head)) + head + struct.pack("<Q", 3 * 2**30)
for fd in range(3, 64):
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, frame)
    except OSError:
        pass
'''
WHY = "malformed"
EXPECT = expect((0, WHY), (0, WHY), (0, WHY))
EXPECT_GPU = EXPECT
STATUS = "caught"


def after(result):
    assert "over the" in result.runner_gone, result.runner_gone
