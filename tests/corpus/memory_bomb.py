"""The answer cell allocates host memory without end: the host's watchdog stops the sandbox at its
memory limit ($GRADER_JUDGE_MEMORY_GB), the cells score 0 with the reason."""
from . import expect

SOURCE = '''
hoard = []
while True:
    hoard.append(bytearray(256 * 2**20))
    for k in range(0, len(hoard[-1]), 4096):
        hoard[-1][k] = 1
'''
WHY = "GiB of memory"
EXPECT = expect((0, WHY), (0, WHY), (0, WHY))
EXPECT_GPU = None
STATUS = "caught"
