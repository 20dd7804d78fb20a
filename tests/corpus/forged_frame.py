"""A right kernel whose cell writes a forged message on the runner's reply pipe: a header whose
fields have the wrong types (a list of arrays that is a number). The judge validates every reply,
so this is "the runner's messages were malformed": the runner is stopped and every graded cell
scores 0 with that reason; nothing escapes the grading of this notebook (tests/test_class_batch.py
grades such a student among honest ones)."""
from . import KERNEL, expect

SOURCE = KERNEL + '''
import json, os, stat, struct
head = json.dumps({"errors": {}, "arrays": 5}).encode()
frame = struct.pack("<Q", len(head)) + head
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
