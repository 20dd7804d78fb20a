"""The clocks the runner times with, replaced so every launch seems to take a microsecond: the judge
bounds the figure by its own clock around launches back to back (the kernel is right, so the
points it earns are the ones its real speed earns)."""
from . import KERNEL, NO_GPU, expect

SOURCE = KERNEL + '''
import time
time.perf_counter = lambda: 0.0
cuda.event_elapsed_time = lambda start, end: 1e-6
'''
EXPECT = expect((2, ""), (2, ""), (0, NO_GPU))
EXPECT_GPU = expect((2, ""), (2, ""), (1, ""))
STATUS = "caught (bounded by the judge's clock)"
