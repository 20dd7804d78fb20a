"""One thread block of a compiled cell, replayed on the CPU from its PTX.

A ``%%cuda`` cell compiles for sm_90a on any machine, but without a Hopper GPU nothing runs it. The
PTX that NVRTC makes from the cell (the compiler's front end: every address, descriptor and loop of
the learner's code, before ptxas) is regular enough to execute here, thread by thread, for one
small block. Shared memory, the mbarriers, the bulk tensor copies (TMA), the warpgroup MMAs'
operand reads and the warp-level collectives are modelled; the numbers a tensor core would compute
are not (its accumulators read 0). What the replay gives:

* every TMA load and store, with the box's coordinates, where it landed in shared memory (swizzled
  as the tensor map says) and which global element each shared-memory byte holds (:class:`Elem`);
* every ``wgmma.mma_async``: its shape, its descriptors, and — at the ``wgmma.wait_group`` that
  retires it, the latest moment the hardware may read its operands — which element it read for
  each (row, k) of A and (k, column) of B (:class:`WgmmaRead`; :mod:`grader.cuda.wgmma_replay`
  checks them);
* a hang found as a deadlock: every thread waits (on an mbarrier phase that can no longer complete,
  or on a barrier some thread never reaches) — named, with the parity each waiter asked for;
* ``printf`` output, and a ``trap``.

Asynchronous work is done as late as the rules allow: a TMA copy lands only when no thread can
run, and a wgmma reads its operands only when a wait retires it, so a missing wait reads stale
data here, deterministically. Integers are exact; floats are Python floats (no fp32 rounding).

:func:`kernel_ptx` compiles a module's source to PTX (NVRTC, cached); :class:`Program` parses it;
:func:`run_block` replays one block. Standard library only.
"""
from __future__ import annotations

import hashlib
import math
import re
import struct
from dataclasses import dataclass, field

# ---------------------------------------------------------------- PTX of a compiled cell
_PTX_CACHE: dict = {}


class ReplayError(RuntimeError):
    """The replay could not follow the kernel (an instruction it does not model, a branch on a
    value it does not know, a runaway loop). The message says which and where."""


def kernel_ptx(module, kernel: str | None = None) -> tuple[str, str]:
    """(PTX text, entry symbol) of ``kernel`` (a name expression of ``module``) compiled by NVRTC for
    the module's architecture, virtual (``compute_90a``). Cached in memory and on disk."""
    from . import toolchain

    name = kernel or module.kernel_names[0]
    symbol = module.symbol(name)
    arch = module.arch.replace("sm_", "compute_")
    flags = [f for f in module.options if f.startswith(("-D", "-U", "-I", "--std", "-std"))]
    key = hashlib.sha256(repr((module.source, arch, flags, name, toolchain.nvrtc_version(),
                               toolchain.headers_digest())).encode()).hexdigest()[:32]
    if key in _PTX_CACHE:
        return _PTX_CACHE[key], symbol
    path = toolchain.cache_root() / "ptx" / f"{key}.ptx"
    try:
        text = path.read_text()
    except OSError:
        text = _nvrtc_ptx(module.source, arch, flags, name)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except OSError:
            pass
    _PTX_CACHE[key] = text
    return text, symbol


def _nvrtc_ptx(source: str, arch: str, flags: list, name_expr: str) -> str:
    from cuda.bindings import nvrtc

    from . import toolchain
    from .compiler import _PRELUDE

    def ok(res):
        err = res[0] if isinstance(res, tuple) else res
        return int(err) == 0
    code = (_PRELUDE + '#line 1 "cell.cu"\n' + source).encode()
    err, prog = nvrtc.nvrtcCreateProgram(code, b"cell.cu", 0, [], [])
    try:
        nvrtc.nvrtcAddNameExpression(prog, name_expr.encode())
        opts = [f"--gpu-architecture={arch}", "-std=c++17", "-default-device", *flags,
                *[f"-I{p}" for p in toolchain.include_dirs()]]
        if toolchain.cuda_home() is None:
            opts.append("--use-bundled-headers") if False else None
        res = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        if not ok(res):
            _, n = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * n
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise ReplayError("NVRTC could not make the PTX: " + log.decode(errors="replace")[:2000])
        _, n = nvrtc.nvrtcGetPTXSize(prog)
        buf = b" " * n
        nvrtc.nvrtcGetPTX(prog, buf)
        return buf.decode().rstrip("\x00")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


# ---------------------------------------------------------------- values
@dataclass(frozen=True)
class Elem:
    """Element (row, col) of global tensor ``tensor`` (a name the replay's caller chose); ``head``
    for 3-D maps. What a shared-memory byte holds after a TMA load."""
    tensor: str
    row: int
    col: int
    head: int = 0

    def __str__(self):
        return f"{self.tensor}[{self.head}, {self.row}, {self.col}]" if self.head else f"{self.tensor}[{self.row}, {self.col}]"


