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

Where the simulator misleads (lessons may quote this list):

- Blocks run one after another, in blockIdx order, never at the same time.
  Grid-wide synchronisation cannot work with more than one block, a block that
  spins on a flag set by a later block hangs forever, and one that waits on
  an earlier block always succeeds at once.
- Threads are Python threads switched by the interpreter; there is no
  lockstep warp and no race detection.  A kernel with a missing
  ``syncthreads``/``syncwarp`` or a data race often still gives the right
  answer in the simulator.
- Shared memory is one NumPy array per ``cuda.shared.array`` line for the
  whole launch: it is not reset between blocks and reads are never
  uninitialised garbage, so a block can "see" the previous block's values.
- Undefined behaviour on the GPU (reading a lane outside the mask, exited
  lanes in a mask, out-of-bounds indices) raises here; on the GPU it silently
  returns garbage or corrupts memory.  A negative index wraps around in both.
- ``activemask()`` is modelled: once no lane of the warp is running, the lanes
  waiting in ``activemask()`` at the same line of code are reported active.
  Real hardware may converge differently.
- ``ballot_sync`` and ``match_*_sync`` return ``np.int32`` like Numba (all 32
  lanes set gives -1).  NumPy refuses ``np.int32 & (1 << 31)`` (out of range)
  where the GPU widens to int64: write ``ballot & np.int32(...)``, or use
  ``cuda.popc``/``ffs``/``clz``, which this module makes width-aware.
- Arithmetic is NumPy/Python: float32 results may differ in the last bits
  (no fused multiply-add, Python floats are float64), and timings, memory
  coalescing and bank conflicts mean nothing.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np

__all__ = ["install", "is_installed", "WarpSyncError", "WARP_SIZE", "FULL_MASK"]

WARP_SIZE = 32
FULL_MASK = 0xFFFFFFFF

#: Seconds a lane may wait at a warp intrinsic before the simulator gives up
#: and reports a probable deadlock (only reached by cases the direct checks
#: cannot prove, e.g. three lanes waiting on each other in a cycle).
DEADLOCK_TIMEOUT_S = 30.0

# How often a waiting lane re-checks abort flags without being notified.
_POLL_S = 0.25

_SHUFFLE_TYPES = (np.int32, np.int64, np.float32, np.float64)
_installed = False
_install_lock = threading.Lock()
_state_lock = threading.Lock()


class WarpSyncError(RuntimeError):
    """A warp intrinsic was used in a way that is undefined on a GPU."""


# --------------------------------------------------------------------------
# Per-block bookkeeping


class _Arrival:
    """One lane waiting at one warp intrinsic."""

    __slots__ = ("op", "mask", "width", "value", "site", "done", "result", "error")

    def __init__(self, op, mask, width=WARP_SIZE, value=None, site=None):
        self.op = op
        self.mask = mask
        self.width = width
        self.value = value
        self.site = site
        self.done = False
        self.result = None
        self.error = None

    def matches(self, other):
        return (
            other is not None
            and self.op == other.op
            and self.mask == other.mask
            and self.width == other.width
        )

    def describe(self):
        if self.op == "activemask":
            return "activemask()"
        text = f"{self.op} with mask {self.mask:#010x}"
        if self.width != WARP_SIZE:
            text += f" and width {self.width}"
        return text


class _BlockWarps:
    """Warp state of one simulated block; a fresh one per BlockManager."""

    def __init__(self, block_dim):
        self.nthreads = int(np.prod(block_dim))
        nwarps = (self.nthreads + WARP_SIZE - 1) // WARP_SIZE
        self.lock = threading.Lock()
        self.conds = [threading.Condition(self.lock) for _ in range(nwarps)]
        self.pending = [None] * self.nthreads  # _Arrival per linear thread id
        self.threads = [None] * self.nthreads
        self.exited = [False] * self.nthreads
        # barrier generation a thread entered syncthreads at (None: not in it)
        self.barrier_entry = [None] * self.nthreads
        self.barrier_gen = 0
        self.activemask_waiting = [0] * nwarps

    def lanes_in_warp(self, warp):
        return min(WARP_SIZE, self.nthreads - warp * WARP_SIZE)

    def existing_mask(self, warp):
        return (1 << self.lanes_in_warp(warp)) - 1

    def stuck_in_barrier(self, tid):
        """True if thread tid waits at a syncthreads nobody has released."""
        entry = self.barrier_entry[tid]
        return entry is not None and entry == self.barrier_gen

    def is_running(self, tid):
        return not (
            self.exited[tid]
            or self.pending[tid] is not None
            or self.stuck_in_barrier(tid)
        )


