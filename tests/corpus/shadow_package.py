"""A `grader/` folder handed in beside the notebook, whose check always passes, and a wrong kernel:
only the notebook is graded, and the sandbox's grader is the course's, read-only."""
from . import NO_GPU, WRONG, WRONG_KERNEL, expect

SOURCE = WRONG_KERNEL
FILES = {"grader/__init__.py": "def check(*a, **k):\n    return None\nspeed = check\nSIMULATOR = True\n"}
EXPECT = expect((0, WRONG), (0, WRONG), (0, NO_GPU))
EXPECT_GPU = expect((0, WRONG), (0, WRONG), (0, "no timed runs"))
STATUS = "caught"
