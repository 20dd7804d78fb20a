"""How the lanes of a simulated warp meet at an intrinsic (the machinery of grader.sim.warp).

Each block's warps keep their arrivals here; a lane waits until every lane its mask names has
arrived at the same intrinsic with the same mask, or reports why it never will (a lane exited,
waits at a barrier or at another intrinsic) as a :class:`WarpSyncError`.
"""
from __future__ import annotations

import sys
import threading
import time

import numpy as np

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
