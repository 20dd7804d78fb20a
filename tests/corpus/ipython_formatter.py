"""A wrong kernel, and a text/plain formatter that prints every float as 999 (above any cell's
points, which crashed nbgrader): the judge's scores are numbers it computed, not printed text."""
from . import NO_GPU, WRONG, WRONG_KERNEL, expect

SOURCE = WRONG_KERNEL + '''
from IPython import get_ipython
get_ipython().display_formatter.formatters["text/plain"].for_type(float, lambda x, p, cycle: p.text("999"))
'''
EXPECT = expect((0, WRONG), (0, WRONG), (0, NO_GPU))
EXPECT_GPU = expect((0, WRONG), (0, WRONG), (0, "no timed runs"))
STATUS = "no effect"
