"""The answer cell ends its own process (os._exit): every graded cell 0 with the reason; the batch
goes on."""
from . import expect

SOURCE = "import os\nos._exit(0)\n"
WHY = "ended its own process"
EXPECT = expect((0, WHY), (0, WHY), (0, WHY))
EXPECT_GPU = expect((0, WHY), (0, WHY), (0, WHY))
STATUS = "caught"
