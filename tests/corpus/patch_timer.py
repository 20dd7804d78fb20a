"""The clocks the speed cell reads, replaced: flagged from the source, every graded cell 0."""
from . import KERNEL, expect

SOURCE = KERNEL + '''
import time
time.perf_counter = lambda: 0.0
cuda.event_elapsed_time = lambda start, end: 1e-6
'''
WHY = "changes the grader or its tools"
EXPECT = expect((0, WHY), (0, WHY), (0, WHY))
EXPECT_GPU = EXPECT
STATUS = "caught"
