"""Answers precomputed for one seed (say, one printed by a failing check), copied by a kernel:
every check draws a fresh seed, so they are wrong."""
from . import expect

SOURCE = '''
@cuda.jit
def vector_add(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


@cuda.jit
def copy(src, dst):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]


def launch_vector_add(a, b, c):
    rng = np.random.default_rng(1234)
    n = c.size
    want = rng.standard_normal(n, dtype=np.float32) + rng.standard_normal(n, dtype=np.float32)
    copy[(n + 255) // 256, 256](cuda.to_device(want), c)
'''
EXPECT = expect((0, "values are wrong"), (0, "values are wrong"), (0, "not graded: no GPU"))
EXPECT_GPU = expect((0, "values are wrong"), (0, "values are wrong"), (0, "timed runs"))
STATUS = "caught"
