"""Warp-level intrinsics for Numba's CUDA simulator.

Numba's simulator (``NUMBA_ENABLE_CUDASIM=1``) runs every CUDA thread of a
block as a Python thread but has no warp intrinsics. :func:`install` adds them
to the simulator's fake ``cuda`` module, with the semantics of the real
``numba.cuda`` functions (argument order and return types checked against
numba-cuda 0.30):

==============================================  ============================
``shfl_sync(mask, value, src_lane)``            value of the same type
``shfl_up_sync(mask, value, delta)``            value of the same type
``shfl_down_sync(mask, value, delta)``          value of the same type
``shfl_xor_sync(mask, value, lane_mask)``       value of the same type
``ballot_sync(mask, predicate)``                ``np.int32`` bit mask
``all_sync / any_sync / eq_sync(mask, pred)``   ``bool``
``match_any_sync(mask, value)``                 ``np.int32`` bit mask
``match_all_sync(mask, value)``                 ``(np.int32 mask, bool)``
``activemask()`` / ``lanemask_lt()``            ``np.uint32``
``syncwarp(mask=0xFFFFFFFF)``                   ``None``
==============================================  ============================

A warp is 32 consecutive linear thread ids of a block (linear id =
x + y*Dx + z*Dx*Dy), the lane is linear id % 32, and the last warp of a block
whose size is not a multiple of 32 has fewer lanes.  Lanes named in ``mask``
meet at the call: every one of them must reach the same intrinsic with the
same mask, and each gets a result computed from all their values.  Lanes of
the mask that do not exist (past the end of a partial warp) are ignored.

Shuffles follow the PTX ``shfl.sync`` rules that Numba compiles to: the lane
operand is taken modulo 32 (bits 4:0); ``shfl_up``/``shfl_down`` return the
caller's own value when the source lane falls outside the warp.  Numba's
shuffles take no ``width``; the simulator accepts an optional ``width`` (a
power of two, 1..32) that behaves like CUDA C ``__shfl_*_sync(mask, var, x,
width)``: the warp is cut into segments of ``width`` lanes, ``shfl_sync``
reads lane ``src_lane % width`` of the caller's segment, ``shfl_up``/``down``
do not cross the segment and return the caller's own value when out of range,
and ``shfl_xor`` may read earlier segments but returns the caller's own value
for a later one.  **A kernel that passes ``width`` does not compile on a GPU
with Numba**; it exists so the CUDA C lessons can be mirrored in Python.

What is undefined on hardware is an error here (a ``WarpSyncError`` naming the
lanes): a mask that omits the caller, a shuffle that reads a lane outside the
mask or past the end of a partial warp, and a lane of the mask that exits,
waits in ``syncthreads`` or waits in a different warp intrinsic (or with a
different mask) instead of reaching the call -- the simulator reports it
instead of hanging.  Shuffles reject the value types Numba rejects (only
int32, int64, float32, float64 and Python int/float).

Where the simulator misleads (blocks run one after another, threads are not in lockstep, …):
docs/SIMULATOR.md.
"""
from __future__ import annotations

import threading

import numpy as np

from .warp_sync import (_SHUFFLE_TYPES, FULL_MASK, WARP_SIZE, WarpSyncError, _as_int32, _current,
                        _patch_block_thread, _rendezvous, activemask)

__all__ = ["install", "is_installed", "WarpSyncError", "WARP_SIZE", "FULL_MASK"]

_installed = False
_install_lock = threading.Lock()


# --------------------------------------------------------------------------
# Shuffles


def _check_shuffle_value(op, value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float) + _SHUFFLE_TYPES
    ):
        raise TypeError(
            f"{op} supports only int32, int64, float32 and float64 values "
            f"(as Numba does); got {type(value).__name__}"
        )


def _check_width(op, width):
    if width not in (1, 2, 4, 8, 16, 32):
        raise WarpSyncError(
            f"{op}: width must be a power of two from 1 to 32, got {width!r}"
        )


def _source_lane(mode, lane, b, width):
    """Source lane by the PTX shfl.sync rules; own lane when out of range."""
    bval = int(b) & 0x1F
    segmask = (WARP_SIZE - width) & 0x1F
    clamp = 0 if mode == "up" else 0x1F
    max_lane = (lane & segmask) | (clamp & ~segmask)
    min_lane = lane & segmask
    if mode == "up":
        j = lane - bval
        ok = j >= max_lane
    elif mode == "down":
        j = lane + bval
        ok = j <= max_lane
    elif mode == "xor":
        j = lane ^ bval
        ok = j <= max_lane
    else:  # idx
        j = min_lane | (bval & ~segmask & 0x1F)
        ok = j <= max_lane
    return j if ok else lane


def _make_shuffle(mode, op, operand_name):
    def compute(group, state, warp):
        lanes_here = state.lanes_in_warp(warp)
        for lane, arrival in group.items():
            src = _source_lane(mode, lane, arrival.value[1], arrival.width)
            if src in group:
                arrival.result = group[src].value[0]
            elif src >= lanes_here:
                arrival.error = (
                    f"{op}: lane {lane} of warp {warp} reads lane {src}, which "
                    f"does not exist (this warp has {lanes_here} lanes)"
                )
            else:
                arrival.error = (
                    f"{op}: lane {lane} of warp {warp} reads lane {src}, which "
                    f"is not in mask {arrival.mask:#010x} (undefined on a GPU)"
                )

    def shuffle(self, mask, value, operand, width=WARP_SIZE):
        _check_shuffle_value(op, value)
        _check_width(op, width)
        return _rendezvous(op, mask, compute, (value, operand), width)

    shuffle.__name__ = op
    shuffle.__doc__ = (
        f"cuda.{op}(mask, value, {operand_name}) as in Numba (width: "
        "simulator-only extension, CUDA C semantics)."
    )
    return shuffle