def _block_state(manager):
    state = getattr(manager, "_grader_warps", None)
    if state is None:
        with _state_lock:
            state = getattr(manager, "_grader_warps", None)
            if state is None:
                state = _BlockWarps(manager._block_dim)
                manager._grader_warps = state
    return state


def _where(thread, warp):
    b = thread.blockIdx
    return f"warp {warp} (block ({b.x},{b.y},{b.z}))"


def _bits(mask):
    return [lane for lane in range(WARP_SIZE) if (mask >> lane) & 1]


def _as_int32(bits):
    bits &= FULL_MASK
    return np.int32(bits - (1 << 32) if bits & 0x80000000 else bits)


# --------------------------------------------------------------------------
# The rendezvous


def _current():
    thread = threading.current_thread()
    if not hasattr(thread, "_manager"):
        raise WarpSyncError(
            "warp intrinsics can only be called inside a simulated kernel"
        )
    return thread


def _check_partners(state, thread, arrival):
    """Raise if a lane of arrival.mask can provably never reach it."""
    tid = thread.thread_id
    lane, warp = tid % WARP_SIZE, tid // WARP_SIZE
    members = arrival.mask & state.existing_mask(warp)
    for other in _bits(members):
        other_tid = warp * WARP_SIZE + other
        if other == lane or arrival.matches(state.pending[other_tid]):
            continue
        reason = None
        if state.exited[other_tid]:
            peer = state.threads[other_tid]
            if peer is not None and peer.exception is not None:
                continue  # that lane failed first; its error is the one to show
            reason = "it exited"
        elif state.stuck_in_barrier(other_tid):
            reason = "it is waiting in syncthreads"
        else:
            theirs = state.pending[other_tid]
            if (
                theirs is not None
                and theirs.op != "activemask"
                and (theirs.mask >> lane) & 1
            ):
                reason = f"it is waiting in {theirs.describe()}"
        if reason:
            raise WarpSyncError(
                f"lane {other} of {_where(thread, warp)} never reached "
                f"{arrival.describe()}: {reason} (lane {lane} is waiting for it)"
            )


def _waiting_report(state, warp):
    lines = []
    for lane in range(state.lanes_in_warp(warp)):
        tid = warp * WARP_SIZE + lane
        if state.exited[tid]:
            what = "exited"
        elif state.stuck_in_barrier(tid):
            what = "in syncthreads"
        elif state.pending[tid] is not None:
            what = "in " + state.pending[tid].describe()
        else:
            what = "running"
        lines.append(f"  lane {lane}: {what}")
    return "\n".join(lines)


