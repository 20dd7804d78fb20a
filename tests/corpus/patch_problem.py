"""A kernel right only up to 4352 elements, and the problem's hidden sizes shrunk to [1],
written to slip past the source scan: verify sees the problem changed."""
from . import KERNEL, expect

SOURCE = KERNEL.replace("vector_add[(c.size + threads - 1) // threads, threads]", "vector_add[17, threads]") + '''
import importlib
vars(importlib.import_module("grader.problems.elementwise"))["vector_add"].__dict__.update(
    hidden_sim_sizes=[1], hidden_sizes=[1])
'''
WHY = "the problem `vector add`"
EXPECT = expect((0, WHY), (0, WHY), (0, WHY))
EXPECT_GPU = EXPECT
STATUS = "caught"
