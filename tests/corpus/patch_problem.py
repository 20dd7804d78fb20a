"""A kernel right only up to 4352 elements, and the problem's hidden sizes shrunk to [1] in the
learner's process: the judge's problem is its own, and its hidden sizes (5003) catch the kernel."""
from . import KERNEL, NO_GPU, expect

SOURCE = KERNEL.replace("vector_add[(c.size + threads - 1) // threads, threads]", "vector_add[17, threads]") + '''
import importlib
vars(importlib.import_module("grader.problems.elementwise"))["vector_add"].__dict__.update(
    hidden_sim_sizes=[1], hidden_sizes=[1])
'''
EXPECT = expect((2, ""), (0, "never written"), (0, NO_GPU))
EXPECT_GPU = expect((0, "never written"), (0, "never written"), (0, "no timed runs"))
STATUS = "no effect"