class _Poison:
    """A value the replay does not know (read from memory nothing wrote, or computed from one)."""
    __slots__ = ()

    def __repr__(self):
        return "?"


POISON = _Poison()


@dataclass(frozen=True)
class Pack:
    """Several narrower values loaded or moved together (two bf16 elements in one 32-bit load)."""
    parts: tuple      # ((value, size in bytes), ...) low bytes first


def _f2i(v: float, w: int) -> int:
    if w == 64:
        return struct.unpack("<Q", struct.pack("<d", v))[0]
    if w == 16:
        return struct.unpack("<H", struct.pack("<e", v))[0] if math.isfinite(v) or math.isnan(v) else 0
    try:
        return struct.unpack("<I", struct.pack("<f", v))[0]
    except OverflowError:
        return 0x7F800000 if v > 0 else 0xFF800000


def _i2f(v: int, w: int) -> float:
    if w == 64:
        return struct.unpack("<d", struct.pack("<Q", v & (2**64 - 1)))[0]
    if w == 16:
        return struct.unpack("<e", struct.pack("<H", v & 0xFFFF))[0]
    return struct.unpack("<f", struct.pack("<I", v & 0xFFFFFFFF))[0]


def _bf16(v: float) -> int:
    """fp32 -> bf16 bits, round to nearest even."""
    if math.isnan(v):
        return 0x7FC0
    b = _f2i(v, 32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def _sx(v: int, w: int) -> int:
    v &= (1 << w) - 1
    return v - (1 << w) if v >> (w - 1) else v


# ---------------------------------------------------------------- parsing
_TYPES = {"pred": ("p", 1), "b8": ("b", 8), "b16": ("b", 16), "b32": ("b", 32), "b64": ("b", 64), "b128": ("b", 128),
          "u8": ("u", 8), "u16": ("u", 16), "u32": ("u", 32), "u64": ("u", 64),
          "s8": ("s", 8), "s16": ("s", 16), "s32": ("s", 32), "s64": ("s", 64),
          "f16": ("f", 16), "f16x2": ("b", 32), "bf16": ("f", 16), "bf16x2": ("b", 32), "f32": ("f", 32), "f64": ("f", 64),
          "tf32": ("b", 32), "e4m3": ("b", 8), "e5m2": ("b", 8)}


@dataclass
class Instr:
    op: str                 # "add.s32"
    args: list              # operand strings
    pred: str | None = None  # "%p1" / "!%p1"
    line: int = 0
    text: str = ""


@dataclass
class Function:
    name: str
    params: list                                  # names of .param in order
    rets: list                                    # names of return .param
    body: list = field(default_factory=list)      # Instr
    labels: dict = field(default_factory=dict)    # label -> index
    shared: list = field(default_factory=list)    # (name, align, size) declared inside
    local: list = field(default_factory=list)     # (name, align, size)
    is_entry: bool = False
    param_sizes: dict = field(default_factory=dict)
    regs: set = field(default_factory=set)        # plain register names declared (inline asm: p, remote)


class Program:
    """A parsed PTX module: functions, module-scope shared / global variables and their initial data."""

    def __init__(self, text: str):
        self.text = text
        self.functions: dict[str, Function] = {}
        self.shared: list = []            # (name, align, size, extern)
        self.globals: dict = {}           # name -> bytes (initialised .global / .const)
        self._parse(text)

    @staticmethod
    def _split_args(s: str) -> list:
        out, depth, cur = [], 0, []
        for ch in s:
            if ch in "{[(":
                depth += 1
            elif ch in "}])":
                depth -= 1
            if ch == "," and depth == 0:
                out.append("".join(cur).strip())
                cur = []
            else:
                cur.append(ch)
        if "".join(cur).strip():
            out.append("".join(cur).strip())
        return out

    def _parse(self, text: str):
        text = re.sub(r"//[^\n]*", "", text)
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        lines = text.split("\n")
        cur: Function | None = None
        depth = 0
        header: list | None = None
        i = 0
        stmt_buf = ""
        for lineno, raw in enumerate(lines, 1):
            line = raw.strip()
            if not line:
                continue
            if cur is None:
                if header is not None:
                    header.append(line)
                    if line.endswith(";") and "{" not in line:        # a declaration (.extern .func …;)
                        header = None
                        continue
                    if line.startswith("{") or line.endswith("{"):
                        cur = self._function_header(" ".join(header))
                        header = None
                        depth = 1
                    continue
                m = re.match(r"(\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\b", line)
                if m and not line.endswith(";"):
                    header = [line]
                    if line.endswith("{"):
                        cur = self._function_header(line)
                        header, depth = None, 1
                    continue
                self._module_statement(line)
                continue
            # inside a function body
            stmt_buf += " " + line
            while True:
                s = stmt_buf.strip()
                if not s:
                    stmt_buf = ""
                    break
                if s.startswith("{"):
                    depth += 1
                    stmt_buf = s[1:]
                    continue
                if s.startswith("}"):
                    depth -= 1
                    stmt_buf = s[1:]
                    if depth == 0:
                        self.functions[cur.name] = cur
                        cur = None
                        stmt_buf = ""
                        break
                    continue
                m = re.match(r"([$\w]+):(?!:)", s)
                if m and not s.startswith("."):
                    cur.labels[m.group(1)] = len(cur.body)
                    stmt_buf = s[m.end():]
                    continue
                semi = s.find(";")
                if semi < 0:
                    stmt_buf = s
                    break
                self._body_statement(cur, s[:semi].strip(), lineno)
                stmt_buf = s[semi + 1:]
            if cur is None:
                stmt_buf = ""

    def _function_header(self, h: str) -> Function:
        m = re.search(r"\.(entry|func)\s*(\(([^)]*)\))?\s*([\w$]+)\s*(\(([^)]*)\))?", h, re.S)
        kind = m.group(1)
        rets = [p.split()[-1] for p in self._split_args(m.group(3) or "")]
        name = m.group(4)
        params_raw = self._split_args(m.group(6) or "")
        params, sizes = [], {}
        for p in params_raw:
            pm = re.search(r"([\w$]+)(\[(\d+)\])?\s*$", p)
            params.append(pm.group(1))
            t = re.search(r"\.(b8|u8|s8|b16|u16|s16|f16|b32|u32|s32|f32|b64|u64|s64|f64)\b", p)
            unit = _TYPES[t.group(1)][1] // 8 if t else 8
            sizes[pm.group(1)] = unit * int(pm.group(3) or 1)
        rets_clean = [re.sub(r"\[.*", "", r) for r in rets]
        return Function(name=name, params=params, rets=rets_clean, is_entry=kind == "entry", param_sizes=sizes)

    def _module_statement(self, line: str):
        m = re.match(r"(\.extern\s+)?\.shared\s+(\.align\s+(\d+)\s+)?\.\w+\s+([\w$]+)\s*(\[(\d*)\])?", line)
        if m:
            self.shared.append((m.group(4), int(m.group(3) or 1), int(m.group(6) or 0), bool(m.group(1))))
            return
        m = re.match(r"(\.visible\s+|\.weak\s+)?\.(global|const)\s+(\.align\s+(\d+)\s+)?\.(\w+)\s+([\w$]+)\s*(\[(\d*)\])?\s*(=\s*(.*))?;", line)
        if m:
            t = _TYPES.get(m.group(5), ("b", 8))[1] // 8
            n = int(m.group(8) or 1) if m.group(7) else 1
            data = bytearray(t * n)
            if m.group(10):
                vals = re.findall(r"-?0[xX][0-9a-fA-F]+|-?\d+", m.group(10))
                for k, v in enumerate(vals[:n]):
                    data[k * t:(k + 1) * t] = (int(v, 0) & ((1 << (8 * t)) - 1)).to_bytes(t, "little")
            self.globals[m.group(6)] = bytes(data)

    def _body_statement(self, f: Function, s: str, lineno: int):
        if s.startswith(".reg"):
            for name in s.split()[-1:] + [x.strip() for x in s.split(None, 2)[-1].split(",")]:
                name = name.strip()
                if name and "<" not in name and not name.startswith("."):
                    f.regs.add(name)
            return
        if s.startswith("."):
            m = re.match(r"\.(shared|local)\s+(\.align\s+(\d+)\s+)?\.\w+\s+([\w$]+)\s*(\[(\d*)\])?", s)
            if m:
                (f.shared if m.group(1) == "shared" else f.local).append(
                    (m.group(4), int(m.group(3) or 1), int(m.group(6) or 1)))
            return            # .reg and other directives
        pred = None
        m = re.match(r"@(!?[%\w$]+)\s+", s)
        if m:
            pred, s = m.group(1), s[m.end():]
        parts = s.split(None, 1)
        op = parts[0]
        args = self._split_args(parts[1]) if len(parts) > 1 else []
        f.body.append(Instr(op=op, args=args, pred=pred, line=lineno, text=s))


# ---------------------------------------------------------------- tensor maps and events
@dataclass
class MapSpec:
    """What a tensor map describes: the tensor's name (as :class:`Elem` will call it), its shape
    (rows, cols) or (heads, rows, cols), the box (rows, cols), the element size, the swizzle."""
    tensor: str
    shape: tuple
    box: tuple
    itemsize: int
    swizzle: str = "128B"


SWIZZLE_BITS = {"none": 0, "32B": 1, "64B": 2, "128B": 3}


def swizzle_addr(addr: int, swizzle: str) -> int:
    """Swizzle<B, 4, 3> on a shared-memory byte address (CUTLASS's name): the 16-byte chunk bits
    [4, 4 + B) XOR the bits [7, 7 + B); B = 3, 2, 1, 0 for 128B, 64B, 32B, none."""
    b = SWIZZLE_BITS[swizzle]
    return addr ^ (((addr >> 7) & ((1 << b) - 1)) << 4)


@dataclass
class TmaOp:
    kind: str              # "load" / "store"
    tid: int
    smem: int              # shared address of the box
    coords: tuple          # innermost first, as the instruction names them
    spec: MapSpec
    barrier: int | None
    seq: int
    line: int
    multicast: int | None = None


@dataclass
class WgmmaRead:
    """One wgmma as issued by a warpgroup and what it read when a wait retired it."""
    warpgroup: int
    seq: int                # issue order in the block
    shape: tuple            # (M, N, K)
    dtype: str              # "bf16" / "e4m3" / ...
    desc_a: int | None      # None: A from registers
    desc_b: int
    trans_a: int
    trans_b: int
    line: int
    tid: int
    scale_d: object = None  # the scale-d operand: False = D is overwritten (a fresh accumulator)
    a: dict = field(default_factory=dict)     # (i, kk) -> (address, value)
    b: dict = field(default_factory=dict)     # (n, kk) -> (address, value)
    done: bool = False


class Deadlock(Exception):
    pass


# ---------------------------------------------------------------- the machine
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


class _Yield(Exception):
    pass


_SHARED_BASE = 0x400              # where static shared memory starts (Hopper reserves the first KiB)
_GEN_SHARED = 0x7F00_0000_0000    # generic addresses of the shared window
_GEN_PARAM = 0x7E00_0000_0000     # generic addresses of kernel parameters
_GEN_LOCAL = 0x7D00_0000_0000
_GLOBAL_BASE = 0x1000_0000_0000   # pointers the caller passes


class Block:
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

    def box_offsets(self, spec: MapSpec):
        """(shared byte offset before swizzle, box row, box col) of every element of a box, in the
        order TMA lays them: rows of box[-1] elements, row-major."""
        rows = 1
        for b in spec.box[:-1]:
            rows *= b
        cols = spec.box[-1]
        return rows, cols

    def _do_tma_load(self, op: TmaOp):
        spec = op.spec
        it = spec.itemsize
        box_cols = spec.box[-1]
        box_rows = spec.box[-2] if len(spec.box) > 1 else 1
        c0 = op.coords[0]
        r0 = op.coords[1] if len(op.coords) > 1 else 0
        h0 = op.coords[2] if len(op.coords) > 2 else 0
        rows, cols = spec.shape[-2], spec.shape[-1]
        heads = spec.shape[0] if len(spec.shape) == 3 else 1
        nbytes = box_rows * box_cols * it
        mem, dst, name = self.mem, op.smem, spec.tensor
        bmask = (1 << SWIZZLE_BITS[spec.swizzle]) - 1
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
            self._complete_tx(op.barrier, nbytes)

    def _do_tma_store(self, op: TmaOp):
        spec = op.spec
        it = spec.itemsize
        box_cols = spec.box[-1]
        box_rows = spec.box[-2] if len(spec.box) > 1 else 1
        c0 = op.coords[0]
        r0 = op.coords[1] if len(op.coords) > 1 else 0
        h0 = op.coords[2] if len(op.coords) > 2 else 0
        rows, cols = spec.shape[-2], spec.shape[-1]
        out = self.outputs.setdefault(spec.tensor, {}) if hasattr(self, "outputs") else None
        if out is None:
            self.outputs = {}
            out = self.outputs.setdefault(spec.tensor, {})
        for r in range(box_rows):
            for c in range(box_cols):
                gr, gc = r0 + r, c0 + c
                if 0 <= gr < rows and 0 <= gc < cols:
                    a = swizzle_addr(op.smem + (r * box_cols + c) * it, spec.swizzle)
                    out[(h0, gr, gc)] = self.load(a, it)

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
        from .wgmma_replay import operand_reads
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

__all__ = ["kernel_ptx", "Program", "Block", "MapSpec", "Elem", "TmaOp", "WgmmaRead", "Deadlock", "ReplayError",
           "POISON", "Pack", "swizzle_addr"]
