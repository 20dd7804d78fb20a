"""A wrong kernel and `grader.check` replaced by a function that passes: the judge runs its own
check in its own process, so the patch changes nothing and the wrong kernel is graded."""
from . import NO_GPU, WRONG, WRONG_KERNEL, expect

SOURCE = WRONG_KERNEL + "\ngrader.check = lambda *args, **kwargs: None\n"
EXPECT = expect((0, WRONG), (0, WRONG), (0, NO_GPU))
EXPECT_GPU = expect((0, WRONG), (0, WRONG), (0, "no timed runs"))
STATUS = "no effect"
