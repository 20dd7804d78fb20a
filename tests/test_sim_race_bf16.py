"""The simulator's shared-memory race check (grader.sim.race) and the bf16 helpers (grader.bf16)."""
import grader  # noqa: F401  (simulator first)
import numpy as np
import pytest
from numba import cuda, float32

from grader import bf16
from grader.arrays import poisoned
from grader.compare import compare
from grader.sim.race import SharedMemoryRace


@cuda.jit
def _tree(x, out, barrier):
    s = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    cuda.syncthreads()
    stride = 32
    while stride > 0:
        if t < stride:
            s[t] += s[t + stride]
        if barrier:
            cuda.syncthreads()
        stride //= 2
    if t == 0:
        out[0] = s[0]


@cuda.jit
def _warp_smem(x, out, use_syncwarp):
    s = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    if use_syncwarp:
        cuda.syncwarp()
    out[t] = s[31 - t]


@cuda.jit
def _stale(out):
    s = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    if cuda.blockIdx.x == 0:
        s[t] = 1.0
    cuda.syncthreads()
    out[cuda.grid(1)] = s[t]


@cuda.jit
def _atomics(out):
    s = cuda.shared.array(1, float32)
    if cuda.threadIdx.x == 0:
        s[0] = 0
    cuda.syncthreads()
    cuda.atomic.add(s, 0, 1.0)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        out[0] = s[0]


def test_tree_with_barriers_passes():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(1, np.float32)
    _tree[1, 64](x, out, True)
    assert out[0] == x.sum()


def test_missing_syncthreads_is_a_race_every_time():
    x = np.arange(64, dtype=np.float32)
    for _ in range(3):
        with pytest.raises(Exception, match="shared-memory race"):
            _tree[1, 64](x, np.zeros(1, np.float32), False)


def test_syncwarp_orders_a_warp():
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    _warp_smem[1, 32](x, out, True)
    assert (out == x[::-1]).all()
    with pytest.raises(Exception, match="shared-memory race"):
        _warp_smem[1, 32](x, out, False)


def test_reading_what_another_block_wrote_is_reported():
    with pytest.raises(Exception, match="no thread of this block wrote"):
        _stale[2, 32](np.zeros(64, np.float32))


def test_atomics_are_not_races():
    out = np.zeros(1, np.float32)
    _atomics[1, 64](out)
    assert out[0] == 64


def test_bf16_round_trip_and_rounding():
    a = np.array([1.0, -2.5, 3.14159, 1e-30, 65504.0, 1 + 2**-8, 1 + 3 * 2**-8], np.float32)
    b = bf16.from_f32(a)
    assert b.dtype == np.uint16
    back = bf16.to_f32(b)
    assert np.allclose(back, a, rtol=2**-8)
    # ties round to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> 1
    assert back[5] == 1.0 and back[6] == 1 + 2**-6
    # device helpers (simulator: plain Python) agree with the host ones
    assert bf16.to_float(b[2]) == back[2]
    assert bf16.from_float(np.float32(3.14159)) == b[2]
    u = np.uint32(int(b[0]) | (int(b[1]) << 16))
    assert bf16.lo(u) == 1.0 and bf16.hi(u) == -2.5
    assert bf16.pack(1.0, -2.5) == u


def test_bf16_outputs_are_poisoned_and_compared_as_numbers():
    flat = poisoned((4,), bf16.BF16)
    assert flat.dtype == np.uint16 and np.isnan(bf16.to_f32(flat)).all()
    want = np.array([1.0, 2.0, 3.0, 4.0])
    got = bf16.from_f32(want * (1 + 1e-3))
    assert compare("y", got, want, 8e-3, 0, dtype=bf16.BF16) == []
    got[1] = flat[0]
    lines = compare("y", got, want, 8e-3, 0, dtype=bf16.BF16)
    assert "never written" in "\n".join(lines)
