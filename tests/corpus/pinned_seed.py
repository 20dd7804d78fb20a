"""The seed source pinned (secrets.randbits, numpy's default_rng) and answers precomputed for that
seed: the judge draws its seeds in its own process."""
from . import expect

SOURCE = '''
import secrets
import numpy as np
secrets.randbits = lambda k: 1234
_real = np.random.default_rng
np.random.default_rng = lambda seed=None: _real(1234)

@cuda.jit
def copy(src, dst):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]

def launch_vector_add(a, b, c):
    rng = _real(1234)
    n = c.size
    want = rng.standard_normal(n, dtype=np.float32) + rng.standard_normal(n, dtype=np.float32)
    copy[(n + 255) // 256, 256](cuda.to_device(want), c)
'''
EXPECT = expect((0, "values are wrong"), (0, "values are wrong"), (0, "not graded: no GPU"))
EXPECT_GPU = expect((0, "values are wrong"), (0, "values are wrong"), (0, "no timed runs"))
STATUS = "caught"
