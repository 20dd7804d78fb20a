"""Chapter 02's row kernels (softmax bf16, RMSNorm bf16): persistent candidates against the lessons.

    python dev/ch02_reduce/tune_rows.py              # on a GPU: the table (and $OUT/tune_rows.json)
    python dev/ch02_reduce/tune_rows.py --selftest   # every candidate through grader.check, small sizes
                                                     # (without a GPU it runs in the simulator)

The idea measured here: a *persistent* block (grid = k × SMs, each block loops over rows
row, row + grid, …) that issues the next row's global loads before it reduces, computes and
stores the current row, so a block always has loads in flight. Two ways:

  reuse   softmax only: the row's words are dead once exp(x − m) is in registers, so the next
          row's loads go into the same registers there (no extra registers; the loads fly
          during the sum's reduction and the stores).
  double  a second set of word registers: the next row's loads are issued at the top of the
          loop, before anything else (twice the row registers).

Both reduce with one barrier per reduction: the warps' partials go to shared memory slots that
are not written again before every thread has passed the next barrier (separate arrays for the
max and the sum; a parity slot for RMSNorm's single sum). A grid of `rows` blocks makes the same
kernels non-persistent (one row each, no prefetch), which separates the two effects.

Options swept: threads × words, blocks per SM (k), cache hints (ld.global.cs / st.global.cs:
the data is read and written once), fastmath, RMSNorm's weights kept in registers. Rows of
"numba u64 copy" are a Numba kernel with the same access pattern that only copies: the ceiling
for a Numba kernel that loads and stores 8-byte words this way.

Every row: correctness with grader.check's run_case + verdict on the problem's own inputs at its
bench size (float64 reference, the tolerances of grader/problems/reduce.py, poisoned outputs; the
copy rows against the input itself, exactly), timed with grader.bench (L2 flushed, the graded timer)
on those inputs; the copy ceiling (grader.peers.ceiling) and the problems' torch peers in the same
run, each torch peer timed with grader.bench on the same inputs before and after the candidates
(twice: peers.measure would measure it once per process). The driver's occupancy query and the
registers Numba reports are outside the grader. Fails soft per candidate. Import order: common
first (it imports grader, which chooses GPU or simulator).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

import common  # noqa: E402  (first: puts the repository on sys.path and imports grader, before numba)

import grader  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda, float32, int64, uint32, uint64  # noqa: E402

from grader import bf16, peers  # noqa: E402
from grader.formats import bf16_to_f64  # noqa: E402
from grader.problems import reduce as P  # noqa: E402

# the copy rows' check: the rows written back exactly as read (a row kernel's ceiling, no math)
COPY = P.softmax_bf16.variant(name="bf16 rows copied", reference=lambda x: {"y": bf16_to_f64(x)},
                              tolerance=lambda size, dtype: (0.0, 0.0), peer=None)

FULL = 0xFFFFFFFF
LOWEST = float32(-3.4028234e38)         # a max's start: below every finite float32
LOG2E = float32(1.4426950408889634)
EPS = float32(P.RMS_EPS)


# ------------------------------------------------------------------ helpers
@cuda.jit(device=True, inline=True)
def warp_sum(v):
    for k in range(5):
        v += cuda.shfl_xor_sync(FULL, v, 16 >> k)
    return v


@cuda.jit(device=True, inline=True)
def warp_max(v):
    for k in range(5):
        v = max(v, cuda.shfl_xor_sync(FULL, v, 16 >> k))
    return v


@cuda.jit(device=True, inline=True)
def unpack4(w):
    # uint64 word -> its four bf16 as float32 (element 4k in the low 16 bits)
    a, b = uint32(w & uint64(0xFFFFFFFF)), uint32(w >> uint64(32))
    return bf16.lo(a), bf16.hi(a), bf16.lo(b), bf16.hi(b)


@cuda.jit(device=True, inline=True)
def pack4(a, b, c, d):
    # four float32 -> one uint64 word of four bf16 (rounded to nearest even)
    return uint64(bf16.pack(a, b)) | (uint64(bf16.pack(c, d)) << uint64(32))


def memory_ops(hints):
    """ld(a, r, j) / st(a, r, j, v) on a 2-D array: plain, or with the streaming cache hint."""
    if hints:
        @cuda.jit(device=True, inline=True)
        def ld(a, r, j):
            return cuda.ldcs(a, (int64(r), int64(j)))

        @cuda.jit(device=True, inline=True)
        def st(a, r, j, v):
            cuda.stcs(a, (int64(r), int64(j)), v)
    else:
        @cuda.jit(device=True, inline=True)
        def ld(a, r, j):
            return a[r, j]

        @cuda.jit(device=True, inline=True)
        def st(a, r, j, v):
            a[r, j] = v
    return ld, st


def jit_options(fast, min_blocks, threads):
    opts = {"fastmath": fast}
    if min_blocks and not grader.SIMULATOR:
        opts["launch_bounds"] = (threads, min_blocks)
    return opts


class Launch:
    """launch(x, ...) for one kernel: views as uint64, grid = blocks_per_sm × SMs (or `rows`)."""

    def __init__(self, kernel, threads, words, n_in, blocks_per_sm=None, grid=None):
        self.kernel, self.threads, self.words, self.n_in = kernel, threads, words, n_in
        self.blocks_per_sm, self.grid = blocks_per_sm, grid   # grid: an int, "rows", or None (auto)

    def grid_for(self, rows):
        if self.grid == "rows":
            return rows
        if self.grid is not None:
            return min(self.grid, rows)
        if self.blocks_per_sm is None and not grader.SIMULATOR:
            self.blocks_per_sm = occupancy(self.kernel, self.threads)   # once compiled: the driver's
            if self.blocks_per_sm is None:
                return min(rows, cuda.get_current_device().MULTIPROCESSOR_COUNT)   # first (compiling) call
        sms = 1 if grader.SIMULATOR else cuda.get_current_device().MULTIPROCESSOR_COUNT
        return max(1, min(rows, (self.blocks_per_sm or 1) * sms))

    def __call__(self, *arrays):
        rows, cols = arrays[0].shape
        assert cols % 4 == 0 and cols // 4 <= self.words * self.threads, (cols, self.words, self.threads)
        views = [a.view(np.uint64) for a in arrays]
        self.kernel[self.grid_for(rows), self.threads](*views)


def occupancy(kernel, threads):
    """Resident blocks per SM of the (compiled) kernel, from the driver; None before it compiled."""
    if grader.SIMULATOR or not getattr(kernel, "overloads", None):
        return None
    k = next(iter(kernel.overloads.values()))
    try:
        sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
        return max(1, k.max_cooperative_grid_blocks(threads) // sms)
    except Exception:
        try:
            regs = max(1, k.regs_per_thread)
        except Exception:
            return None
        return max(1, min(2048 // threads, 65536 // (((regs * 32 + 255) // 256) * 256 * (threads // 32))))


# ------------------------------------------------------------------ softmax
def make_softmax(threads=256, words=8, double=False, hints=False, fast=False, min_blocks=None,
                 blocks_per_sm=None, grid=None):
    """Persistent softmax: block b does rows b, b + grid, …; the next row's loads fly while this
    row is reduced and written. double=False: they reuse the word registers once exp is taken."""
    nwarps = threads // 32
    ne, nn = 4 * words, (words if double else 1)     # local array sizes: compile-time constants
    ld, st = memory_ops(hints)

    @cuda.jit(**jit_options(fast, min_blocks, threads))
    def softmax_persistent(x4, y4):
        # x4, y4: (rows, cols // 4) uint64, four bf16 per word
        t = cuda.threadIdx.x
        lane, warp = t % 32, t // 32
        rows, nw = x4.shape
        smax = cuda.shared.array(32, float32)          # (32,) the warps' maxima
        ssum = cuda.shared.array(32, float32)          # (32,) the warps' sums
        w = cuda.local.array(words, uint64)            # (words,) this row's words, in registers
        wn = cuda.local.array(nn, uint64)   # the next row's (double)
        e = cuda.local.array(ne, float32)       # exp(x − m), kept for the write
        row = cuda.blockIdx.x
        for q in range(words):                         # the first row's loads
            j = t + q * threads
            w[q] = ld(x4, row, j) if (row < rows and j < nw) else uint64(0)
        while row < rows:
            nxt = row + cuda.gridDim.x
            if double:                                 # the next row's loads, first of all
                for q in range(words):
                    j = t + q * threads
                    wn[q] = ld(x4, nxt, j) if (nxt < rows and j < nw) else uint64(0)
            m = LOWEST
            for q in range(words):
                if t + q * threads < nw:
                    a, b, c, d = unpack4(w[q])
                    m = max(m, max(max(a, b), max(c, d)))
            m = warp_max(m)
            if lane == 0:
                smax[warp] = m
            cuda.syncthreads()        # one barrier: smax is written again only after the next one
            m = warp_max(smax[lane] if lane < nwarps else LOWEST)
            ml = m * LOG2E
            s = float32(0.0)
            for q in range(words):
                if t + q * threads < nw:
                    a, b, c, d = unpack4(w[q])
                    e[4 * q] = math.exp2(a * LOG2E - ml)
                    e[4 * q + 1] = math.exp2(b * LOG2E - ml)
                    e[4 * q + 2] = math.exp2(c * LOG2E - ml)
                    e[4 * q + 3] = math.exp2(d * LOG2E - ml)
                    s += (e[4 * q] + e[4 * q + 1]) + (e[4 * q + 2] + e[4 * q + 3])
            if not double:                             # w is dead: the next row's loads go there
                for q in range(words):
                    j = t + q * threads
                    w[q] = ld(x4, nxt, j) if (nxt < rows and j < nw) else uint64(0)
            s = warp_sum(s)
            if lane == 0:
                ssum[warp] = s
            cuda.syncthreads()
            inv = float32(1.0) / warp_sum(ssum[lane] if lane < nwarps else float32(0.0))
            for q in range(words):
                j = t + q * threads
                if j < nw:
                    st(y4, row, j, pack4(e[4 * q] * inv, e[4 * q + 1] * inv,
                                         e[4 * q + 2] * inv, e[4 * q + 3] * inv))
            if double:
                for q in range(words):
                    w[q] = wn[q]
            row = nxt

    return Launch(softmax_persistent, threads, words, 1, blocks_per_sm, grid)


# ------------------------------------------------------------------ RMSNorm
def make_rmsnorm(threads=128, words=8, keep_w=False, hints=False, fast=False, min_blocks=None,
                 blocks_per_sm=None, grid=None):
    """Persistent RMSNorm with two sets of word registers: the next row's loads are issued first,
    then this row is reduced (one barrier) and written. keep_w: the weights stay in registers."""
    nwarps = threads // 32
    ng = words if keep_w else 1
    ld, st = memory_ops(hints)

    @cuda.jit(**jit_options(fast, min_blocks, threads))
    def rmsnorm_persistent(x4, w4, y4):
        # x4, y4: (rows, cols // 4) uint64; w4: (1, cols // 4) uint64 — four bf16 per word
        t = cuda.threadIdx.x
        lane, warp = t % 32, t // 32
        rows, nw = x4.shape
        sred = cuda.shared.array((2, 32), float32)     # (2, 32) the warps' sums, alternate rows
        c = cuda.local.array(words, uint64)            # (words,) this row's words
        cn = cuda.local.array(words, uint64)           # (words,) the next row's words
        g = cuda.local.array(ng, uint64)
        if keep_w:
            for q in range(words):
                j = t + q * threads
                g[q] = w4[0, j] if j < nw else uint64(0)
        row = cuda.blockIdx.x
        for q in range(words):
            j = t + q * threads
            c[q] = ld(x4, row, j) if (row < rows and j < nw) else uint64(0)
        par = 0
        while row < rows:
            nxt = row + cuda.gridDim.x
            for q in range(words):                     # the next row's loads, before any math
                j = t + q * threads
                cn[q] = ld(x4, nxt, j) if (nxt < rows and j < nw) else uint64(0)
            acc = float32(0.0)
            for q in range(words):
                a, b, p, r_ = unpack4(c[q])
                acc += (a * a + b * b) + (p * p + r_ * r_)
            acc = warp_sum(acc)
            if lane == 0:
                sred[par, warp] = acc
            cuda.syncthreads()        # one barrier: slot `par` is written again two rows later
            tot = warp_sum(sred[par, lane] if lane < nwarps else float32(0.0))
            r = float32(1.0) / math.sqrt(tot / float32(4 * nw) + EPS)
            for q in range(words):
                j = t + q * threads
                if j < nw:
                    a, b, p, r_ = unpack4(c[q])
                    gw = g[q] if keep_w else w4[0, j]
                    g0, g1, g2, g3 = unpack4(gw)
                    st(y4, row, j, pack4(a * r * g0, b * r * g1, p * r * g2, r_ * r * g3))
            for q in range(words):
                c[q] = cn[q]
            row = nxt
            par ^= 1

    launch = Launch(rmsnorm_persistent, threads, words, 2, blocks_per_sm, grid)

    def run(x, w, y):
        launch(x, w.reshape(1, w.shape[0]), y)
    run.launch = launch
    run.kernel = rmsnorm_persistent
    return run


# ------------------------------------------------------------------ the ceiling for such kernels
def make_copy(threads=256, words=8):
    """Copies (rows, cols) bf16 with the row kernels' access pattern (block per row, all loads
    then all stores): what a Numba kernel of this shape reaches with no math at all."""
    @cuda.jit
    def copy_rows(x4, y4):
        row, t, nw = cuda.blockIdx.x, cuda.threadIdx.x, x4.shape[1]
        w = cuda.local.array(words, uint64)
        for q in range(words):
            j = t + q * threads
            w[q] = x4[row, j] if j < nw else uint64(0)
        for q in range(words):
            j = t + q * threads
            if j < nw:
                y4[row, j] = w[q]

    return Launch(copy_rows, threads, words, 1, grid="rows")


def kernel_of(launch):
    return launch.kernel if hasattr(launch, "kernel") else None


# ------------------------------------------------------------------ candidates
def softmax_candidates(quick=False):
    # Without launch bounds ptxas spends 124+ registers on the persistent loop (hoisted addresses):
    # min_blocks caps them (launch_bounds(threads, min_blocks)). ptxas_rows.py: the reuse kernels spill at
    # the caps below (256×8 at ≥5 blk/SM: 48 registers, 144/84 B; ≥4: 8/4 B), the double ones do not.
    c = [
        ("reuse 256×8, 1 row/block (not persistent), ≥5 blk/SM", lambda: make_softmax(grid="rows", min_blocks=5)),
        ("reuse 256×8 persistent, ≥5 blk/SM", lambda: make_softmax(min_blocks=5)),
        ("reuse 256×8 persistent, ≥4 blk/SM", lambda: make_softmax(min_blocks=4)),
        ("reuse 256×8 persistent, ≥5 blk/SM, ld/st .cs", lambda: make_softmax(min_blocks=5, hints=True)),
        ("reuse 256×8 persistent, ≥5 blk/SM, fastmath", lambda: make_softmax(min_blocks=5, fast=True)),
        ("double 256×8 persistent, ≥3 blk/SM", lambda: make_softmax(double=True, min_blocks=3)),
        ("double 256×8 persistent, ≥3 blk/SM, .cs", lambda: make_softmax(double=True, min_blocks=3, hints=True)),
        ("reuse 512×4 persistent, ≥3 blk/SM", lambda: make_softmax(threads=512, words=4, min_blocks=3)),
        ("double 512×4 persistent, ≥2 blk/SM", lambda: make_softmax(threads=512, words=4, double=True, min_blocks=2)),
    ]
    return c[:3] if quick else c


def rms_candidates(quick=False):
    c = [
        ("double 128×8, 1 row/block (not persistent), ≥8 blk/SM", lambda: make_rmsnorm(grid="rows", min_blocks=8)),
        ("double 128×8 persistent, ≥8 blk/SM", lambda: make_rmsnorm(min_blocks=8)),
        ("double 128×8 persistent, ≥6 blk/SM", lambda: make_rmsnorm(min_blocks=6)),
        ("double 128×8 persistent, ≥6 blk/SM, w in regs", lambda: make_rmsnorm(min_blocks=6, keep_w=True)),
        ("double 128×8 persistent, ≥8 blk/SM, ld/st .cs", lambda: make_rmsnorm(min_blocks=8, hints=True)),
        ("double 128×8 persistent, ≥8 blk/SM, fastmath", lambda: make_rmsnorm(min_blocks=8, fast=True)),
        ("double 256×4 persistent, ≥4 blk/SM", lambda: make_rmsnorm(threads=256, words=4, min_blocks=4)),
        ("double 256×4 persistent, ≥5 blk/SM, .cs", lambda: make_rmsnorm(threads=256, words=4, min_blocks=5,
                                                                         hints=True)),
        ("double 512×2 persistent, ≥3 blk/SM", lambda: make_rmsnorm(threads=512, words=2, min_blocks=3)),
    ]
    return c[:3] if quick else c


# ------------------------------------------------------------------ self-test (simulator or GPU)
def selftest():
    """Each candidate through grader.check, at every grid: ragged rows (cols/4 not a multiple of
    threads), rows not a multiple of the grid, one word per row, values in the hundreds."""
    sizes = [P.Rows(7, 1000), P.Rows(10, 64), P.Rows(5, 4), P.Rows(3, 1028, P.LARGE)]
    grids = [2, 3, "rows"]
    if not grader.SIMULATOR:
        sizes += [P.Rows(64, 512), P.Rows(4099, 8192), P.Rows(1023, 4096, P.LARGE)]
        grids += [1, None]
    fails = 0
    kinds = [("softmax", P.softmax_bf16, softmax_candidates()), ("rms", P.rmsnorm_bf16, rms_candidates())]
    for prob, problem, cands in kinds:
        # in the simulator the variants that change only compile options are not worth the time
        seen = set()
        for label, make in cands:
            launch = make()
            base = getattr(launch, "launch", launch)
            key = (base.threads, base.words, "double" in label, "w in regs" in label)
            if grader.SIMULATOR and key in seen:
                continue
            seen.add(key)
            fits = [s for s in sizes if s[1] // 4 <= base.words * base.threads]
            for g in grids:
                base.grid = g
                try:
                    grader.check(launch, problem, sizes=fits, quiet=True)
                except grader.CheckFailed as exc:
                    fails += 1
                    print(f"FAIL {prob} {label} grid {g}: " + " / ".join(str(exc).splitlines()[:2]))
            print(f"ok   {prob} {label}" if not fails else f"...  {prob} {label}", flush=True)
    print("selftest:", "all right" if not fails else f"{fails} failures")
    return 1 if fails else 0


# ------------------------------------------------------------------ GPU measurement
def main(argv):
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    if "--selftest" in argv:
        return selftest()
    if grader.SIMULATOR:
        print("no GPU: run with --selftest for the correctness checks (in the simulator)")
        return 0
    import torch

    quick = "--quick" in argv
    budget = 0.5 if quick else 0.7
    T0 = time.time()

    def log(*a):
        print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)

    dev = grader.device.info().name
    sms = grader.device.info().sm_count
    copy_label, copy = peers.ceiling("copy")
    try:
        from importlib.metadata import version
        nbv = version("numba-cuda")
    except Exception:
        nbv = "?"
    log(f"device {dev}, {sms} SMs; {copy_label} {copy:,.0f} GB/s; numba-cuda {nbv}, torch {torch.__version__}")

    ns3 = common.load("03_softmax.ipynb", ["given", "v1_naive", "online_state", "v3_online", "v4_registers"])
    ns4 = common.load("04_norms.ipynb", ["given", "v2_rmsnorm", "v3_registers"])

    size_sm, size_rm = P.softmax_bf16.bench_size, P.rmsnorm_bf16.bench_size
    table, records = [], []

    def row(prob, variant, config, regs, m_value, peer_value, bad, extra=None):
        xc = m_value / copy if m_value == m_value else float("nan")
        xt = m_value / peer_value if (peer_value and m_value == m_value) else float("nan")
        ok = "ok" if bad == 0 else ("—" if bad is None else f"WRONG ({bad})")
        table.append((prob, variant, config, str(regs), f"{m_value:,.0f}", f"{xc:.3f}",
                      f"{xt:.3f}" if xt == xt else "", ok))
        records.append({"problem": prob, "variant": variant, "config": config, "regs": regs,
                        "gbps": m_value, "x_copy": xc, "x_torch": xt, "correct": bad == 0,
                        "wrong": bad, "copy_gbps": copy, "torch_gbps": peer_value, "device": dev,
                        **(extra or {})})
        log(" | ".join(table[-1]))

    def describe(launch, threads):
        # what Numba and the driver say about the compiled kernel (outside the grader)
        k = kernel_of(launch)
        if k is None:
            return "", ""
        try:
            regs = k.get_regs_per_thread()
            regs = next(iter(regs.values())) if isinstance(regs, dict) else regs
            lmem = k.get_local_mem_per_thread()
            lmem = next(iter(lmem.values())) if isinstance(lmem, dict) else lmem
        except Exception:
            regs, lmem = "?", 0
        occ = occupancy(k, threads)
        return f"{regs}" + (f" +{lmem}B local" if lmem else ""), occ

    def measure(prob, variant, launch, check, args, nbytes, peer_value, threads, config=""):
        """check (grader.check's run_case + verdict at the bench size), then time on ``args`` (the
        problem's inputs on the device) with grader.bench."""
        try:
            failures = check(launch)
            bad = 0 if not failures else failures[0][:60]
            regs, occ = describe(launch, threads)
            base = getattr(launch, "launch", launch)
            if isinstance(base, Launch):
                g = base.grid_for(args[0].shape[0])
                config = (config + " " if config else "") + \
                    f"{base.threads}thr×{base.words}w, grid {g} ({occ} blk/SM resident)"
            m = grader.bench(lambda: launch(*args), label=variant, bytes=nbytes, peer=None, budget_s=budget)
            row(prob, variant, config, regs, m.value, peer_value, bad,
                {"spread": m.spread, "runs": len(m.times_s), "grid_blocks_per_sm": occ})
        except Exception as exc:
            traceback.print_exc(limit=3)
            table.append((prob, variant, config, "", "", "", "", f"ERROR {type(exc).__name__}: {str(exc)[:60]}"))
            records.append({"problem": prob, "variant": variant, "error": f"{type(exc).__name__}: {exc}"})

    def torch_peer(problem, dev_in, size, nbytes):
        # the problem's peer (a torch op) on its own device inputs, timed with grader.bench
        call = problem.peer.prepare(peers.inputs_for(dev_in, size, {"bytes": nbytes}))
        return grader.bench(call, label=problem.peer.label, bytes=nbytes, peer=None, budget_s=budget).value

    # ---------------------------------------------------------------- softmax
    inputs, dev_in, outs = common.device_args(P.softmax_bf16, size_sm)
    args = common.args_of(dev_in, outs)                      # (x, y)
    check = common.checker(P.softmax_bf16, size_sm, inputs)
    check_copy = common.checker(COPY, size_sm, inputs)
    nbytes = P.softmax_bf16.bytes_moved(size_sm)

    tp = torch_peer(P.softmax_bf16, dev_in, size_sm, nbytes)
    row("softmax", "torch.softmax", "peer (before the candidates)", "", tp, tp, 0)
    measure("softmax", "numba u64 copy (ceiling)", make_copy(256, 8), check_copy, args, nbytes, tp, 256)
    ns3["launch_registers"].kernel = ns3["softmax_registers"]
    measure("softmax", "notebook v4 (lesson)", ns3["launch_registers"], check, args, nbytes, tp, 256)
    # the lesson's own kernel, recompiled with a register cap (more blocks per SM) and/or fastmath
    lesson_sm = ns3["softmax_registers"]
    for mb, fast in [(6, False), (7, False), (8, False), (5, True), (6, True)]:
        ns3["softmax_registers"] = cuda.jit(launch_bounds=(256, mb), fastmath=fast)(lesson_sm.py_func)
        ns3["launch_registers"].kernel = ns3["softmax_registers"]
        measure("softmax", f"notebook v4, launch_bounds(256, {mb})" + (", fastmath" if fast else ""),
                ns3["launch_registers"], check, args, nbytes, tp, 256)
    ns3["softmax_registers"] = ns3["launch_registers"].kernel = lesson_sm
    for label, make in softmax_candidates(quick):
        try:
            launch = make()
        except Exception as exc:
            table.append(("softmax", label, "", "", "", "", "", f"ERROR {type(exc).__name__}"))
            continue
        try:
            launch(args[0][:1], args[1][:1])      # compile (one row) so that the grid can use the occupancy
            cuda.synchronize()
        except Exception as exc:
            traceback.print_exc(limit=3)
            table.append(("softmax", label, "", "", "", "", "", f"ERROR {type(exc).__name__}: {str(exc)[:60]}"))
            continue
        measure("softmax", label, launch, check, args, nbytes, tp, launch.threads)
    tp2 = torch_peer(P.softmax_bf16, dev_in, size_sm, nbytes)
    row("softmax", "torch.softmax", "peer (after the candidates)", "", tp2, tp2, 0)
    del inputs, dev_in, outs, args, check, check_copy

    # ---------------------------------------------------------------- RMSNorm
    inputs, dev_in, outs = common.device_args(P.rmsnorm_bf16, size_rm)
    args = common.args_of(dev_in, outs)                      # (x, w, y)
    check = common.checker(P.rmsnorm_bf16, size_rm, inputs)
    check_copy = common.checker(COPY, size_rm, {"x": inputs["x"]})
    nbytes = P.rmsnorm_bf16.bytes_moved(size_rm)
    rp = torch_peer(P.rmsnorm_bf16, dev_in, size_rm, nbytes)
    row("rms", "torch rms_norm", "peer (before the candidates)", "", rp, rp, 0)
    measure("rms", "numba u64 copy (ceiling)", make_copy(128, 8), check_copy, (args[0], args[2]), nbytes, rp, 128)
    ns4["launch_rmsnorm_registers"].kernel = ns4["rmsnorm_registers"]
    measure("rms", "notebook v3 (lesson)", ns4["launch_rmsnorm_registers"], check, args, nbytes, rp, 128)
    lesson_rms = ns4["rmsnorm_registers"]
    for mb, fast in [(10, False), (12, False), (16, False), (12, True)]:
        ns4["rmsnorm_registers"] = cuda.jit(launch_bounds=(128, mb), fastmath=fast)(lesson_rms.py_func)
        ns4["launch_rmsnorm_registers"].kernel = ns4["rmsnorm_registers"]
        measure("rms", f"notebook v3, launch_bounds(128, {mb})" + (", fastmath" if fast else ""),
                ns4["launch_rmsnorm_registers"], check, args, nbytes, rp, 128)
    ns4["rmsnorm_registers"] = ns4["launch_rmsnorm_registers"].kernel = lesson_rms
    for label, make in rms_candidates(quick):
        try:
            launch = make()
        except Exception as exc:
            table.append(("rms", label, "", "", "", "", "", f"ERROR {type(exc).__name__}"))
            continue
        try:
            launch(args[0][:1], args[1], args[2][:1])
            cuda.synchronize()
        except Exception as exc:
            traceback.print_exc(limit=3)
            table.append(("rms", label, "", "", "", "", "", f"ERROR {type(exc).__name__}: {str(exc)[:60]}"))
            continue
        measure("rms", label, launch, check, args, nbytes, rp, launch.launch.threads)
    rp2 = torch_peer(P.rmsnorm_bf16, dev_in, size_rm, nbytes)
    row("rms", "torch rms_norm", "peer (after the candidates)", "", rp2, rp2, 0)

    # ---------------------------------------------------------------- the table
    head = ("problem", "variant", "config", "regs", "GB/s", "×copy", "×torch", "correct")
    widths = [max(len(str(r[i])) for r in [head, *table]) for i in range(len(head))]
    print(f"\ndevice {dev}, {time.strftime('%Y-%m-%d %H:%M')}; {copy_label} {copy:,.0f} GB/s (same run); "
          f"softmax {size_sm[0]}×{size_sm[1]}, RMSNorm {size_rm[0]}×{size_rm[1]} bf16; timer grader.bench "
          f"(L2 flushed); ×torch against the peer measured before the candidates "
          f"(after: softmax {tp2:,.0f}, rms_norm {rp2:,.0f} GB/s)")
    for r in [head, tuple("-" * wd for wd in widths), *table]:
        print(" | ".join(str(cell).ljust(wd) for cell, wd in zip(r, widths)))
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "tune_rows.json").write_text(json.dumps(records, indent=1, default=str))
        log(f"wrote {Path(out) / 'tune_rows.json'}")
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
