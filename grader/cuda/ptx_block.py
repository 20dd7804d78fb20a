"""One thread block of a kernel, replayed (:mod:`grader.cuda.ptx`'s machine): memory, operands compiled
to closures, the scheduler (threads run until they wait: on a barrier, an mbarrier phase, a warp-wide
instruction), special registers. Standard library only."""
from __future__ import annotations

import re

from .ptx_events import Events
from .ptx_parse import Function, Instr, Program
from .ptx_values import (_GEN_LOCAL, _GEN_PARAM, _GEN_SHARED, _GLOBAL_BASE, _SHARED_BASE, POISON, Deadlock, Elem,
                         MapSpec, Pack, ReplayError, _f2i, _i2f, _Yield)

class _Thread:
    __slots__ = ("tid", "r", "pc", "func", "frames", "state", "wait", "lane", "warp", "clock", "local",
                 "callparams", "steps", "fenced", "exited")

    def __init__(self, tid, func):
        self.tid, self.func, self.pc = tid, func, 0
        self.r: dict = {}
        self.frames: list = []
        self.state = "run"
        self.wait = None
        self.lane, self.warp = tid % 32, tid // 32
        self.clock = 0
        self.local: dict = {}
        self.callparams: dict = {}
        self.steps = 0
        self.fenced = True
        self.exited = False


