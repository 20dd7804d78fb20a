"""A wrong kernel and the comparison inside grader.check replaced: the judge compares in its
own process."""
from . import NO_GPU, WRONG, WRONG_KERNEL, expect

SOURCE = WRONG_KERNEL + '''
import importlib
getattr(importlib.import_module("grader.che" + "ck"), "__dict__").update(compare=lambda *a, **k: [])
'''
EXPECT = expect((0, WRONG), (0, WRONG), (0, NO_GPU))
EXPECT_GPU = expect((0, WRONG), (0, WRONG), (0, "no timed runs"))
STATUS = "no effect"
