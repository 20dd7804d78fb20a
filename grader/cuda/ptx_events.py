"""The part of a replayed block that is not instructions (:mod:`grader.cuda.ptx_block`'s mixin):
mbarrier phases, arrivals and transaction bytes; TMA copies done as late as the rules allow; the async
proxy's fence rule; wgmma operand reads at the wait that retires them; the report of a hang. Standard
library only (a wgmma's reads: :mod:`grader.cuda.wgmma_desc`)."""
from __future__ import annotations

import re

from .ptx_values import SWIZZLE_BITS, Elem, ReplayError, TmaOp, WgmmaRead, swizzle_addr


class Events:
    """Mixed into :class:`grader.cuda.ptx_block.Block`."""

    def _bar(self, addr):
        b = self.bars.get(addr)
        if b is None:
            raise ReplayError(f"an mbarrier at shared 0x{addr:x} is used before mbarrier.init")
        return b

    def _phase_done(self, addr, parity):
        b = self.bars.get(addr)
        if b is None:
            return False
        return (b["phase"] & 1) != (parity & 1)

    def _arrive(self, addr, count=1, tx=0):
        b = self._bar(addr)
        b["tx"] += tx
        b["pending"] -= count
        if b["pending"] < 0:
            note = (f"the mbarrier {self.symbol_of(addr)} got more arrivals than its count ({b['count']}) in its phase "
                    f"{b['phase']}: it was armed again before that phase completed")
            if note not in self.notes:
                self.notes.append(note)
            b["pending"] = 0
        self._maybe_complete(addr)

    def _complete_tx(self, addr, nbytes):
        b = self._bar(addr)
        b["tx"] -= nbytes
        self._maybe_complete(addr)

    def _maybe_complete(self, addr):
        b = self.bars[addr]
        if b["pending"] == 0 and b["tx"] == 0:
            b["phase"] += 1
            b["pending"] = b["count"]
            self._wake_all()
        elif b["pending"] == 0 and b["tx"] < 0:
            b.setdefault("over", True)

    # ---- asynchronous work
    def _drain_async(self, final=False):
        """Do the oldest pending TMA copies (all of them): they land now. True if anything happened."""
        if not self.pending:
            return False
        work, self.pending = self.pending, []
        for kind, op in work:
            if kind == "tma_load":
                self._do_tma_load(op)
            elif kind == "tma_store":
                self._do_tma_store(op)
        return True

    @staticmethod
    def _box(op: TmaOp):
        """(item size, box rows, box columns, first row, first column, head) of a TMA copy: coordinates
        innermost first ({column, row[, head]}), boxes of box[-2] rows × box[-1] columns."""
        spec = op.spec
        box_rows = spec.box[-2] if len(spec.box) > 1 else 1
        r0 = op.coords[1] if len(op.coords) > 1 else 0
        h0 = op.coords[2] if len(op.coords) > 2 else 0
        return spec.itemsize, box_rows, spec.box[-1], r0, op.coords[0], h0

    def _do_tma_load(self, op: TmaOp):
        it, box_rows, box_cols, r0, c0, h0 = self._box(op)
        mem, dst, name = self.mem, op.smem, op.spec.tensor
        bmask = (1 << SWIZZLE_BITS[op.spec.swizzle]) - 1
        for r in range(box_rows):
            gr = r0 + r
            for c in range(box_cols):
                # past the tensor's edge TMA writes zeros: the element is still named by its position
                cell = (Elem(name, gr, c0 + c, h0), it)
                a = dst + (r * box_cols + c) * it
                a ^= ((a >> 7) & bmask) << 4
                for k in range(it):
                    mem[a + k] = (cell, it, k)
        if op.barrier is not None:
            self._complete_tx(op.barrier, box_rows * box_cols * it)

    def _do_tma_store(self, op: TmaOp):
        """Writes past the tensor's edge are dropped."""
        it, box_rows, box_cols, r0, c0, h0 = self._box(op)
        rows, cols = op.spec.shape[-2], op.spec.shape[-1]
        out = self.outputs.setdefault(op.spec.tensor, {})
        for r in range(box_rows):
            for c in range(box_cols):
                gr, gc = r0 + r, c0 + c
                if 0 <= gr < rows and 0 <= gc < cols:
                    out[(h0, gr, gc)] = self.load(swizzle_addr(op.smem + (r * box_cols + c) * it, op.spec.swizzle), it)

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    # ---- the async proxy: ordinary shared-memory stores a TMA store reads need fence.proxy.async
    def generic_write(self, t, addr: int, size: int):
        n = self.next_seq()
        for k in range(size):
            self.generic_writes[addr + k] = (t.tid, n)

    def proxy_fence(self, t):
        self.fence_at[t.tid] = self.next_seq()

    def check_proxy_fence(self, t, op: TmaOp):
        it = op.spec.itemsize
        nbytes = it
        for b in op.spec.box:
            nbytes *= b
        unfenced = set()
        for a in range(op.smem, op.smem + nbytes):
            w = self.generic_writes.get(a)
            if w is not None and w[1] > self.fence_at.get(w[0], -1):
                unfenced.add(w[0])
        if unfenced:
            self.proxy_problems.append(
                f"line {op.line}: thread {t.tid}'s TMA store reads shared memory that threads "
                f"{_tid_ranges(list(unfenced))} wrote with ordinary stores and did not fence "
                "(fence.proxy.async) before it: the copy engine may read the old bytes")

    # ---- wgmma operands, read when a wait retires the wgmma
    def wg_thread(self, t):
        st = self.wg_state.get(t.tid)
        if st is None:
            st = self.wg_state[t.tid] = {"count": 0, "open": [], "groups": []}
        return st

    def perform_wgmma(self, rec: WgmmaRead):
        if rec.done:
            return
        rec.done = True
        from .wgmma_desc import operand_reads
        operand_reads(self, rec)

    def finish_wgmmas(self):
        """wgmmas never retired by a wait (the kernel ended first) read their operands now."""
        for rec in self.wgmmas:
            if not rec.done:
                self.notes.append(f"line {rec.line}: warpgroup {rec.warpgroup}'s wgmma was never waited for "
                                  "(wgmma.wait_group) before the kernel ended")
                self.perform_wgmma(rec)

    # ---- reports
    def _deadlock_report(self, runq) -> str:
        lines = []
        by_wait: dict = {}
        for t in runq:
            if t.state == "mbar":
                addr, parity = t.wait
                by_wait.setdefault(("mbar", addr, parity), []).append(t.tid)
            elif t.state == "bar":
                by_wait.setdefault(("bar", t.wait), []).append(t.tid)
            elif t.state == "warp":
                by_wait.setdefault(("warp", t.wait), []).append(t.tid)
            else:
                by_wait.setdefault((t.state,), []).append(t.tid)
        for key, tids in by_wait.items():
            who = _tid_ranges(tids)
            who = f"thread {who} waits" if len(tids) == 1 else f"threads {who} wait"
            if key[0] == "mbar":
                _, addr, parity = key
                b = self.bars.get(addr, {})
                name = self.symbol_of(addr)
                lines.append(f"{who} for the phase of parity {parity} of the mbarrier {name}: it is in "
                             f"phase {b.get('phase')} (parity {b.get('phase', 0) & 1}, not complete: {b.get('pending')} of "
                             f"{b.get('count')} arrivals and {b.get('tx')} transaction bytes still due) and no thread or "
                             "copy will complete it")
            elif key[0] == "bar":
                lines.append(f"{who} at barrier {key[1]} (bar.sync / __syncthreads), which the other threads "
                             "never reach")
            elif key[0] == "warp":
                lines.append(f"{who} for the other lanes of warp {key[1][0]} at a warp-wide instruction "
                             f"(PTX line {self._line_of(key[1])})")
            else:
                lines.append(f"{who}: {key[0]}")
        return "the block hangs: " + "; ".join(lines)

    def _line_of(self, key) -> int:
        _, fname, k = key
        f = self.p.functions.get(fname)
        return f.body[k].line if f and k < len(f.body) else -1

    def symbol_of(self, addr: int) -> str:
        best = None
        for name, (space, a) in self.syms.items():
            if space == "shared" and a <= addr and (best is None or a > best[1]):
                best = (name, a)
        if best is None:
            return f"at shared 0x{addr:x}"
        name = _demangle_local(best[0])
        off = addr - best[1]
        return f"{name}[{off // 8}] (shared 0x{addr:x})" if off else f"{name}[0] (shared 0x{addr:x})"



def _demangle_local(sym: str) -> str:
    m = re.search(r"E(\d+)(\w+)$", sym)
    if m and int(m.group(1)) == len(m.group(2)):
        return m.group(2)
    return sym


def _tid_ranges(tids) -> str:
    tids = sorted(tids)
    out, start, prev = [], tids[0], tids[0]
    for x in tids[1:] + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        out.append(f"{start}" if start == prev else f"{start}–{prev}")
        if x is not None:
            start = prev = x
    return ", ".join(out)