shfl_sync = _make_shuffle("idx", "shfl_sync", "src_lane")
shfl_up_sync = _make_shuffle("up", "shfl_up_sync", "delta")
shfl_down_sync = _make_shuffle("down", "shfl_down_sync", "delta")
shfl_xor_sync = _make_shuffle("xor", "shfl_xor_sync", "lane_mask")


# --------------------------------------------------------------------------
# Votes and matches


def _vote(op, reduce):
    def compute(group, state, warp):
        preds = {lane: bool(a.value) for lane, a in group.items()}
        result = reduce(preds)
        for arrival in group.values():
            arrival.result = result

    def vote(self, mask, predicate):
        return _rendezvous(op, mask, compute, predicate)

    vote.__name__ = op
    return vote


def _ballot(preds):
    return _as_int32(sum(1 << lane for lane, p in preds.items() if p))


ballot_sync = _vote("ballot_sync", _ballot)
ballot_sync.__doc__ = "Bit i set if lane i is in mask and its predicate is true (np.int32)."
all_sync = _vote("all_sync", lambda preds: all(preds.values()))
all_sync.__doc__ = "True if the predicate is true on every lane of mask."
any_sync = _vote("any_sync", lambda preds: any(preds.values()))
any_sync.__doc__ = "True if the predicate is true on some lane of mask."
eq_sync = _vote("eq_sync", lambda preds: len(set(preds.values())) == 1)
eq_sync.__doc__ = "True if the predicate has the same truth value on every lane of mask."


def _bit_pattern(value):
    # GPUs compare the bits: -0.0 != 0.0 and equal NaNs match
    return np.asarray(value).tobytes()


def _match_any_compute(group, state, warp):
    for lane, arrival in group.items():
        mine = _bit_pattern(arrival.value)
        bits = sum(1 << o for o, a in group.items() if _bit_pattern(a.value) == mine)
        arrival.result = _as_int32(bits)


def _match_all_compute(group, state, warp):
    same = len({_bit_pattern(a.value) for a in group.values()}) == 1
    bits = sum(1 << lane for lane in group) if same else 0
    for arrival in group.values():
        arrival.result = (_as_int32(bits), same)


def match_any_sync(self, mask, value):
    """Mask (np.int32) of the lanes of mask whose value has the caller's bits."""
    _check_shuffle_value("match_any_sync", value)
    return _rendezvous("match_any_sync", mask, _match_any_compute, value)


def match_all_sync(self, mask, value):
    """(mask of participants, True) if all values are equal, else (0, False)."""
    _check_shuffle_value("match_all_sync", value)
    return _rendezvous("match_all_sync", mask, _match_all_compute, value)


def _no_result(group, state, warp):
    pass


def syncwarp(self, mask=FULL_MASK):
    """Wait until every lane of mask has reached a syncwarp with this mask."""
    _rendezvous("syncwarp", mask, _no_result)


def lanemask_lt(self):
    """np.uint32 with a bit for every lane below the caller's lane."""
    lane = _current().thread_id % WARP_SIZE
    return np.uint32((1 << lane) - 1)


# --------------------------------------------------------------------------
# Bit counts (width-aware: Numba's int32 results)


def _unsigned(value):
    bits = value.dtype.itemsize * 8 if isinstance(value, np.integer) else 64
    return int(value) & ((1 << bits) - 1), bits


def popc(self, value):
    """Number of set bits in value's two's-complement bit pattern."""
    return bin(_unsigned(value)[0]).count("1")


def clz(self, value):
    """Number of leading zero bits."""
    u, bits = _unsigned(value)
    return bits - u.bit_length()


def ffs(self, value):
    """Position (1-based) of the least significant set bit; 0 if none."""
    u, _ = _unsigned(value)
    return (u & -u).bit_length()


# --------------------------------------------------------------------------
# Installation


_INTRINSICS = {
    "shfl_sync": shfl_sync,
    "shfl_up_sync": shfl_up_sync,
    "shfl_down_sync": shfl_down_sync,
    "shfl_xor_sync": shfl_xor_sync,
    "ballot_sync": ballot_sync,
    "all_sync": all_sync,
    "any_sync": any_sync,
    "eq_sync": eq_sync,
    "match_any_sync": match_any_sync,
    "match_all_sync": match_all_sync,
    "activemask": activemask,
    "lanemask_lt": lanemask_lt,
    "syncwarp": syncwarp,
    "popc": popc,
    "clz": clz,
    "ffs": ffs,
}


def _simulator_enabled():
    try:
        from numba.cuda.core import config
    except ImportError:
        return False
    return bool(config.ENABLE_CUDASIM)


def install():
    """Add the warp intrinsics to Numba's CUDA simulator.

    Call it once after ``numba`` is importable, with ``NUMBA_ENABLE_CUDASIM=1``
    set before numba was first imported.  Safe to call many times; does
    nothing (returns False) when the simulator is not enabled.  Returns True
    when the simulator has the intrinsics.
    """
    global _installed
    if not _simulator_enabled():
        return False
    with _install_lock:
        if _installed:
            return True
        from numba.cuda.simulator import kernel, kernelapi

        for name, function in _INTRINSICS.items():
            setattr(kernelapi.FakeCUDAModule, name, function)
        _patch_block_thread(kernel.BlockThread)
        _installed = True
    return True


def is_installed():
    """True once :func:`install` has patched the simulator."""
    return _installed
