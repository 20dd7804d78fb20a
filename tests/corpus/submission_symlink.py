"""The handed-in notebook is a symbolic link to the course's own solution notebook. It is refused
before anything reads it (opened without following links): 0 everywhere, saying why, and no
solution text reaches the feedback."""
from pathlib import Path

from . import expect

CHECKOUT = Path(__file__).resolve().parents[2]
LINK_TO = CHECKOUT / "solutions" / "01_elementwise" / "01_threads_and_blocks.ipynb"
WHY = "symbolic link"
EXPECT = expect((0, WHY), (0, WHY), (0, WHY))
EXPECT_GPU = EXPECT
FEEDBACK = True
STATUS = "caught"


def after(result):
    assert result.unreadable and "symbolic link" in result.unreadable