class Block(Events):
    """One thread block of ``entry`` in ``program``, ready to :meth:`run`.

    ``params``: the kernel's parameters in order — ints (scalars), :class:`MapSpec` (a
    ``__grid_constant__`` tensor map), or a string naming a global buffer (a pointer: its base address
    comes from :meth:`pointer`). ``block``: threads (x only); ``block_idx``/``grid``: 3-tuples."""

    def __init__(self, program: Program, entry: str, params: list, block: int, block_idx=(0, 0, 0),
                 grid=(1, 1, 1), dynamic_smem: int = 0, max_steps: int = 20_000_000, threads: list | None = None):
        if entry not in program.functions:
            raise ReplayError(f"no kernel {entry} in the PTX")
        self.p, self.f = program, program.functions[entry]
        self.nthreads = block
        self.block_idx, self.grid = tuple(block_idx), tuple(grid)
        self.max_steps = max_steps
        self.mem: dict = {}            # byte address -> (value, size, offset) ; shared, global, local alike
        self.bars: dict = {}           # mbarrier address -> dict
        self.tma: list = []            # TmaOp in issue order
        self.pending: list = []        # asynchronous work not yet done: (kind, payload)
        self.wgmmas: list = []
        self.wg_groups: dict = {}      # warpgroup -> list of [open list, committed groups list]
        self.bulk_groups: dict = {}    # tid -> [open list, committed list of lists]
        self.printf: list = []
        self.notes: list = []
        self.trapped: str | None = None
        self.seq = 0
        self.events: list = []         # (kind, detail) for reports
        self.syms: dict = {}
        self.pointers: dict = {}
        self.maps: dict = {}           # generic param address -> MapSpec
        self.param_values: dict = {}
        self.fence_needed: set = set()
        self._layout(params, dynamic_smem)
        self.threads = [_Thread(t, self.f) for t in range(block)]
        self.run_only = None if threads is None else set(threads)
        self.code = self._compile(self.f)
        self.funcs_code = {}
        self.bar_sync: dict = {}       # barrier id -> set of tids waiting
        self.warp_rv: dict = {}        # (warp, pc, func) -> {tid: value}
        self.total_steps = 0
        self.waits: list = []          # (tid, barrier, parity asked, phase then) of every wait that blocked
        self.pending_stores: list = []
        self.outputs: dict = {}        # tensor -> {(head, row, col): value} written by TMA stores
        self.wg_records: dict = {}     # (warpgroup, its n-th wgmma) -> WgmmaRead
        self.wg_state: dict = {}       # tid -> {"count", "open", "groups"}
        self.generic_writes: dict = {} # shared byte -> (tid, write number) of ordinary stores
        self.fence_at: dict = {}       # tid -> write number of its last fence.proxy.async
        self.proxy_problems: list = []
        self.uninit_reads: list = []   # (tid, shared address, PTX line) of loads of never-written shared bytes

    # ---- layout of memory
    def _layout(self, params, dynamic_smem):
        addr = _SHARED_BASE
        for name, align, size, extern in self.p.shared:
            if extern:
                continue
            addr = -(-addr // align) * align
            self.syms[name] = ("shared", addr)
            addr += size
        for name, align, size in self.f.shared:
            addr = -(-addr // align) * align
            self.syms[name] = ("shared", addr)
            addr += size
        addr = -(-addr // 128) * 128
        for name, align, size, extern in self.p.shared:
            if extern:
                self.syms[name] = ("shared", addr)
        self.smem_end = addr + dynamic_smem
        base = _GLOBAL_BASE
        for name, data in self.p.globals.items():
            self.syms[name] = ("global", base)
            self._write_bytes(base, data)
            base += -(-len(data) // 256) * 256 + 256
        gp = _GEN_PARAM
        for name, value in zip(self.f.params, params):
            size = self.f.param_sizes.get(name, 8)
            self.syms[name] = ("param", gp)
            if isinstance(value, MapSpec):
                self.maps[gp] = value
            elif isinstance(value, str):
                if value not in self.pointers:
                    self.pointers[value] = base
                    base += 1 << 36
                self.param_values[gp] = self.pointers[value]
            else:
                self.param_values[gp] = int(value) if not isinstance(value, float) else _f2i(value, 32)
                if isinstance(value, float):
                    self.param_values[gp] = _f2i(value, 32)
            gp += max(size, 8) + 64
        if len(params) != len(self.f.params):
            raise ReplayError(f"the kernel takes {len(self.f.params)} parameters, the replay was given {len(params)}")

    def pointer(self, name: str) -> int:
        return self.pointers[name]

    def fill(self, name: str, shape: tuple, itemsize: int):
        """Tag every element of pointer argument ``name`` (a row-major ``shape``) with its
        :class:`Elem`, as a TMA load would: the kernel's plain loads then carry the names along."""
        base, mem = self.pointers[name], self.mem
        rows, cols = (shape if len(shape) == 2 else (1, shape[0]))
        for r in range(rows):
            for c in range(cols):
                cell = (Elem(name, r, c), itemsize)
                a = base + (r * cols + c) * itemsize
                for k in range(itemsize):
                    mem[a + k] = (cell, itemsize, k)

    def read_tensor(self, name: str, shape: tuple, itemsize: int) -> dict:
        """{(row, col): value} of what the block left in pointer argument ``name`` (values never
        written are left out)."""
        base, out = self.pointers[name], {}
        rows, cols = (shape if len(shape) == 2 else (1, shape[0]))
        for r in range(rows):
            for c in range(cols):
                a = base + (r * cols + c) * itemsize
                if a in self.mem:
                    out[(r, c)] = self.load(a, itemsize)
        return out

    # ---- memory
    def _write_bytes(self, addr, data: bytes):
        for k, b in enumerate(data):
            self.mem[addr + k] = (b, 1, 0)

    def store(self, addr: int, value, size: int):
        if isinstance(value, Pack):
            a = addr
            for v, s in value.parts:
                self.store(a, v, s)
                a += s
            return
        if isinstance(value, float):
            value = _f2i(value, 8 * size)
        if isinstance(value, int):
            for k in range(size):
                self.mem[addr + k] = ((value >> (8 * k)) & 0xFF, 1, 0)
            return
        cell = (value, size)
        for k in range(size):
            self.mem[addr + k] = (cell, size, k)

    def load(self, addr: int, size: int):
        m = self.mem
        first = m.get(addr)
        if first is not None and first[1] == size and first[2] == 0 and not isinstance(first[0], int):
            if all(m.get(addr + k) == (first[0], size, k) for k in range(1, size)):
                return first[0][0]
        cells = [m.get(addr + k) for k in range(size)]
        if all(c is not None and c[1] == 1 for c in cells):
            return sum(c[0] << (8 * k) for k, c in enumerate(cells))
        # narrower values side by side (two bf16 in a 32-bit load), else unknown
        parts, k = [], 0
        while k < size:
            c = cells[k]
            if c is None:
                return POISON
            if c[1] == 1:
                parts.append((c[0], 1))
                k += 1
                continue
            if c[2] != 0 or k + c[1] > size:
                return POISON
            parts.append((c[0][0], c[1]))
            k += c[1]
        return Pack(tuple(parts))

    def element_at(self, addr: int):
        """The value stored at ``addr`` (an :class:`Elem` after a TMA load), or None."""
        c = self.mem.get(addr)
        if c is None:
            return None
        v = c[0]
        if type(v) is tuple:
            return v[0] if c[2] == 0 else ("part", v[0], c[2])
        return None

    # ---- addresses
    def _space_addr(self, space: str, addr: int) -> int:
        """A flat key for memory: shared addresses as they are, generic ones mapped back."""
        if space == "shared" or space.startswith("shared"):
            return addr
        if space == "":
            if _GEN_SHARED <= addr < _GEN_SHARED + (1 << 32):
                return addr - _GEN_SHARED
        return addr

    # ---- compile instructions to closures
    def _compile(self, f: Function):
        return [self._compile_one(f, k, ins) for k, ins in enumerate(f.body)]

    def _getter(self, f: Function, s: str, kind: str = "b", w: int = 32):
        s = s.strip()
        if s.startswith("!"):
            g = self._getter(f, s[1:], "p", 1)

            def negated(t):
                v = g(t)
                return POISON if v is POISON else not v
            return negated
        local_names = {x[0] for x in f.local}
        if s.startswith("%") or re.fullmatch(r"[A-Za-z_][\w$]*", s) and s not in self.syms and s not in self.p.functions \
                and s not in f.params and s not in f.rets and s not in local_names and s != "_":
            name = s
            special = _SPECIAL.get(name)
            if special is not None:
                return lambda t, sp=special: sp(self, t)
            if kind == "f":
                def gf(t, name=name, w=w):
                    v = t.r.get(name, 0)
                    if type(v) is float:
                        return v
                    return _i2f(v, w) if type(v) is int else v
                return gf
            if kind in ("b", "u", "s"):
                def gi(t, name=name, w=w):
                    v = t.r.get(name, 0)
                    if type(v) is int:
                        return v
                    if type(v) is float:
                        return _f2i(v, w)
                    if type(v) is bool:
                        return int(v)
                    return v
                return gi
            return lambda t, name=name: t.r.get(name, 0)
        if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", s):
            v = _i2f(int(s[2:], 16), 32)
            return (lambda t: v) if kind == "f" else (lambda t, i=int(s[2:], 16): i)
        if re.fullmatch(r"0[dD][0-9a-fA-F]{16}", s):
            v = _i2f(int(s[2:], 16), 64)
            return (lambda t: v) if kind == "f" else (lambda t, i=int(s[2:], 16): i)
        if re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|\d+)U?", s):
            v = int(s.rstrip("U"), 0)
            if kind == "f":
                fv = float(v)
                return lambda t: fv
            v &= (1 << max(w, 1)) - 1 if w < 128 else (1 << 64) - 1
            return lambda t: v
        m = re.fullmatch(r"([\w$]+)\s*(\+\s*(-?\d+))?", s)
        if m and (m.group(1) in self.syms or m.group(1) in f.params or m.group(1) in f.rets or m.group(1) in local_names):
            return self._symbol_addr(f, m.group(1), int(m.group(3) or 0))
        raise ReplayError(f"operand {s!r} not understood")

    def _symbol_addr(self, f, name, off):
        for lname, align, size in f.local:
            if lname == name:
                return lambda t: _GEN_LOCAL + (t.tid << 24) + off
        if name in self.syms:
            space, a = self.syms[name]
            return lambda t: a + off
        # a .func's own parameter: an address in the thread's call-parameter space
        return lambda t: ("callparam", name, off)

    def _mem_getter(self, f: Function, s: str):
        """[reg+off] / [sym+off] / [reg] -> address getter."""
        inner = s.strip()[1:-1].strip()
        m = re.fullmatch(r"([%\w$.]+)\s*(\+\s*(-?(0[xX][0-9a-fA-F]+|\d+)))?", inner)
        if not m:
            raise ReplayError(f"address {s!r} not understood")
        base, off = m.group(1), int(m.group(3) or "0", 0)
        if base in self.syms or base in f.params or base in f.rets or base in {x[0] for x in f.local} \
                or not base.startswith("%") and base not in self._regnames(f):
            return self._symbol_addr(f, base, off)
        g = self._getter(f, base, "u", 64)
        return lambda t: (g(t) + off) if not isinstance(g(t), tuple) else g(t)

    def _regnames(self, f: Function):
        return f.regs

    def _setter(self, f: Function, s: str, kind: str, w: int):
        s = s.strip()
        if s == "_":
            return lambda t, v: None
        if s.startswith("{"):
            names = [x.strip() for x in s[1:-1].split(",")]
            return self._vec_setter(names, kind, w)
        name = s
        if kind == "p":
            return lambda t, v: t.r.__setitem__(name, bool(v))
        if kind == "f":
            return lambda t, v: t.r.__setitem__(name, v)
        mask = (1 << w) - 1

        def si(t, v):
            if isinstance(v, int):
                t.r[name] = v & mask
            else:
                t.r[name] = v
        return si

    def _vec_setter(self, names, kind, w):
        def sv(t, vals):
            for n, v in zip(names, vals):
                if n != "_":
                    t.r[n] = v
        return sv

    def _compile_one(self, f: Function, k: int, ins: Instr):
        nxt = k + 1
        body = _compile_op(self, f, k, ins)
        if ins.pred:
            neg = ins.pred.startswith("!")
            pname = ins.pred.lstrip("!")

            def guarded(t, body=body, neg=neg, pname=pname):
                v = t.r.get(pname, False)
                if v is POISON:
                    raise ReplayError(f"line {ins.line}: `{ins.text}` is predicated on a value the replay does not know")
                if bool(v) != neg:
                    return body(t)
                return nxt
            return guarded
        return body

    # ---- scheduling
    def run(self):
        """Run every thread to its end. Returns self; a hang raises :class:`Deadlock` (its message
        says who waits for what), a trap sets :attr:`trapped`."""
        runq = [t for t in self.threads if self.run_only is None or t.tid in self.run_only]
        if self.run_only is not None:
            for t in self.threads:
                if t.tid not in self.run_only:
                    t.state, t.exited = "done", True
        self.live = len(runq)
        while True:
            progressed = False
            for t in runq:
                if t.state == "run":
                    self._step_thread(t)
                    progressed = True
                    if self.trapped:
                        return self
            runq = [t for t in runq if t.state != "done"]
            if not runq:
                break
            if not any(t.state == "run" for t in runq):
                if self._drain_async():
                    self._wake_all()
                    continue
                if any(t.state == "run" for t in runq):
                    continue
                e = Deadlock(self._deadlock_report(runq))
                e.printf = [((self.block_idx[0], self.block_idx[1]), tid, text) for tid, text in self.printf]
                raise e
        self._drain_async(final=True)
        self.finish_wgmmas()
        return self

    def _wake_all(self):
        for t in self.threads:
            if t.state == "mbar":
                addr, parity = t.wait
                if self._phase_done(addr, parity):
                    t.state, t.wait = "run", None

    def _code_for(self, func):
        if func is self.f:
            return self.code
        code = self.funcs_code.get(func.name)
        if code is None:
            code = self.funcs_code[func.name] = self._compile(func)
        return code

    def _step_thread(self, t: _Thread, budget: int = 4000):
        func = t.func
        code = self._code_for(func)
        ncode = len(code)
        n = 0
        pc = t.pc
        try:
            while n < budget:
                if pc is None or pc >= ncode:
                    if t.frames:                      # fell off the end of a .func: return
                        caller, rpc, regs, params, retmap = t.frames.pop()
                        t.func, t.r, t.callparams, pc = caller, regs, params, rpc
                    else:
                        t.pc = pc
                        self._exit(t)
                        return
                else:
                    pc = code[pc](t)
                    n += 1
                    if pc is None and not t.frames:
                        t.pc = None
                        self._exit(t)
                        return
                if t.func is not func:
                    func = t.func
                    code = self._code_for(func)
                    ncode = len(code)
            t.pc = pc
        except _Yield:
            pass                                       # the instruction set t.pc itself
        finally:
            t.steps += n
            t.clock += n
            self.total_steps += n
        if self.total_steps > self.max_steps:
            raise ReplayError(f"the replay ran {self.max_steps:,} instructions without the block finishing: a loop "
                              "that never ends (or a problem size too large for the replay)")

    def _exit(self, t):
        t.state, t.exited = "done", True
        self.live -= 1
        self._check_bar_sync()
        self._check_warp_rv()

    # ---- barriers
    def _check_bar_sync(self):
        from .ptx_ops import _complete_bar
        for bid in list(self.bar_sync):
            _complete_bar(self, bid)

    def _live_count(self):
        return sum(1 for t in self.threads if not t.exited)

    def _check_warp_rv(self):
        for key in list(self.warp_rv):
            self._try_complete_rv(key)

    def _try_complete_rv(self, key):
        rv = self.warp_rv.get(key)
        if rv is None:
            return
        warp = key[0]
        members = [tid for tid in range(32 * warp, min(32 * warp + 32, self.nthreads))
                   if (rv["mask"] >> (tid % 32)) & 1 and not self.threads[tid].exited]
        if all(tid in rv["vals"] for tid in members) and rv["vals"]:
            results = rv["fn"](rv["vals"], members)
            for tid, v in results.items():
                th = self.threads[tid]
                th.state = "run"
                rv["deliver"](th, v)
            del self.warp_rv[key]

    # ---- mbarriers

# ---------------------------------------------------------------- special registers
def _sp(fn):
    return fn


_SPECIAL = {
    "%tid.x": lambda b, t: t.tid, "%tid.y": lambda b, t: 0, "%tid.z": lambda b, t: 0,
    "%ntid.x": lambda b, t: b.nthreads, "%ntid.y": lambda b, t: 1, "%ntid.z": lambda b, t: 1,
    "%ctaid.x": lambda b, t: b.block_idx[0], "%ctaid.y": lambda b, t: b.block_idx[1], "%ctaid.z": lambda b, t: b.block_idx[2],
    "%nctaid.x": lambda b, t: b.grid[0], "%nctaid.y": lambda b, t: b.grid[1], "%nctaid.z": lambda b, t: b.grid[2],
    "%laneid": lambda b, t: t.lane, "%warpid": lambda b, t: t.warp,
    "%clock": lambda b, t: t.clock & 0xFFFFFFFF, "%clock64": lambda b, t: t.clock, "%globaltimer": lambda b, t: t.clock,
    "%cluster_ctarank": lambda b, t: 0, "%cluster_nctarank": lambda b, t: 1,
    "%clusterid.x": lambda b, t: b.block_idx[0], "%clusterid.y": lambda b, t: b.block_idx[1],
    "%clusterid.z": lambda b, t: b.block_idx[2],
    "%nclusterid.x": lambda b, t: b.grid[0], "%nclusterid.y": lambda b, t: b.grid[1], "%nclusterid.z": lambda b, t: b.grid[2],
    "%cluster_ctaid.x": lambda b, t: 0, "%cluster_ctaid.y": lambda b, t: 0, "%cluster_ctaid.z": lambda b, t: 0,
    "%cluster_nctaid.x": lambda b, t: 1, "%cluster_nctaid.y": lambda b, t: 1, "%cluster_nctaid.z": lambda b, t: 1,
    "%is_explicit_cluster": lambda b, t: 0,
    "%lanemask_lt": lambda b, t: (1 << t.lane) - 1, "%lanemask_le": lambda b, t: (2 << t.lane) - 1,
    "%lanemask_eq": lambda b, t: 1 << t.lane, "%lanemask_gt": lambda b, t: (0xFFFFFFFF << (t.lane + 1)) & 0xFFFFFFFF,
    "%lanemask_ge": lambda b, t: (0xFFFFFFFF << t.lane) & 0xFFFFFFFF,
    "%dynamic_smem_size": lambda b, t: b.smem_end, "%total_smem_size": lambda b, t: b.smem_end,
    "%smid": lambda b, t: 0, "%nsmid": lambda b, t: 132, "%gridid": lambda b, t: 0,
}


from .ptx_ops import _compile_op  # noqa: E402  (the instruction set, one function per family)
