"""Computes once per size, then replays the cached output: fresh inputs on every check catch it
the second time a size comes up (n = 1: visible, then the hidden cell)."""
from . import expect

SOURCE = '''
@cuda.jit
def vector_add(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


_cache = {}


def launch_vector_add(a, b, c):
    n = c.size
    if n in _cache:
        c.copy_to_device(_cache[n])
        return
    vector_add[(n + 255) // 256, 256](a, b, c)
    _cache[n] = c.copy_to_host()
'''
EXPECT = expect((2, ""), (0, "values are wrong"), (0, "not graded: no GPU"))
# on a GPU the speed cell's inputs stay the same across repetitions: the replay is right there
# and only "no kernel was launched" style checks in check() see it (README: cached outputs)
EXPECT_GPU = None
STATUS = "caught (correctness); documented: speed cell's fixed inputs"
