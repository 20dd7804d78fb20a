"""Chapter 02, reduce: targets from CURRICULUM.md.

bf16 tensors are their bits in uint16 arrays (grader.bf16); outputs declared
``BF16`` are compared as numbers. Softmax and RMSNorm sizes are ``Rows``:
(rows, cols) with a ``scale`` for the magnitude of the inputs, so hidden tests
can hold rows whose exp() overflows float32 (|x| ≫ 88) or whose squares
overflow float16 (x² ≫ 65504).
"""
from __future__ import annotations

import math

import numpy as np

from .. import bf16, parallel, peers
from ..bf16 import BF16
from .. import integrity as _integrity
from ..problem import Problem

EPS32 = 2.0 ** -24
BLOCK = 256          # elements summed by one output of block_sum


# ------------------------------------------------------------------ 01 block sum
def _uniform(rng, n):
    # positive inputs: the sum grows like n/2 and a relative tolerance means something
    return {"x": parallel.random(rng, n)}


def _sum_tol(n, dtype):
    # float32 partial sums: relative error grows like sqrt(n)·eps for tree/blocked
    # summation of positive values; ×32 headroom for atomics in any order
    return (32 * EPS32 * (8 + math.sqrt(max(n, 1))), 1e-6)


block_sum = Problem(
    name="block sum",
    make_inputs=_uniform,
    outputs=lambda n, inputs: {"sums": (((n + BLOCK - 1) // BLOCK,), np.float32)},
    reference=lambda x: {"sums": np.add.reduceat(x.astype(np.float64), np.arange(0, x.size, BLOCK))},
    sizes=[1, 256, 1000, 1_000_003, 1 << 24],
    sim_sizes=[1, 256, 1000, 2311],
    hidden_sizes=[255, 257, 65_537, 10_000_019],
    hidden_sim_sizes=[255, 257, 513, 1031],
    tolerance=lambda n, dt: _sum_tol(BLOCK, dt),
    hint="sums[b] is the sum of x[256·b : 256·b + 256]: one block of 256 threads per output, "
         "threads past the end of x contribute 0.",
    bytes_moved=lambda n: 4 * n,          # read x once; the sums are 1/256 of that
    bench_size=1 << 27,
    peer=peers.copy(), target=0.5, floor=0.05,
)

# ------------------------------------------------------------------ 02 sum and dot
def _torch_sum(x):
    import torch

    return torch.sum(x)


total_sum = Problem(
    name="sum",
    make_inputs=_uniform,
    outputs=lambda n, inputs: {"out": ((1,), np.float32)},
    reference=lambda x: {"out": np.array([x.astype(np.float64).sum()])},
    # 1 element, a full block, primes, 2^k ± 1, large
    sizes=[1, 1000, 65_537, 1_000_003, 1 << 26],
    sim_sizes=[1, 256, 4099],
    hidden_sizes=[7, 4095, 4097, 999_983, (1 << 24) + 1],
    hidden_sim_sizes=[2, 1025, 3001],
    tolerance=_sum_tol,
    hint="The output arrives filled with NaN: if you accumulate into it with atomics, set it to 0 "
         "first (a one-thread kernel before the main one). Every element of x must be counted once.",
    bytes_moved=lambda n: 4 * n,          # 4 B per element read; the result is one float
    bench_size=1 << 28,                   # 1 GiB: far past the L2
    # a sum only reads: its ceiling is the read bandwidth (the better of a read stream and torch.sum)
    peer=peers.read_stream(peers.torch_op("torch.sum", _torch_sum)), target=0.70, floor=0.10,
)


def _two_uniform(rng, n):
    return {"a": parallel.random(rng, n), "b": parallel.random(rng, n)}


dot = Problem(
    name="dot product",
    make_inputs=_two_uniform,
    outputs=lambda n, inputs: {"out": ((1,), np.float32)},
    reference=lambda a, b: {"out": np.array([a.astype(np.float64) @ b.astype(np.float64)])},
    sizes=[1, 1000, 1_000_003, 1 << 26],
    sim_sizes=[1, 1000, 3001],
    hidden_sizes=[3, 65_537], hidden_sim_sizes=[3, 2049],
    tolerance=_sum_tol,
    bytes_moved=lambda n: 8 * n,          # read a and b
    bench_size=1 << 27,
    peer=peers.copy(), target=0.70, floor=0.10,
)


# ------------------------------------------------------------------ 03 the online softmax state
def _stream(rng, size):
    n, split = size
    # values in the hundreds: exp(x) alone overflows float32, so the state must carry the max
    return {"xs": (rng.standard_normal(n) * 300).astype(np.float32), "split": int(split)}


def _state_ref(xs, split):
    x = xs.astype(np.float64)
    m = x.max()
    l = np.exp(x - m).sum()
    # (m, l) of the whole stream; the same from the two halves merged; exp(m) and l of two empty
    # states merged (exp(-inf) = 0: a NaN or a finite max fails)
    return {"state": np.array([m, l, m, l, 0.0, 0.0])}


online_state = Problem(
    name="online softmax state",
    make_inputs=_stream,
    outputs=lambda size, inputs: {"state": ((6,), np.float32)},
    reference=_state_ref,
    # (stream length, where it is cut before the merge): a single value, cuts at both ends, odd cuts
    sizes=[(1, 0), (1, 1), (7, 3), (50, 0), (50, 50), (64, 17)],
    sim_sizes=[(1, 0), (1, 1), (7, 3), (50, 0), (50, 50), (64, 17)],
    hidden_sizes=[(2, 1), (33, 16), (100, 99), (128, 0)],
    hidden_sim_sizes=[(2, 1), (33, 16), (100, 99), (128, 0)],
    # float32 sums of exp over the stream: 1e-5 relative per element, as the lesson states
    tolerance=lambda size, dtype: (1e-5 * max(size[0], 1), 0.0),
    hint="online_update(m, l, x): if x is a new max, rescale l by exp(m - x) before adding 1. "
         "online_merge: rescale both sums to the larger max; two empty states (-inf, 0) merge to (-inf, 0).",
)


# ------------------------------------------------------------------ rows: softmax, norms
class Rows(tuple):
    """(rows, cols) of a row-wise problem, with the magnitude of its inputs (``scale``)."""

    def __new__(cls, rows, cols, scale=1.0):
        t = super().__new__(cls, (rows, cols))
        t.scale = scale
        return t

    def __reduce__(self):
        return (Rows, (self[0], self[1], self.scale))


def _bf16_rows(rng, size):
    rows, cols = size
    x = parallel.normal(rng, (rows, cols))
    x *= np.float32(getattr(size, "scale", 1.0))
    return bf16.from_f32(x)                   # (rows, cols) bf16 bits


def _torch_softmax(x):
    import torch

    return torch.softmax(x.view(torch.bfloat16), dim=-1)


def _torch_rms_norm(x, w):
    import torch

    return torch.nn.functional.rms_norm(x.view(torch.bfloat16), (x.shape[-1],), w.view(torch.bfloat16), RMS_EPS)


def _softmax_inputs(rng, size):
    return {"x": _bf16_rows(rng, size)}


@parallel.rowwise("x")
def _softmax_ref(x):
    xf = bf16.to_f32(x).astype(np.float64)    # what the bf16 input holds
    e = np.exp(xf - xf.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}


def _row_tol(size, dtype):
    # one bf16 rounding of the output (2^-9) + fp32 sums over the row
    rows, cols = size
    return (8e-3 + 4 * EPS32 * math.sqrt(cols), 1e-30)


LARGE = 300.0      # |x| in the hundreds: exp(x) overflows float32 (> 88.7), x² overflows float16

softmax_bf16 = Problem(
    name="softmax bf16",
    make_inputs=_softmax_inputs,
    outputs=lambda size, inputs: {"y": (tuple(size), BF16)},
    reference=_softmax_ref,
    # rows of length 1, primes, 2^k ± 1, very long rows, rows of large magnitude
    sizes=[Rows(1, 1), Rows(37, 1000), Rows(4096, 8192), Rows(64, 32768)],
    sim_sizes=[Rows(1, 1), Rows(5, 37), Rows(2, 1024), Rows(1, 2049)],
    hidden_sizes=[Rows(3, 1), Rows(7, 127), Rows(1023, 4097), Rows(2, 262_144),
                  Rows(256, 4096, LARGE), Rows(16, 100_003, LARGE)],
    hidden_sim_sizes=[Rows(4, 1), Rows(3, 127), Rows(1, 4097), Rows(2, 1031, LARGE), Rows(1, 2048, LARGE)],
    tolerance=_row_tol,
    hint="Hidden rows hold values in the hundreds: exp(x) overflows float32 above 88.7, so subtract "
         "the row maximum first. Sum in float32; convert to bf16 only when storing.",
    bytes_moved=lambda s: 2 * 2 * s[0] * s[1],   # read x, write y: 2 B each per element
    bench_size=Rows(32768, 8192),
    peer=peers.torch_op("torch.softmax", _torch_softmax), target=1.0, floor=0.25,
)


def _rms_inputs(rng, size):
    rows, cols = size
    w = bf16.from_f32(1.0 + 0.1 * rng.standard_normal(cols, dtype=np.float32))
    return {"x": _bf16_rows(rng, size), "w": w}


RMS_EPS = 1e-6     # as torch's rms_norm is called in the peer
LN_EPS = 1e-5


@parallel.rowwise("x")
def _rms_ref(x, w, eps=RMS_EPS):
    xf = bf16.to_f32(x).astype(np.float64)
    wf = bf16.to_f32(w).astype(np.float64)
    r = 1.0 / np.sqrt((xf * xf).mean(axis=1, keepdims=True) + eps)
    return {"y": xf * r * wf}


rmsnorm_bf16 = Problem(
    name="RMSNorm bf16",
    make_inputs=_rms_inputs,
    outputs=lambda size, inputs: {"y": (tuple(size), BF16)},
    reference=_rms_ref,
    sizes=[Rows(1, 1), Rows(37, 1000), Rows(4096, 4096), Rows(8, 65_536)],
    sim_sizes=[Rows(1, 1), Rows(5, 37), Rows(2, 1024), Rows(1, 2049)],
    hidden_sizes=[Rows(3, 1), Rows(7, 127), Rows(1023, 4097), Rows(2, 262_144),
                  Rows(256, 4096, LARGE), Rows(16, 100_003, LARGE)],
    hidden_sim_sizes=[Rows(4, 1), Rows(3, 127), Rows(1, 4097), Rows(2, 1031, LARGE), Rows(1, 2048, LARGE)],
    tolerance=lambda s, dt: (8e-3 + 4 * EPS32 * math.sqrt(s[1]), 1e-6),
    hint="Accumulate the sum of squares in float32 (hidden rows hold values in the hundreds: their "
         "squares overflow float16), and multiply by the weight w[col].",
    bytes_moved=lambda s: 2 * 2 * s[0] * s[1] + 2 * s[1],   # read x, write y (2 B each), read w once
    bench_size=Rows(32768, 4096),
    peer=peers.torch_op("torch rms_norm", _torch_rms_norm), target=1.0, floor=0.25,
)


def _ln_inputs(rng, size):
    rows, cols = size
    # rows with a large mean: the one-pass E[x²] − E[x]² formula cancels catastrophically
    x = parallel.normal(rng, (rows, cols))
    x += np.float32(1000.0)
    return {"x": x}


@parallel.rowwise("x")
def _ln_ref(x, eps=LN_EPS):
    xf = x.astype(np.float64)
    mu = xf.mean(axis=1, keepdims=True)
    var = ((xf - mu) ** 2).mean(axis=1, keepdims=True)
    return {"y": (xf - mu) / np.sqrt(var + eps)}


layernorm = Problem(
    name="LayerNorm fp32",
    make_inputs=_ln_inputs,
    outputs=lambda size, inputs: {"y": (tuple(size), np.float32)},
    reference=_ln_ref,
    sizes=[Rows(1, 2), Rows(37, 1000), Rows(4096, 4096)],
    sim_sizes=[Rows(1, 2), Rows(5, 37), Rows(3, 1024)],
    hidden_sizes=[Rows(3, 3), Rows(7, 4097)], hidden_sim_sizes=[Rows(3, 3), Rows(2, 1031)],
    # inputs near 1000 carry an absolute rounding of 1000·2^-24 ≈ 6e-5 on a unit-variance row
    tolerance=lambda s, dt: (2e-3, 2e-3),
    bytes_moved=lambda s: 2 * 4 * s[0] * s[1],
    bench_size=Rows(32768, 4096),
    peer=peers.copy(), target=0.7, floor=0.1,
)


# ------------------------------------------------------------------ 05 scan and histogram
def _ints(rng, n):
    return {"x": rng.integers(-100, 100, n, dtype=np.int32)}


scan = Problem(
    name="inclusive scan",
    make_inputs=_ints,
    outputs=lambda n, inputs: {"y": ((n,), np.int32)},
    reference=lambda x: {"y": np.cumsum(x, dtype=np.int64).astype(np.int32)},
    sizes=[1, 1000, 65_537, 1 << 24],
    sim_sizes=[1, 256, 1000, 2049],
    hidden_sizes=[7, 4095, 1_000_003], hidden_sim_sizes=[2, 255, 257, 1537],
    hint="y[i] = x[0] + … + x[i]. Across blocks: scan each block, scan the block totals, "
         "then add to every element the total of all earlier blocks.",
    bytes_moved=lambda n: 2 * 4 * n,
    bench_size=1 << 26, peer=peers.copy(), target=0.5, floor=0.05,
)

BINS = 256


def _bytes_in(rng, n):
    # skewed: a few bins are hot, as in real data (contention is the interesting part)
    return {"x": np.minimum(rng.geometric(0.05, n) - 1, BINS - 1).astype(np.int32)}


histogram = Problem(
    name="histogram",
    make_inputs=_bytes_in,
    outputs=lambda n, inputs: {"counts": ((BINS,), np.int32)},
    reference=lambda x: {"counts": np.bincount(x, minlength=BINS).astype(np.int32)},
    sizes=[1, 1000, 1 << 24], sim_sizes=[1, 1000, 3001],
    hidden_sizes=[7, 65_537], hidden_sim_sizes=[5, 2049],
    hint="The output arrives filled with poison: zero the counts first.",
    bytes_moved=lambda n: 4 * n,
    bench_size=1 << 26, peer=peers.copy(), target=0.5, floor=0.05,
)


# ------------------------------------------------------------------ torch peers (GPU only)
torch_sum = peers.torch_op("torch.sum", _torch_sum)      # the reference's second goal (≥ torch.sum)


_integrity.record_problems(globals())   # the fields checks rely on, before any learner code
