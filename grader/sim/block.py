"""The simulator's block manager, without its busy wait.

Numba's ``BlockManager.run`` starts a Python thread per CUDA thread and then polls them in a
loop that never sleeps, to see when all of them wait in ``syncthreads``. That loop holds the
GIL, so every simulated thread that wakes (from a barrier, or from a warp intrinsic in
:mod:`grader.sim.warp_sync`) waits for the interpreter's switch interval (5 ms) before it runs.
Thousands of such wake-ups in one launch made a 5x37 LayerNorm take anywhere from 3 to 48 s.
Here the manager sleeps between polls, so the threads that have work get the GIL at once.
The semantics are numba's: a block's threads are released when every live one waits in
``syncthreads``, and the first thread's exception aborts the others and is raised.
"""
from __future__ import annotations

import time

import numpy as np

#: Seconds the manager sleeps between two polls of its threads (the most a barrier waits
#: beyond the last thread's arrival).
POLL_S = 0.0002


def _run_block(self, grid_point, *args):
    from numba.cuda.simulator.kernel import BlockThread

    def target():
        self._f(*args)

    threads = []
    for block_point in np.ndindex(*self._block_dim):
        thread = BlockThread(target, self, grid_point, block_point, self._debug)
        thread.start()
        threads.append(thread)
    live, blocked = set(threads), set()
    while live:
        for thread in live:
            if thread.syncthreads_blocked:
                blocked.add(thread)
            elif thread.exception:
                for other in threads:        # abort the rest; they are not joined (as numba)
                    other.abort = True
                    other.syncthreads_blocked = False
                    other.syncthreads_event.set()
                raise thread.exception[0].with_traceback(thread.exception[1])
        if live == blocked:
            for thread in blocked:
                thread.syncthreads_blocked = False
                thread.syncthreads_event.set()
            blocked = set()
        else:
            time.sleep(POLL_S)
        live = {thread for thread in live if thread.is_alive()}
    for thread in threads:
        if thread.exception:
            raise thread.exception[0].with_traceback(thread.exception[1])


def install() -> None:
    from numba.cuda.simulator import kernel as simkernel

    simkernel.BlockManager.run = _run_block
