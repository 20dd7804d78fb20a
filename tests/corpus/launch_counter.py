"""The answer computed on the host, and the public launch counter bumped so "no kernel was
launched" is not said: the runner's report is the learner's to forge. The results are right, so
the correctness cells pass; on a GPU the speed cell times the host copies, far from the target."""
from . import NO_GPU, expect

SOURCE = '''
import grader.launches

def launch_vector_add(a, b, c):
    c.copy_to_device(a.copy_to_host() + b.copy_to_host())
    grader.launches.note_launch()
'''
EXPECT = expect((2, ""), (2, ""), (0, NO_GPU))
EXPECT_GPU = None
STATUS = "documented: host computation passes the correctness cells (README)"
