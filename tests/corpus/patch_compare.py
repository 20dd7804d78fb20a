"""A wrong kernel and the comparison inside grader.check replaced, written to slip past the
source scan: grader.integrity.verify sees grader.check.compare changed."""
from . import WRONG_KERNEL, expect

SOURCE = WRONG_KERNEL + '''
import importlib
getattr(importlib.import_module("grader.che" + "ck"), "__dict__").update(compare=lambda *a, **k: [])
'''
WHY = "the grader was modified"
EXPECT = expect((0, WHY), (0, WHY), (0, WHY))
EXPECT_GPU = EXPECT
STATUS = "caught"
