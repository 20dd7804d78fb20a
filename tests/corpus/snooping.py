"""A wrong kernel, and a cell that prints what it can find: the environment, $HOME, the course's
hidden tests and solutions, the gradebook. Inside the sandbox none of it is there."""
from pathlib import Path

from . import NO_GPU, WRONG, WRONG_KERNEL, expect

CHECKOUT = Path(__file__).resolve().parents[2]          # where the course really is, on the grader's host
SOURCE = WRONG_KERNEL + f'''
import glob, os, sys
print("ENV", sorted(os.environ), file=sys.__stderr__)
print("HOME", os.path.expanduser("~"), os.listdir(os.path.expanduser("~")), file=sys.__stderr__)
for pattern in ["/gpu-course/**", "/work/**", "/root/**", "/home/**", "/tmp/**", "{CHECKOUT}/**"]:
    print("FOUND", pattern, glob.glob(pattern, recursive=True)[:20], file=sys.__stderr__)
for path in ["{CHECKOUT}/solutions", "{CHECKOUT}/.nbgrader/gradebook.db", "{CHECKOUT}/course"]:
    print("EXISTS", path, os.path.exists(path), file=sys.__stderr__)
'''
EXPECT = expect((0, WRONG), (0, WRONG), (0, NO_GPU))
EXPECT_GPU = expect((0, WRONG), (0, WRONG), (0, "no timed runs"))
STATUS = "caught"


def after(result):
    assert "EXISTS" in result.log and " True" not in result.log.split("EXISTS", 1)[1], result.log[-2000:]
    assert "BEGIN HIDDEN TESTS" not in result.log and "gradebook.db'" not in result.log
    assert "01_threads_and_blocks.ipynb'" not in result.log and "GRADER_JUDGE" not in result.log
