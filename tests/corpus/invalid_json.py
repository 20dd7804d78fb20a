"""A file that is not JSON: graded all the same (0 points), and every cell's reason says the file
could not be read as a notebook."""
from . import expect

RAW = '{"cells": [{"cell_type": "code", "source": "oops'
WHY = "could not be read as a notebook"
EXPECT = expect((0, WHY), (0, WHY), (0, WHY))
EXPECT_GPU = EXPECT
STATUS = "caught"
