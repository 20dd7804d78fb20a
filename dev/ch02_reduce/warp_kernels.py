"""Warp-intrinsic kernels with fixed inputs, run both on a GPU and in the simulator.

Every kernel uses only the real ``numba.cuda`` API (no simulator-only ``width``)
and only behaviour that is defined on hardware, so the GPU and the simulator
must agree.  ``CASES`` maps a case name to a function that launches its kernel
on fixed inputs and returns ``{output name: numpy array}``.

Import this module after choosing the target: set ``NUMBA_ENABLE_CUDASIM=1``
before numba is first imported for the simulator, and call
``grader.sim.warp.install()`` (``run_case`` does that; it is a no-op on a GPU).
"""

import math

import numpy as np
from numba import cuda

FULL = 0xFFFFFFFF
EVEN_LANES = 0x55555555
ODD_LANES = 0xAAAAAAAA

CASES = {}


def case(function):
    CASES[function.__name__] = function
    return function


def run_case(name):
    """Run one case on the current target; returns its output arrays."""
    from grader.sim import warp as sim_warp

    sim_warp.install()
    return CASES[name]()


# ---------------------------------------------------------------- shuffles


@cuda.jit
def shfl_idx_kernel(x, src, out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_sync(FULL, x[i], src[i])


@case
def shfl_idx():
    """Each lane reads lane src[i]; values of src of 32 and above wrap mod 32."""
    n = 64
    x = (np.arange(n, dtype=np.int32) * 10 + 1).astype(np.int32)
    src = ((np.arange(n) * 7 + 3) % 40).astype(np.int32)
    out = np.zeros(n, np.int32)
    shfl_idx_kernel[1, n](x, src, out)
    return {"out": out}


@cuda.jit
def shfl_up_kernel(x, out, delta):
    i = cuda.grid(1)
    out[i] = cuda.shfl_up_sync(FULL, x[i], delta)


@case
def shfl_up():
    """float32, delta 3: lanes 0..2 keep their own value."""
    n = 64
    x = (np.arange(n) * 0.5 + 1).astype(np.float32)
    out = np.zeros(n, np.float32)
    shfl_up_kernel[1, n](x, out, 3)
    return {"out": out}


@cuda.jit
def shfl_down_kernel(x, out, delta):
    i = cuda.grid(1)
    out[i] = cuda.shfl_down_sync(FULL, x[i], delta)


@case
def shfl_down_int64():
    """int64 values wider than 32 bits, delta 5: lanes 27..31 keep theirs."""
    n = 64
    x = np.arange(n, dtype=np.int64) * (1 << 33) + 5
    out = np.zeros(n, np.int64)
    shfl_down_kernel[1, n](x, out, 5)
    return {"out": out}


@cuda.jit
def shfl_xor_kernel(x, out, lane_mask):
    i = cuda.grid(1)
    out[i] = cuda.shfl_xor_sync(FULL, x[i], lane_mask)


@case
def shfl_xor_float64():
    n = 64
    x = np.arange(n, dtype=np.float64) ** 2 - 0.25
    out = np.zeros(n, np.float64)
    shfl_xor_kernel[1, n](x, out, 6)
    return {"out": out}


@cuda.jit
def xor_allreduce_kernel(x, out):
    i = cuda.grid(1)
    v = x[i]
    for lane_mask in (16, 8, 4, 2, 1):
        v += cuda.shfl_xor_sync(FULL, v, lane_mask)
    out[i] = v


@case
def xor_allreduce():
    """Butterfly all-reduce: every lane ends with its warp's sum."""
    n = 96
    x = (np.arange(n) % 13).astype(np.float32)
    out = np.zeros(n, np.float32)
    xor_allreduce_kernel[1, n](x, out)
    return {"out": out}


@cuda.jit
def partial_mask_kernel(x, out):
    i = cuda.grid(1)
    lane = cuda.threadIdx.x % 32
    # even and odd lanes form two independent groups
    if lane % 2 == 0:
        out[i] = cuda.shfl_sync(EVEN_LANES, x[i], 0)
    else:
        out[i] = cuda.shfl_sync(ODD_LANES, x[i], 1)


@case
def partial_mask_broadcast():
    n = 64
    x = (np.arange(n, dtype=np.int32) * 3 + 7).astype(np.int32)
    out = np.zeros(n, np.int32)
    partial_mask_kernel[1, n](x, out)
    return {"out": out}


@cuda.jit
def lower_half_kernel(x, out):
    i = cuda.grid(1)
    lane = cuda.threadIdx.x % 32
    v = x[i]
    if lane < 16:
        v = cuda.shfl_xor_sync(0xFFFF, v, 3)
    out[i] = v


@case
def lower_half_xor():
    """Only lanes 0..15 shuffle (mask 0xFFFF); the upper half is untouched."""
    n = 32
    x = (np.arange(n, dtype=np.int32) + 100).astype(np.int32)
    out = np.zeros(n, np.int32)
    lower_half_kernel[1, n](x, out)
    return {"out": out}


@cuda.jit
def partial_warp_kernel(x, sums, votes):
    i = cuda.grid(1)
    v = x[i]
    # lane masks 8..1 stay inside the 16 lanes of the short second warp
    for lane_mask in (8, 4, 2, 1):
        v += cuda.shfl_xor_sync(FULL, v, lane_mask)
    sums[i] = v
    votes[i] = cuda.ballot_sync(FULL, x[i] > 0)


@case
def partial_last_warp():
    """Block of 48 threads: the second warp has 16 lanes."""
    n = 48
    x = (np.arange(n, dtype=np.int32) % 5).astype(np.int32)
    sums = np.zeros(n, np.int32)
    votes = np.zeros(n, np.int32)
    partial_warp_kernel[1, n](x, sums, votes)
    return {"sums": sums, "votes": votes}


@cuda.jit
def two_d_block_kernel(out):
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    out[ty, tx] = cuda.shfl_sync(FULL, tx + 100 * ty, 0)


@case
def two_d_block():
    """Block (8, 8): warps are 32 consecutive linear ids x + 8*y."""
    out = np.zeros((8, 8), np.int64)
    two_d_block_kernel[1, (8, 8)](out)
    return {"out": out}


# ---------------------------------------------------------------- votes


@cuda.jit
def vote_kernel(pred, ballots, alls, anys, eqs):
    i = cuda.grid(1)
    p = pred[i] != 0
    ballots[i] = cuda.ballot_sync(FULL, p)
    alls[i] = 1 if cuda.all_sync(FULL, p) else 0
    anys[i] = 1 if cuda.any_sync(FULL, p) else 0
    eqs[i] = 1 if cuda.eq_sync(FULL, p) else 0


def vote_predicates():
    """Warp 0 all true, 1 all false, 2 only lane 31, 3 lanes i % 3 == 0."""
    pred = np.zeros(128, np.int32)
    pred[0:32] = 1
    pred[64 + 31] = 1
    pred[96:128] = (np.arange(32) % 3 == 0)
    return pred


@case
def votes():
    pred = vote_predicates()
    outs = {k: np.zeros(128, np.int32) for k in ("ballots", "alls", "anys", "eqs")}
    vote_kernel[1, 128](pred, outs["ballots"], outs["alls"], outs["anys"], outs["eqs"])
    return outs


@cuda.jit
def ballot_partial_kernel(pred, out):
    i = cuda.grid(1)
    lane = cuda.threadIdx.x % 32
    if lane < 20:
        out[i] = cuda.ballot_sync(0xFFFFF, pred[i] != 0)


@case
def ballot_partial_mask():
    """Lanes 0..19 vote with mask 0xFFFFF; lanes 20..31 stay out."""
    pred = np.ones(32, np.int32)
    pred[[1, 5, 19]] = 0
    out = np.full(32, -7, np.int32)
    ballot_partial_kernel[1, 32](pred, out)
    return {"out": out}


@cuda.jit
def match_kernel(values, any_masks, all_masks, all_preds):
    i = cuda.grid(1)
    any_masks[i] = cuda.match_any_sync(FULL, values[i])
    m, p = cuda.match_all_sync(FULL, values[i])
    all_masks[i] = m
    all_preds[i] = 1 if p else 0


@case
def match():
    """Warp 0: value lane % 3; warp 1: every lane holds 2.5."""
    values = np.empty(64, np.float32)
    values[:32] = np.arange(32) % 3
    values[32:] = 2.5
    outs = {k: np.zeros(64, np.int32) for k in ("any_masks", "all_masks", "all_preds")}
    match_kernel[1, 64](values, outs["any_masks"], outs["all_masks"], outs["all_preds"])
    return outs


# ---------------------------------------------------------------- masks


@cuda.jit
def masks_kernel(whole, branch, below):
    i = cuda.grid(1)
    lane = cuda.threadIdx.x % 32
    whole[i] = cuda.activemask()
    below[i] = cuda.lanemask_lt()
    if lane < 10:
        branch[i] = cuda.activemask()


@case
def masks():
    """activemask in uniform code and inside `if lane < 10`; lanemask_lt."""
    n = 48
    whole = np.zeros(n, np.uint32)
    branch = np.zeros(n, np.uint32)
    below = np.zeros(n, np.uint32)
    masks_kernel[1, n](whole, branch, below)
    return {"whole": whole, "branch": branch, "below": below}


@cuda.jit
def syncwarp_kernel(x, out):
    s = cuda.shared.array(64, np.int32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    cuda.syncwarp()
    out[t] = s[t ^ 1]


@case
def syncwarp_exchange():
    x = (np.arange(64, dtype=np.int32) * 11).astype(np.int32)
    out = np.zeros(64, np.int32)
    syncwarp_kernel[1, 64](x, out)
    return {"out": out}


# ---------------------------------------------------------------- lessons


@cuda.jit
def block_sum_kernel(x, out):
    partial = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    lane = t % 32
    warp = t // 32
    v = x[i] if i < x.size else np.float32(0)
    for offset in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(FULL, v, offset)
    if lane == 0:
        partial[warp] = v
    cuda.syncthreads()
    if warp == 0:
        nwarps = (cuda.blockDim.x + 31) // 32
        v = partial[lane] if lane < nwarps else np.float32(0)
        for offset in (16, 8, 4, 2, 1):
            v += cuda.shfl_down_sync(FULL, v, offset)
        if lane == 0:
            out[cuda.blockIdx.x] = v


def block_sum_input():
    return (np.arange(1000) % 17).astype(np.float32)


@case
def block_sum():
    """Block reduction: shuffles inside warps, shared memory across warps."""
    x = block_sum_input()
    out = np.zeros(4, np.float32)
    block_sum_kernel[4, 256](x, out)
    return {"out": out}


@cuda.jit
def warp_softmax_kernel(x, out):
    # one warp per row of 64 columns: each lane handles 2 columns
    row = cuda.blockIdx.x
    lane = cuda.threadIdx.x
    a = x[row, lane]
    b = x[row, lane + 32]
    m = max(a, b)
    for lane_mask in (16, 8, 4, 2, 1):
        m = max(m, cuda.shfl_xor_sync(FULL, m, lane_mask))
    ea = math.exp(a - m)
    eb = math.exp(b - m)
    s = ea + eb
    for lane_mask in (16, 8, 4, 2, 1):
        s += cuda.shfl_xor_sync(FULL, s, lane_mask)
    out[row, lane] = ea / s
    out[row, lane + 32] = eb / s


def softmax_input():
    rng = np.random.default_rng(7)
    return rng.standard_normal((3, 64)).astype(np.float32) * 4


@case
def warp_softmax():
    x = softmax_input()
    out = np.zeros_like(x)
    warp_softmax_kernel[3, 32](x, out)
    return {"out": out}