def _wait(state, thread, arrival, cond):
    """Block (lock held) until arrival is completed; check for deadlocks."""
    tid = thread.thread_id
    deadline = time.monotonic() + DEADLOCK_TIMEOUT_S
    while not arrival.done:
        if thread.abort:
            state.pending[tid] = None
            raise RuntimeError("aborted: another simulated thread failed")
        if arrival.op == "activemask":
            _try_resolve_activemask(state, tid // WARP_SIZE)
            if arrival.done:
                break
        else:
            try:
                _check_partners(state, thread, arrival)
            except WarpSyncError:
                state.pending[tid] = None
                raise
        if time.monotonic() > deadline:
            state.pending[tid] = None
            warp = tid // WARP_SIZE
            raise WarpSyncError(
                f"lane {tid % WARP_SIZE} of {_where(thread, warp)} waited "
                f"{DEADLOCK_TIMEOUT_S:.0f} s in {arrival.describe()}; probable "
                f"deadlock. Lanes of the warp:\n{_waiting_report(state, warp)}"
            )
        cond.wait(_POLL_S)
    if arrival.error:
        raise WarpSyncError(arrival.error)
    return arrival.result


def _rendezvous(op, mask, compute, value=None, width=WARP_SIZE):
    """Meet the other lanes of mask at op; return this lane's result.

    compute(arrivals, state, warp) gets {lane: _Arrival} of every lane that
    takes part and sets .result (or .error) on each.
    """
    thread = _current()
    state = _block_state(thread._manager)
    tid = thread.thread_id
    lane, warp = tid % WARP_SIZE, tid // WARP_SIZE
    mask = int(mask) & FULL_MASK
    if not (mask >> lane) & 1:
        raise WarpSyncError(
            f"lane {lane} of {_where(thread, warp)} called {op} with mask "
            f"{mask:#010x}, which does not include the calling lane {lane}"
        )
    arrival = _Arrival(op, mask, width, value)
    members = _bits(mask & state.existing_mask(warp))
    cond = state.conds[warp]
    with state.lock:
        state.pending[tid] = arrival
        group = {}
        for other in members:
            theirs = state.pending[warp * WARP_SIZE + other]
            if not arrival.matches(theirs):
                break
            group[other] = theirs
        else:
            # last to arrive: compute everyone's result and wake them
            compute(group, state, warp)
            for other, theirs in group.items():
                theirs.done = True
                state.pending[warp * WARP_SIZE + other] = None
            cond.notify_all()
            if arrival.error:
                raise WarpSyncError(arrival.error)
            return arrival.result
        if state.activemask_waiting[warp]:
            cond.notify_all()
        return _wait(state, thread, arrival, cond)


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
# activemask: lanes that meet at the same line while the rest of the warp is
# exited or blocked count as converged.


def _try_resolve_activemask(state, warp):
    base = warp * WARP_SIZE
    tids = range(base, base + state.lanes_in_warp(warp))
    if any(state.is_running(t) for t in tids):
        return
    sites = {}
    for t in tids:
        arrival = state.pending[t]
        if arrival is not None and arrival.op == "activemask":
            sites.setdefault(arrival.site, []).append(t)
    for waiting in sites.values():
        bits = sum(1 << (t - base) for t in waiting)
        for t in waiting:
            arrival = state.pending[t]
            arrival.result = np.uint32(bits)
            arrival.done = True
            state.pending[t] = None
            state.activemask_waiting[warp] -= 1
    if sites:
        state.conds[warp].notify_all()


def activemask(self):
    """np.uint32 of the lanes of the caller's warp that reach this call together."""
    thread = _current()
    caller = sys._getframe(1)
    state = _block_state(thread._manager)
    tid = thread.thread_id
    warp = tid // WARP_SIZE
    arrival = _Arrival("activemask", 0, site=(caller.f_code, caller.f_lineno))
    with state.lock:
        state.pending[tid] = arrival
        state.activemask_waiting[warp] += 1
        state.conds[warp].notify_all()
        return _wait(state, thread, arrival, state.conds[warp])


# --------------------------------------------------------------------------
# Width-aware bit functions (the simulator's treat negative values wrongly)


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


def _patch_block_thread(BlockThread):
    original_init = BlockThread.__init__
    original_run = BlockThread.run
    original_syncthreads = BlockThread.syncthreads

    def __init__(self, f, manager, *args, **kwargs):
        original_init(self, f, manager, *args, **kwargs)
        _block_state(manager).threads[self.thread_id] = self

    def run(self):
        try:
            original_run(self)
        finally:
            state = _block_state(self._manager)
            with state.lock:
                state.exited[self.thread_id] = True
                state.conds[self.thread_id // WARP_SIZE].notify_all()

    def syncthreads(self):
        state = _block_state(self._manager)
        tid = self.thread_id
        with state.lock:
            entry = state.barrier_entry[tid] = state.barrier_gen
            state.conds[tid // WARP_SIZE].notify_all()
        try:
            original_syncthreads(self)
        finally:
            with state.lock:
                # the first thread out of a released barrier opens a new one
                if state.barrier_gen == entry:
                    state.barrier_gen += 1
                state.barrier_entry[tid] = None

    BlockThread.__init__ = __init__
    BlockThread.run = run
    BlockThread.syncthreads = syncthreads


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
