"""A right kernel whose cell starts sleeping processes until it cannot (at most 4096). The
sandbox's cgroup bounds its processes (``pids.max``): the forks fail at the bound, the cell carries
on, full points; the pid namespace ends them all with the sandbox."""
from . import KERNEL, NO_GPU, expect

SOURCE = KERNEL + '''
import os, sys, subprocess
children = []
try:
    for _ in range(4096):
        children.append(subprocess.Popen(["sleep", "600"]))
except OSError as exc:
    print("FORKS STOPPED AT", len(children), exc.strerror, file=sys.__stderr__)
else:
    print("FORKS UNBOUNDED", len(children), file=sys.__stderr__)
for c in children:
    c.kill()
    c.wait()
'''
EXPECT = expect((2, ""), (2, ""), (0, NO_GPU))
EXPECT_GPU = expect((2, ""), (2, ""), (1, ""))
STATUS = "caught"


def after(result):
    assert "FORKS STOPPED AT" in result.log, result.log[-2000:]
