"""A wrong kernel and `grader.check` replaced by a function that passes: the test cells call
the fake (nothing in-process can stop that), but nbgrader's process reads the source
(FlagTampering) and every graded cell scores 0 with the line named."""
from . import WRONG_KERNEL, expect

SOURCE = WRONG_KERNEL + "\ngrader.check = lambda *args, **kwargs: None\n"
WHY = "changes the grader or its tools"
EXPECT = expect((0, WHY), (0, WHY), (0, WHY))
EXPECT_GPU = EXPECT
STATUS = "caught"
