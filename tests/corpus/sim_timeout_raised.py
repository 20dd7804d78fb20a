"""A kernel that never returns, with the simulator's time bound raised to a day from the notebook:
the judge's deadline on each request is the host's, and stops it."""
from . import KERNEL, expect

SOURCE = KERNEL.replace("    if i < c.size:\n", "    while i < c.size:   # i never advances\n") + '''
import grader.sim
grader.sim._timeout_s = 86400.0
'''
WHY = "did not finish a check of launch_vector_add"
EXPECT = expect((0, WHY), (0, WHY), (0, WHY))
EXPECT_GPU = None
STATUS = "caught"
