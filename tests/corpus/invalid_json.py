"""A file that is not JSON: the run still exits 0, the gradebook keeps the row (0 points),
and every cell's reason says the file is not a valid notebook."""
from . import expect

RAW = '{"cells": [{"cell_type": "code", "source": "oops'
WHY = "not a valid notebook"
EXPECT = expect((0, WHY), (0, WHY), (0, WHY))
EXPECT_GPU = EXPECT
STATUS = "caught"
