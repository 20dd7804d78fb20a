"""The PTX instructions :mod:`grader.cuda.ptx` replays: one closure per instruction, made once.

Each closure takes the thread and returns the index of the next instruction. Families: moves and
integer / float arithmetic, comparisons, loads and stores (shared, global, param, local, generic),
atomics, conversions, control flow and calls (``printf`` included), block barriers, warp collectives
(a rendezvous of the warp's lanes), mbarriers, TMA copies, wgmma. Anything else raises
:class:`~grader.cuda.ptx.ReplayError` naming the instruction, when it runs (not when it is read).
"""
from __future__ import annotations

import math
import re

from .ptx import (_GEN_LOCAL, _GEN_PARAM, _GEN_SHARED, _TYPES, POISON, Elem, Pack, ReplayError, TmaOp, WgmmaRead,
                  _bf16, _f2i, _i2f, _sx, _Yield)

_NUM = (int, float)


def _type_of(mods):
    """The last type modifier of an opcode: (kind, width)."""
    for m in reversed(mods):
        if m in _TYPES:
            return _TYPES[m]
    return ("b", 32)


def _space(mods):
    for m in mods:
        base = m.split("::")[0]
        if base in ("shared", "global", "param", "local", "const"):
            return base
    return ""


def _unknown(*vals):
    for v in vals:
        if not isinstance(v, _NUM):
            return True
    return False


def _compile_op(b, f, k, ins):
    parts = ins.op.split(".")
    base, mods = parts[0], parts[1:]
    nxt = k + 1
    fn = _FAMILIES.get(base)
    if fn is None:
        return _unsupported(ins, nxt)
    try:
        out = fn(b, f, k, ins, mods, nxt)
    except ReplayError:
        raise
    except Exception as e:       # a form this module does not parse: fail when (if) it runs
        return _unsupported(ins, nxt, f" ({type(e).__name__}: {e})")
    return out


def _unsupported(ins, nxt, why=""):
    def op(t):
        raise ReplayError(f"line {ins.line}: the replay does not model `{ins.text}`{why}")
    return op


def _noop(b, f, k, ins, mods, nxt):
    return lambda t: nxt


# ---------------------------------------------------------------- moves and arithmetic
def _mov(b, f, k, ins, mods, nxt):
    kind, w = _type_of(mods)
    d, a = ins.args
    if a.startswith("{"):
        names = [x.strip() for x in a[1:-1].split(",")]
        gs = [b._getter(f, n, "u", w // len(names)) for n in names]
        piece = w // len(names)
        setd = b._setter(f, d, "b", w)

        def pack(t):
            vals = [g(t) for g in gs]
            if _unknown(*vals):
                setd(t, Pack(tuple((v, piece // 8) for v in vals)))
            else:
                setd(t, sum((v & ((1 << piece) - 1)) << (piece * i) for i, v in enumerate(vals)))
            return nxt
        return pack
    if d.startswith("{"):
        names = [x.strip() for x in d[1:-1].split(",")]
        g = b._getter(f, a, "u", w)
        piece = w // len(names)

        def unpack(t):
            v = g(t)
            for i, n in enumerate(names):
                if n == "_":
                    continue
                if isinstance(v, int):
                    t.r[n] = (v >> (piece * i)) & ((1 << piece) - 1)
                elif isinstance(v, Pack) and len(v.parts) == len(names):
                    t.r[n] = v.parts[i][0]
                else:
                    t.r[n] = POISON
            return nxt
        return unpack
    g = b._getter(f, a, kind if kind != "b" else "raw", w)
    mask = (1 << w) - 1 if kind != "p" else 1

    def mov(t):
        v = g(t)
        if isinstance(v, int) and kind != "f":
            v &= mask
        elif isinstance(v, float) and kind in "bus" and kind != "f":
            pass                                   # a float moved through a .b32: keep it
        t.r[d] = v
        return nxt
    return mov


def _int_binop(fn):
    def make(b, f, k, ins, mods, nxt):
        kind, w = _type_of(mods)
        if kind == "f":
            return _float_binop(b, f, k, ins, mods, nxt)
        if kind == "p":
            return _pred_binop(b, f, k, ins, mods, nxt, fn)
        d, x, y = ins.args[:3]
        gx, gy = b._getter(f, x, kind, w), b._getter(f, y, kind, w)
        wide = "wide" in mods
        hi = "hi" in mods
        ow = 2 * w if wide else w
        mask = (1 << ow) - 1
        signed = kind == "s"
        setd = b._setter(f, d, kind, ow)

        if not signed and not hi and d.startswith("%") and fn in (_i_add, _i_sub, _i_and, _i_or, _i_xor, _i_mul):
            pyop = {_i_add: int.__add__, _i_sub: int.__sub__, _i_and: int.__and__, _i_or: int.__or__,
                    _i_xor: int.__xor__, _i_mul: int.__mul__}[fn]

            def fast(t):
                try:
                    t.r[d] = pyop(gx(t), gy(t)) & mask
                except TypeError:
                    t.r[d] = POISON
                return nxt
            return fast

        def op(t):
            a, c = gx(t), gy(t)
            if _unknown(a, c):
                setd(t, POISON)
                return nxt
            if signed:
                a, c = _sx(a, w), _sx(c, w)
            r = fn(a, c, w, signed, hi, ins)
            setd(t, r & mask)
            return nxt
        return op
    return make


def _pred_binop(b, f, k, ins, mods, nxt, fn):
    d, x, y = ins.args[:3]
    gx, gy = b._getter(f, x, "p", 1), b._getter(f, y, "p", 1)
    name = ins.op.split(".")[0]

    def op(t):
        a, c = gx(t), gy(t)
        if _unknown(a, c):
            t.r[d] = POISON
            return nxt
        t.r[d] = {"and": lambda: bool(a) and bool(c), "or": lambda: bool(a) or bool(c),
                  "xor": lambda: bool(a) != bool(c)}[name]()
        return nxt
    return op


def _i_add(a, c, w, s, hi, ins):
    return a + c


def _i_sub(a, c, w, s, hi, ins):
    return a - c


def _i_mul(a, c, w, s, hi, ins):
    r = a * c
    return r >> w if hi else r


def _i_div(a, c, w, s, hi, ins):
    if c == 0:
        return (1 << w) - 1
    q = abs(a) // abs(c)
    return q if (a >= 0) == (c >= 0) else -q


def _i_rem(a, c, w, s, hi, ins):
    if c == 0:
        return a
    r = abs(a) % abs(c)
    return r if a >= 0 else -r


def _i_min(a, c, w, s, hi, ins):
    return min(a, c)


def _i_max(a, c, w, s, hi, ins):
    return max(a, c)


def _i_and(a, c, w, s, hi, ins):
    return a & c


def _i_or(a, c, w, s, hi, ins):
    return a | c


def _i_xor(a, c, w, s, hi, ins):
    return a ^ c


def _shift(b, f, k, ins, mods, nxt):
    kind, w = _type_of(mods)
    d, x, y = ins.args
    gx, gy = b._getter(f, x, kind, w), b._getter(f, y, "u", 32)
    left = ins.op.startswith("shl")
    signed = kind == "s"
    mask = (1 << w) - 1

    def op(t):
        a, c = gx(t), gy(t)
        if _unknown(a, c):
            t.r[d] = POISON
            return nxt
        c = min(c, w)
        if left:
            r = (a << c) & mask
        elif signed:
            r = (_sx(a, w) >> c) & mask
        else:
            r = (a & mask) >> c
        t.r[d] = r
        return nxt
    return op


def _unary(b, f, k, ins, mods, nxt):
    kind, w = _type_of(mods)
    d, x = ins.args[:2]
    name = ins.op.split(".")[0]
    if kind == "f":
        g = b._getter(f, x, "f", w)

        def fop(t):
            a = g(t)
            if _unknown(a):
                t.r[d] = POISON
                return nxt
            t.r[d] = _FUN[name](a)
            return nxt
        return fop
    if kind == "p":
        g = b._getter(f, x, "p", 1)
        return lambda t: (t.r.__setitem__(d, (not g(t)) if g(t) is not POISON else POISON), nxt)[1]
    g = b._getter(f, x, kind, w)
    mask = (1 << w) - 1

    def iop(t):
        a = g(t)
        if _unknown(a):
            t.r[d] = POISON
            return nxt
        if name == "not":
            r = ~a
        elif name == "cnot":
            r = int(a == 0)
        elif name == "neg":
            r = -a
        elif name == "abs":
            r = abs(_sx(a, w))
        elif name == "popc":
            r = bin(a & mask).count("1")
        elif name == "clz":
            r = w - (a & mask).bit_length()
        elif name == "brev":
            r = int(format(a & mask, f"0{w}b")[::-1], 2)
        else:
            raise ReplayError(f"line {ins.line}: `{ins.text}` not modelled")
        t.r[d] = r & (mask if name not in ("popc", "clz") else 0xFFFFFFFF)
        return nxt
    return iop


def _ex2(a):
    try:
        return 2.0 ** a
    except OverflowError:
        return math.inf


_FUN = {
    "neg": lambda a: -a, "abs": abs, "rcp": lambda a: (1.0 / a) if a else math.copysign(math.inf, a),
    "sqrt": lambda a: math.sqrt(a) if a >= 0 else math.nan,
    "rsqrt": lambda a: (1.0 / math.sqrt(a)) if a > 0 else (math.inf if a == 0 else math.nan),
    "ex2": _ex2, "lg2": lambda a: math.log2(a) if a > 0 else (-math.inf if a == 0 else math.nan),
    "sin": math.sin, "cos": math.cos, "tanh": math.tanh, "not": None,
}


def _float_binop(b, f, k, ins, mods, nxt):
    kind, w = _type_of(mods)
    name = ins.op.split(".")[0]
    d, x, y = ins.args[:3]
    gx, gy = b._getter(f, x, "f", w), b._getter(f, y, "f", w)
    fn = {"add": lambda a, c: a + c, "sub": lambda a, c: a - c, "mul": lambda a, c: a * c,
          "div": lambda a, c: a / c if c else (math.copysign(math.inf, a) if a else math.nan),
          "min": lambda a, c: c if math.isnan(a) else a if math.isnan(c) else min(a, c),
          "max": lambda a, c: c if math.isnan(a) else a if math.isnan(c) else max(a, c),
          "copysign": lambda a, c: math.copysign(c, a)}[name]

    def op(t):
        try:
            t.r[d] = fn(gx(t), gy(t))
        except TypeError:
            t.r[d] = POISON
        except (OverflowError, ValueError, ZeroDivisionError):
            t.r[d] = math.nan
        return nxt
    return op


def _fma(b, f, k, ins, mods, nxt):
    kind, w = _type_of(mods)
    d, x, y, z = ins.args[:4]
    if kind != "f":
        gx, gy, gz = (b._getter(f, s, kind, w) for s in (x, y, z))
        hi, wide = "hi" in mods, "wide" in mods
        ow = 2 * w if wide else w
        signed = kind == "s"

        def imad(t):
            a, c, e = gx(t), gy(t), gz(t)
            if _unknown(a, c, e):
                t.r[d] = POISON
                return nxt
            if signed:
                a, c, e = _sx(a, w), _sx(c, w), _sx(e, ow)
            p = a * c
            if hi:
                p >>= w
            t.r[d] = (p + e) & ((1 << ow) - 1)
            return nxt
        return imad
    gx, gy, gz = (b._getter(f, s, "f", w) for s in (x, y, z))

    def op(t):
        try:
            t.r[d] = gx(t) * gy(t) + gz(t)
        except TypeError:
            t.r[d] = POISON
        except (OverflowError, ValueError):
            t.r[d] = math.nan
        return nxt
    return op


def _arith(name):
    ints = {"add": _i_add, "sub": _i_sub, "mul": _i_mul, "div": _i_div, "rem": _i_rem, "min": _i_min,
            "max": _i_max, "and": _i_and, "or": _i_or, "xor": _i_xor}
    return _int_binop(ints[name])


def _bfe(b, f, k, ins, mods, nxt):
    kind, w = _type_of(mods)
    d, x, y, z = ins.args
    gx, gy, gz = b._getter(f, x, kind, w), b._getter(f, y, "u", 32), b._getter(f, z, "u", 32)

    def op(t):
        a, pos, ln = gx(t), gy(t) & 0xFF, gz(t) & 0xFF
        if _unknown(a):
            t.r[d] = POISON
            return nxt
        v = (a >> pos) & ((1 << ln) - 1) if ln else 0
        if kind == "s" and ln and (v >> (ln - 1)) & 1:
            v -= 1 << ln
        t.r[d] = v & ((1 << w) - 1)
        return nxt
    return op


def _bfi(b, f, k, ins, mods, nxt):
    kind, w = _type_of(mods)
    d, x, y, p, ln = ins.args
    gx, gy, gp, gl = (b._getter(f, s, "u", w if i < 2 else 32) for i, s in enumerate((x, y, p, ln)))

    def op(t):
        a, c, pos, n = gx(t), gy(t), gp(t) & 0xFF, gl(t) & 0xFF
        if _unknown(a, c):
            t.r[d] = POISON
            return nxt
        m = ((1 << n) - 1) << pos
        t.r[d] = ((c & ~m) | ((a << pos) & m)) & ((1 << w) - 1)
        return nxt
    return op


def _lop3(b, f, k, ins, mods, nxt):
    d, x, y, z, lut = ins.args
    gs = [b._getter(f, s, "u", 32) for s in (x, y, z)]
    imm = int(lut, 0)

    def op(t):
        a, c, e = (g(t) for g in gs)
        if _unknown(a, c, e):
            t.r[d] = POISON
            return nxt
        r = 0
        for bit in range(32):
            idx = (((a >> bit) & 1) << 2) | (((c >> bit) & 1) << 1) | ((e >> bit) & 1)
            r |= ((imm >> idx) & 1) << bit
        t.r[d] = r
        return nxt
    return op


def _shf(b, f, k, ins, mods, nxt):
    d, lo, hi, sh = ins.args
    glo, ghi, gsh = (b._getter(f, s, "u", 32) for s in (lo, hi, sh))
    left, clamp = "l" in mods, "clamp" in mods

    def op(t):
        a, c, n = glo(t), ghi(t), gsh(t)
        if _unknown(a, c, n):
            t.r[d] = POISON
            return nxt
        n = min(n, 32) if clamp else n & 31
        v = (c << 32) | a
        t.r[d] = ((v << n) >> 32) & 0xFFFFFFFF if left else (v >> n) & 0xFFFFFFFF
        return nxt
    return op


def _prmt(b, f, k, ins, mods, nxt):
    d, x, y, c = ins.args
    gx, gy, gc = (b._getter(f, s, "u", 32) for s in (x, y, c))

    def op(t):
        a, e, sel = gx(t), gy(t), gc(t)
        if _unknown(a, e, sel):
            t.r[d] = POISON
            return nxt
        bytes_ = ((e << 32) | a).to_bytes(8, "little")
        r = 0
        for i in range(4):
            s = (sel >> (4 * i)) & 0xF
            v = bytes_[s & 7]
            if s & 8:
                v = 0xFF if v & 0x80 else 0
            r |= v << (8 * i)
        t.r[d] = r
        return nxt
    return op


def _setp(b, f, k, ins, mods, nxt):
    cmp = mods[0]
    boolop = mods[1] if len(mods) > 1 and mods[1] in ("and", "or", "xor") else None
    kind, w = _type_of(mods)
    dst = ins.args[0]
    gx, gy = b._getter(f, ins.args[1], kind, w), b._getter(f, ins.args[2], kind, w)
    gc = b._getter(f, ins.args[3], "p", 1) if boolop else None
    dp, dq = (dst.split("|") + [None])[:2]
    signed = kind == "s"

    def cmpf(a, c):
        if kind == "f":
            un = math.isnan(a) or math.isnan(c)
            base = cmp.rstrip("u") if cmp not in ("num", "nan") else cmp
            if cmp == "num":
                return not un
            if cmp == "nan":
                return un
            if un:
                return cmp.endswith("u") and cmp not in ("lu",) or cmp in ("equ", "neu", "ltu", "leu", "gtu", "geu")
            return {"eq": a == c, "ne": a != c, "lt": a < c, "le": a <= c, "gt": a > c, "ge": a >= c}[base]
        if signed:
            a, c = _sx(a, w), _sx(c, w)
        return {"eq": a == c, "ne": a != c, "lt": a < c, "le": a <= c, "gt": a > c, "ge": a >= c,
                "lo": a < c, "ls": a <= c, "hi": a > c, "hs": a >= c}[cmp]

    def op(t):
        a, c = gx(t), gy(t)
        if kind == "p":
            a, c = int(bool(a)) if a is not POISON else a, int(bool(c)) if c is not POISON else c
        if _unknown(a, c):
            t.r[dp.strip()] = POISON
            if dq:
                t.r[dq.strip()] = POISON
            return nxt
        r = bool(cmpf(a, c))
        q = not r
        if boolop:
            e = gc(t)
            if e is POISON:
                t.r[dp.strip()] = POISON
                return nxt
            e = bool(e)
            comb = {"and": lambda u: u and e, "or": lambda u: u or e, "xor": lambda u: u != e}[boolop]
            r, q = comb(r), comb(q)
        t.r[dp.strip()] = r
        if dq:
            t.r[dq.strip()] = q
        return nxt
    return op


def _selp(b, f, k, ins, mods, nxt):
    kind, w = _type_of(mods)
    d, x, y, c = ins.args
    gx, gy, gc = b._getter(f, x, kind, w), b._getter(f, y, kind, w), b._getter(f, c, "p", 1)

    def op(t):
        p = gc(t)
        if p is POISON:
            t.r[d] = POISON
            return nxt
        t.r[d] = gx(t) if p else gy(t)
        return nxt
    return op


def _slct(b, f, k, ins, mods, nxt):
    d, x, y, c = ins.args
    kind, w = _TYPES.get(mods[0], ("b", 32))
    ck, cw = _TYPES.get(mods[1], ("s", 32))
    gx, gy, gc = b._getter(f, x, kind, w), b._getter(f, y, kind, w), b._getter(f, c, ck, cw)

    def op(t):
        c_ = gc(t)
        if _unknown(c_):
            t.r[d] = POISON
            return nxt
        neg = c_ < 0 if isinstance(c_, float) else _sx(c_, cw) < 0
        t.r[d] = gy(t) if neg else gx(t)
        return nxt
    return op


def _cvt(b, f, k, ins, mods, nxt):
    types = [m for m in mods if m in _TYPES]
    if len(types) < 2:
        raise ReplayError(f"cvt without two types: {ins.text}")
    (dk, dw), (sk, sw) = _TYPES[types[0]], _TYPES[types[1]]
    rnd = next((m for m in mods if m in ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "rna", "rs")), None)
    sat = "sat" in mods
    if types[0] in ("bf16x2", "f16x2") or types[0] in ("e4m3x2", "e5m2x2"):
        d, x, y = ins.args
        gx, gy = b._getter(f, x, "f", 32), b._getter(f, y, "f", 32)
        conv = _bf16 if types[0] == "bf16x2" else (lambda v: _f2i(v, 16))

        def pack2(t):
            hi, lo = gx(t), gy(t)           # cvt.rn.bf16x2.f32 d, a, b: a to the upper half
            if _unknown(hi, lo):
                t.r[d] = POISON
                return nxt
            t.r[d] = (conv(hi) << 16) | conv(lo)
            return nxt
        return pack2
    d, x = ins.args[:2]
    g = b._getter(f, x, sk, sw)
    dmask = (1 << dw) - 1

    def op(t):
        v = g(t)
        if _unknown(v):
            t.r[d] = POISON
            return nxt
        if sk == "f" and dk == "f":
            if types[0] == "bf16":
                r = _i2f(_bf16(v) << 16, 32)
                t.r[d] = _bf16(v) if dw == 16 else r
                return nxt
            r = float(v)
            if rnd in ("rni", "rzi", "rmi", "rpi") and math.isfinite(r):
                r = float({"rni": round, "rzi": math.trunc, "rmi": math.floor, "rpi": math.ceil}[rnd](r))
            if dw == 16:
                t.r[d] = _f2i(r, 16)
                return nxt
            t.r[d] = r
            return nxt
        if sk == "f":                      # float -> int
            if math.isnan(v):
                r = 0
            else:
                fn = {"rni": round, "rzi": math.trunc, "rmi": math.floor, "rpi": math.ceil}.get(rnd, math.trunc)
                try:
                    r = int(fn(v))
                except OverflowError:
                    r = (1 << (dw - 1)) - 1 if v > 0 else -(1 << (dw - 1))
                lo, hi = (-(1 << (dw - 1)), (1 << (dw - 1)) - 1) if dk == "s" else (0, dmask)
                r = max(lo, min(hi, r))
            t.r[d] = r & dmask
            return nxt
        if dk == "f":                      # int -> float
            iv = _sx(v, sw) if sk == "s" else v & ((1 << sw) - 1)
            t.r[d] = float(iv) if dw != 16 else _f2i(float(iv), 16)
            return nxt
        iv = _sx(v, sw) if sk == "s" else v & ((1 << sw) - 1)
        if sat:
            lo, hi = (-(1 << (dw - 1)), (1 << (dw - 1)) - 1) if dk == "s" else (0, dmask)
            iv = max(lo, min(hi, iv))
        t.r[d] = iv & dmask
        return nxt
    return op


def _cvta(b, f, k, ins, mods, nxt):
    d, x = ins.args
    g = b._getter(f, x, "u", 64)
    to = "to" in mods
    space = _space(mods)

    def op(t):
        v = g(t)
        if _unknown(v):
            t.r[d] = POISON
            return nxt
        if space == "shared":
            v = (v - _GEN_SHARED) & 0xFFFFFFFF if to and v >= _GEN_SHARED else (v if to else v + _GEN_SHARED)
        t.r[d] = v & ((1 << 64) - 1)
        return nxt
    return op


def _testp(b, f, k, ins, mods, nxt):
    d, x = ins.args
    kind, w = _type_of(mods)
    g = b._getter(f, x, "f", w)
    test = mods[0]

    def op(t):
        v = g(t)
        if _unknown(v):
            t.r[d] = POISON
            return nxt
        t.r[d] = {"finite": math.isfinite(v), "infinite": math.isinf(v), "number": not math.isnan(v),
                  "notanumber": math.isnan(v), "normal": math.isfinite(v) and v != 0,
                  "subnormal": False}[test]
        return nxt
    return op


# ---------------------------------------------------------------- memory
def _addr_space(b, t, space, a):
    """(key address in the block's memory, space) for an address of ``space`` ('' = generic)."""
    if isinstance(a, tuple):
        return a, "callparam"
    if space == "":
        if _GEN_SHARED <= a < _GEN_SHARED + (1 << 32):
            return a - _GEN_SHARED, "shared"
        if _GEN_PARAM <= a < _GEN_PARAM + (1 << 32):
            return a, "param"
        if _GEN_LOCAL <= a < _GEN_LOCAL + (1 << 40):
            return a, "local"
        return a, "global"
    if space == "shared":
        return a & 0xFFFFFFFF, "shared"
    return a, space


def _local_getter(b, f, s):
    inner = s.strip()[1:-1].strip()
    m = re.fullmatch(r"([%\w$.]+)\s*(\+\s*(-?\d+))?", inner)
    return m


def _ld(b, f, k, ins, mods, nxt):
    space = _space(mods)
    kind, w = _type_of(mods)
    vec = next((int(m[1:]) for m in mods if m in ("v2", "v4", "v8")), 1)
    d, src = ins.args[:2]
    ga = b._mem_getter(f, src)
    size = max(w // 8, 1)
    names = [x.strip() for x in d[1:-1].split(",")] if d.startswith("{") else [d]

    def read(t, addr):
        key, sp = _addr_space(b, t, space, addr)
        if sp == "callparam":
            return t.callparams.get((key[1], key[2]), POISON)
        if sp == "param":
            if key in b.param_values:
                return b.param_values[key]
            return POISON
        v = b.load(key, size)
        if v is POISON and sp == "shared" and len(b.uninit_reads) < 64 and any(key + k not in b.mem for k in range(size)):
            b.uninit_reads.append((t.tid, key, ins.line))
        if kind == "f" and isinstance(v, int):
            v = _i2f(v, w)
        return v

    def op(t):
        a = ga(t)
        if _unknown(a) and not isinstance(a, tuple):
            raise ReplayError(f"line {ins.line}: `{ins.text}` loads from an address the replay does not know")
        for i, n in enumerate(names):
            if n == "_":
                continue
            addr = a if isinstance(a, tuple) else a + i * size
            t.r[n] = read(t, addr)
        return nxt
    return op


def _st(b, f, k, ins, mods, nxt):
    space = _space(mods)
    kind, w = _type_of(mods)
    dst, v = ins.args[:2]
    ga = b._mem_getter(f, dst)
    size = max(w // 8, 1)
    names = [x.strip() for x in v[1:-1].split(",")] if v.startswith("{") else [v]
    gs = [b._getter(f, n, "raw" if kind != "f" else "f", w) for n in names]

    def op(t):
        a = ga(t)
        if isinstance(a, tuple):
            t.callparams[(a[1], a[2])] = gs[0](t)
            return nxt
        if _unknown(a):
            raise ReplayError(f"line {ins.line}: `{ins.text}` stores to an address the replay does not know")
        for i, g in enumerate(gs):
            key, sp = _addr_space(b, t, space, a + i * size)
            val = g(t)
            if isinstance(val, bool):
                val = int(val)
            if isinstance(val, int):
                val &= (1 << w) - 1
            if sp == "shared":
                b.generic_write(t, key, size)
            b.store(key, val, size)
        return nxt
    return op


def _atom(b, f, k, ins, mods, nxt):
    space = _space(mods)
    kind, w = _type_of(mods)
    red = ins.op.startswith("red")
    opname = next(m for m in mods if m in ("add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas"))
    args = ins.args
    d = None if red else args[0]
    ga = b._mem_getter(f, args[0 if red else 1])
    gv = [b._getter(f, s, kind, w) for s in args[(1 if red else 2):]]
    size = w // 8

    def op(t):
        a = ga(t)
        if _unknown(a):
            raise ReplayError(f"line {ins.line}: `{ins.text}` on an address the replay does not know")
        key, sp = _addr_space(b, t, space, a)
        old = b.load(key, size)
        if isinstance(old, Pack) or old is POISON:
            old = 0 if old is POISON and sp == "global" else old
        vals = [g(t) for g in gv]
        if _unknown(old, *vals):
            new = POISON
        elif kind == "f":
            old_f = _i2f(old, w) if isinstance(old, int) else old
            new = {"add": old_f + vals[0], "min": min(old_f, vals[0]), "max": max(old_f, vals[0]),
                   "exch": vals[0]}[opname]
            old = old_f
        else:
            x = vals[0]
            o = _sx(old, w) if kind == "s" else old
            xv = _sx(x, w) if kind == "s" else x
            new = {"add": o + xv, "min": min(o, xv), "max": max(o, xv), "and": o & xv, "or": o | xv,
                   "xor": o ^ xv, "exch": xv, "inc": 0 if o >= xv else o + 1,
                   "dec": xv if (o == 0 or o > xv) else o - 1,
                   "cas": vals[1] if o == xv else o}[opname] & ((1 << w) - 1)
        b.store(key, new, size)
        if d:
            t.r[d] = old if not isinstance(old, int) else old & ((1 << w) - 1)
        return nxt
    return op


# ---------------------------------------------------------------- control flow
def _bra(b, f, k, ins, mods, nxt):
    target = ins.args[0]
    if target not in f.labels:
        raise ReplayError(f"branch to unknown label {target}")
    idx = f.labels[target]
    return lambda t: idx


def _ret(b, f, k, ins, mods, nxt):
    def op(t):
        if t.frames:
            caller, pc, regs, params, retmap = t.frames.pop()
            vals = {key: v for key, v in t.callparams.items()}
            t.func, t.r, t.callparams = caller, regs, params
            for (callee_name, caller_name) in retmap:
                for (n, off), v in vals.items():
                    if n == callee_name:
                        t.callparams[(caller_name, off)] = v
            return pc
        return None
    return op


def _exit(b, f, k, ins, mods, nxt):
    return lambda t: None


def _trap(b, f, k, ins, mods, nxt):
    def op(t):
        b.trapped = f"thread {t.tid} executed trap (line {ins.line})"
        t.pc = k
        raise _Yield()
    return op


def _call(b, f, k, ins, mods, nxt):
    args = ins.args
    # call{.uni} (ret), func, (a, b);  or  call func, (a);  or  call func;
    rets, fname, params = [], None, []
    rest = list(args)
    if rest and rest[0].startswith("("):
        rets = [x.strip() for x in rest.pop(0)[1:-1].split(",") if x.strip()]
    fname = rest.pop(0).strip()
    if rest:
        params = [x.strip() for x in rest[0].strip()[1:-1].split(",") if x.strip()]
    if fname == "vprintf":
        return _printf(b, f, k, ins, params, rets, nxt)
    if fname not in b.p.functions:
        raise ReplayError(f"call to {fname}: not in the PTX")
    callee = b.p.functions[fname]
    if callee.name not in b.funcs_code:
        b.funcs_code[callee.name] = None             # placeholder: compiled on first call (recursion-safe)

    def op(t):
        if b.funcs_code.get(callee.name) is None:
            b.funcs_code[callee.name] = b._compile(callee)
        newp = {}
        for pname, aname in zip(callee.params, params):
            for (n, off), v in t.callparams.items():
                if n == aname:
                    newp[(pname, off)] = v
        t.frames.append((t.func, nxt, t.r, t.callparams, list(zip(callee.rets, rets))))
        t.func, t.r, t.callparams = callee, {}, newp
        return 0
    return op


def _printf(b, f, k, ins, params, rets, nxt):
    def op(t):
        fmt_addr = t.callparams.get((params[0], 0))
        args_addr = t.callparams.get((params[1], 0)) if len(params) > 1 else 0
        fmt = _cstring(b, fmt_addr)
        text = _format(b, fmt, args_addr)
        b.printf.append((t.tid, text))
        for r in rets:
            t.callparams[(r, 0)] = len(text)
        return nxt
    return op


def _cstring(b, addr):
    if not isinstance(addr, int):
        return "?"
    out = bytearray()
    while len(out) < 4096:
        c = b.mem.get(addr + len(out))
        if c is None or c[0] == 0:
            break
        out.append(c[0] if isinstance(c[0], int) else 63)
    return out.decode(errors="replace")


def _format(b, fmt, args_addr):
    out, pos = [], args_addr or 0
    for m in re.finditer(r"%([-+ #0]*\d*(?:\.\d+)?)(hh|h|ll|l|z)?([diouxXcsfFeEgGp%])", fmt):
        pass
    res, i = [], 0
    for m in re.finditer(r"%([-+ #0]*\d*(?:\.\d+)?)(hh|h|ll|l|z)?([diouxXcsfFeEgGp%])", fmt):
        res.append(fmt[i:m.start()])
        i = m.end()
        flags, length, conv = m.groups()
        if conv == "%":
            res.append("%")
            continue
        size = 8 if conv in "fFeEgGsp" or length in ("l", "ll", "z") else 4
        pos = -(-pos // size) * size
        v = b.load(pos, size)
        pos += size
        if not isinstance(v, int):
            res.append("?")
            continue
        if conv in "fFeEgG":
            res.append(("%" + flags + conv) % _i2f(v, 64))
        elif conv in "di":
            res.append(("%" + flags + "d") % _sx(v, 8 * size))
        elif conv == "c":
            res.append(chr(v & 0xFF))
        elif conv == "s":
            res.append(_cstring(b, v))
        elif conv == "p":
            res.append(hex(v))
        else:
            res.append(("%" + flags + conv) % v)
    res.append(fmt[i:])
    return "".join(res)


# ---------------------------------------------------------------- barriers
def _bar(b, f, k, ins, mods, nxt):
    name = ins.op
    if name.startswith("barrier.cluster"):
        if "arrive" in mods:
            return lambda t: nxt
        idg, cntg, arrive = (lambda t: "cluster"), (lambda t: None), False
    else:
        idg = b._getter(f, ins.args[0], "u", 32) if ins.args else (lambda t: 0)
        cntg = b._getter(f, ins.args[1], "u", 32) if len(ins.args) > 1 else (lambda t: None)
        arrive = "arrive" in mods
    if "red" in mods:
        return _unsupported(ins, nxt)

    def op(t):
        bid, cnt = idg(t), cntg(t)
        w = b.bar_sync.setdefault(bid, {"tids": [], "count": cnt, "arrived": 0})
        if cnt is not None:
            w["count"] = cnt
        if arrive:
            w["arrived"] += 1
        else:
            w["tids"].append(t.tid)
            t.state, t.wait = "bar", bid
        _complete_bar(b, bid)
        if t.state == "bar":
            t.pc = nxt
            raise _Yield()
        return nxt
    return op


def _complete_bar(b, bid):
    w = b.bar_sync.get(bid)
    if w is None:
        return
    want = w["count"] if w["count"] is not None else b._live_count()
    if w["tids"] and len(w["tids"]) + w["arrived"] >= want:
        for tid in w["tids"]:
            th = b.threads[tid]
            th.state, th.wait = "run", None
        del b.bar_sync[bid]


# ---------------------------------------------------------------- warp collectives
def _rendezvous(b, f, k, ins, nxt, value, maskg, compute, deliver):
    def op(t):
        key = (t.warp, f.name, k)
        mask = maskg(t) if maskg else 0xFFFFFFFF
        if _unknown(mask):
            raise ReplayError(f"line {ins.line}: a warp collective with a member mask the replay does not know")
        rv = b.warp_rv.setdefault(key, {"mask": mask, "vals": {}, "fn": compute, "deliver": deliver})
        rv["vals"][t.tid] = value(t)
        t.state, t.wait = "warp", key
        t.pc = nxt
        b._try_complete_rv(key)
        if t.state == "warp":
            raise _Yield()
        return nxt
    return op


def _shfl(b, f, k, ins, mods, nxt):
    mode = next(m for m in mods if m in ("up", "down", "bfly", "idx"))
    args = ins.args
    dst = args[0]
    dp, dq = (dst.split("|") + [None])[:2]
    ga = b._getter(f, args[1], "raw", 32)
    gb, gc = b._getter(f, args[2], "u", 32), b._getter(f, args[3], "u", 32)
    gm = b._getter(f, args[4], "u", 32) if len(args) > 4 else None

    def value(t):
        return (ga(t), gb(t), gc(t))

    def compute(vals, members):
        out = {}
        for tid in vals:
            lane = tid % 32
            _, bv, cv = vals[tid]
            bv, seg, cval = bv & 31, (cv >> 8) & 31, cv & 31
            maxl = (lane & seg) | (cval & ~seg)
            minl = lane & seg
            if mode == "up":
                j, ok = lane - bv, lane - bv >= maxl
            elif mode == "down":
                j, ok = lane + bv, lane + bv <= maxl
            elif mode == "bfly":
                j, ok = lane ^ bv, (lane ^ bv) <= maxl
            else:
                j = minl | (bv & ~seg)
                ok = j <= maxl
            src = tid - lane + j if ok else tid
            if src not in vals:
                ok, src = False, tid
            out[tid] = (vals[src][0], ok)
        return out

    def deliver(th, v):
        th.r[dp.strip()] = v[0]
        if dq:
            th.r[dq.strip()] = v[1]
    return _rendezvous(b, f, k, ins, nxt, value, gm, compute, deliver)


def _vote(b, f, k, ins, mods, nxt):
    mode = next(m for m in mods if m in ("all", "any", "uni", "ballot"))
    d, a = ins.args[:2]
    ga = b._getter(f, a, "p", 1)
    gm = b._getter(f, ins.args[2], "u", 32) if len(ins.args) > 2 else None

    def compute(vals, members):
        if any(v is POISON for v in vals.values()):
            return {tid: POISON for tid in vals}
        bits = {tid: bool(v) for tid, v in vals.items()}
        if mode == "ballot":
            r = sum(1 << (tid % 32) for tid, v in bits.items() if v)
        elif mode == "all":
            r = all(bits.values())
        elif mode == "any":
            r = any(bits.values())
        else:
            r = len(set(bits.values())) == 1
        return {tid: r for tid in vals}
    return _rendezvous(b, f, k, ins, nxt, ga, gm, compute, lambda th, v: th.r.__setitem__(d, v))


def _redux(b, f, k, ins, mods, nxt):
    opn = next(m for m in mods if m in ("add", "min", "max", "and", "or", "xor"))
    kind, w = _type_of(mods)
    d, a = ins.args[:2]
    ga = b._getter(f, a, kind, w)
    gm = b._getter(f, ins.args[2], "u", 32) if len(ins.args) > 2 else None

    def compute(vals, members):
        vs = list(vals.values())
        if _unknown(*vs):
            return {tid: POISON for tid in vals}
        if kind == "s":
            vs = [_sx(v, 32) for v in vs]
        r = {"add": sum, "min": min, "max": max}.get(opn)
        if r:
            res = r(vs)
        else:
            res = 0 if opn != "and" else 0xFFFFFFFF
            for v in vs:
                res = res & v if opn == "and" else res | v if opn == "or" else res ^ v
        return {tid: res & 0xFFFFFFFF for tid in vals}
    return _rendezvous(b, f, k, ins, nxt, ga, gm, compute, lambda th, v: th.r.__setitem__(d, v))


def _elect(b, f, k, ins, mods, nxt):
    dst = ins.args[0]
    dp, dq = (dst.split("|") + [None])[:2]
    gm = b._getter(f, ins.args[1], "u", 32) if len(ins.args) > 1 else None

    def compute(vals, members):
        leader = min(vals)
        return {tid: (leader % 32, tid == leader) for tid in vals}

    def deliver(th, v):
        if dp.strip() != "_":
            th.r[dp.strip()] = v[0]
        if dq:
            th.r[dq.strip()] = v[1]
    return _rendezvous(b, f, k, ins, nxt, lambda t: 1, gm, compute, deliver)


def _activemask(b, f, k, ins, mods, nxt):
    d = ins.args[0]

    def op(t):
        t.r[d] = sum(1 << (x.tid % 32) for x in b.threads[32 * t.warp: 32 * t.warp + 32] if not x.exited)
        return nxt
    return op


# ---------------------------------------------------------------- mbarriers
def _mbarrier(b, f, k, ins, mods, nxt):
    what = mods[0]
    if what == "init":
        ga, gc = b._mem_getter(f, ins.args[0]), b._getter(f, ins.args[1], "u", 32)

        def init(t):
            a = _shared_key(b, ga(t))
            c = gc(t)
            b.bars[a] = {"count": c, "pending": c, "tx": 0, "phase": 0}
            return nxt
        return init
    if what in ("arrive", "arrive_drop"):
        expect = "expect_tx" in mods
        remote = any(m.startswith("shared::cluster") for m in mods)
        state = ins.args[0]
        ga = b._mem_getter(f, ins.args[1])
        gx = b._getter(f, ins.args[2], "u", 32) if len(ins.args) > 2 else None

        def arrive(t):
            a = _shared_key(b, ga(t), remote)
            x = gx(t) if gx else None
            bar = b._bar(a)
            phase = bar["phase"]
            if expect:
                b._arrive(a, 1, x)
            else:
                b._arrive(a, x if x is not None else 1)
            if state != "_":
                t.r[state] = phase
            b.events.append(("arrive", t.tid, a, phase))
            return nxt
        return arrive
    if what == "expect_tx":
        ga, gx = b._mem_getter(f, ins.args[0]), b._getter(f, ins.args[1], "u", 32)

        def expect_tx(t):
            a = _shared_key(b, ga(t))
            b._bar(a)["tx"] += gx(t)
            return nxt
        return expect_tx
    if what == "complete_tx":
        ga, gx = b._mem_getter(f, ins.args[0]), b._getter(f, ins.args[1], "u", 32)
        return lambda t: (b._complete_tx(_shared_key(b, ga(t)), gx(t)), nxt)[1]
    if what in ("try_wait", "test_wait"):
        parity = "parity" in mods
        d = ins.args[0]
        ga = b._mem_getter(f, ins.args[1])
        gp = b._getter(f, ins.args[2], "u", 64)

        def wait(t):
            a = _shared_key(b, ga(t))
            p = gp(t)
            if _unknown(p):
                raise ReplayError(f"line {ins.line}: an mbarrier wait on a parity the replay does not know")
            bar = b._bar(a)
            if parity:
                done = (bar["phase"] & 1) != (p & 1)
            else:
                done = bar["phase"] > p
            if done:
                t.r[d] = True
                return nxt
            t.state, t.wait = "mbar", (a, (p & 1) if parity else ((p + 0) & 1))
            b.waits.append((t.tid, a, p & 1 if parity else p, bar["phase"]))
            t.pc = k
            raise _Yield()
        return wait
    if what in ("inval", "pending_count"):
        return lambda t: nxt
    return _unsupported(ins, nxt)


def _shared_key(b, a, remote=False):
    if isinstance(a, int) and _GEN_SHARED <= a < _GEN_SHARED + (1 << 32):
        return a - _GEN_SHARED
    if _unknown(a):
        raise ReplayError("an mbarrier at an address the replay does not know")
    return a & 0xFFFFFFFF


def _mapa(b, f, k, ins, mods, nxt):
    d, a, r = ins.args
    ga, gr = b._getter(f, a, "u", 64), b._getter(f, r, "u", 32)

    def op(t):
        rank = gr(t)
        if rank != 0:
            raise ReplayError(f"line {ins.line}: mapa to CTA {rank} of the cluster: the replay runs one CTA "
                              "(clusters of 1)")
        t.r[d] = ga(t)
        return nxt
    return op


# ---------------------------------------------------------------- TMA
def _cp(b, f, k, ins, mods, nxt):
    if ins.op.startswith("cp.async.bulk.tensor"):
        return _tma(b, f, k, ins, mods, nxt)
    if ins.op.startswith("cp.async.bulk.commit_group"):
        def commit(t):
            g = b.bulk_groups.setdefault(t.tid, [[], []])
            g[1].append(g[0])
            g[0] = []
            return nxt
        return commit
    if ins.op.startswith("cp.async.bulk.wait_group"):
        n = int(ins.args[0], 0)

        def wait(t):
            g = b.bulk_groups.setdefault(t.tid, [[], []])
            done = g[1][:max(len(g[1]) - n, 0)]
            g[1] = g[1][len(done):]
            for group in done:
                for op in group:
                    if op in b.pending_stores:
                        b.pending_stores.remove(op)
                        b.pending = [p for p in b.pending if p[1] is not op]
                        b._do_tma_store(op)
            return nxt
        return wait
    if ins.op.startswith("cp.async.bulk.prefetch"):
        return lambda t: nxt
    return _unsupported(ins, nxt)


def _tma(b, f, k, ins, mods, nxt):
    load = ".global.tile" not in ins.op or ins.op.index("shared") < ins.op.index("global")
    load = "shared::cluster.global" in ins.op or "shared::cta.global" in ins.op
    multicast = "multicast::cluster" in ins.op
    args = ins.args
    if load:
        gdst = b._mem_getter(f, args[0])
        tmap, coords = args[1][1:-1].split(",", 1)
        gmap = b._getter(f, tmap.strip(), "u", 64)
        cs = [b._getter(f, c.strip(), "s", 32) for c in coords.strip()[1:-1].split(",")]
        gbar = b._mem_getter(f, args[2])
        gmask = b._getter(f, args[3], "u", 16) if multicast and len(args) > 3 else None

        def op(t):
            spec = b.maps.get(gmap(t))
            if spec is None:
                raise ReplayError(f"line {ins.line}: a TMA load from a tensor map that is not one of the kernel's "
                                  "__grid_constant__ parameters")
            coords_v = tuple(_sx(c(t), 32) for c in cs)
            if gmask is not None and gmask(t) not in (1, 0):
                raise ReplayError(f"line {ins.line}: a multicast TMA load to CTAs {gmask(t):#x}: the replay runs one "
                                  "CTA (clusters of 1)")
            bar = _shared_key(b, gbar(t))
            tma = TmaOp("load", t.tid, _shared_key(b, gdst(t)), coords_v, spec, bar, b.next_seq(), ins.line)
            b.tma.append(tma)
            b.pending.append(("tma_load", tma))
            return nxt
        return op
    tmap, coords = args[0][1:-1].split(",", 1)
    gmap = b._getter(f, tmap.strip(), "u", 64)
    cs = [b._getter(f, c.strip(), "s", 32) for c in coords.strip()[1:-1].split(",")]
    gsrc = b._mem_getter(f, args[1])

    def store(t):
        spec = b.maps.get(gmap(t))
        if spec is None:
            raise ReplayError(f"line {ins.line}: a TMA store to a tensor map that is not a kernel parameter")
        tma = TmaOp("store", t.tid, _shared_key(b, gsrc(t)), tuple(_sx(c(t), 32) for c in cs), spec, None,
                    b.next_seq(), ins.line)
        b.check_proxy_fence(t, tma)
        b.tma.append(tma)
        b.pending.append(("tma_store", tma))
        b.pending_stores.append(tma)
        g = b.bulk_groups.setdefault(t.tid, [[], []])
        g[0].append(tma)
        return nxt
    return store


def _fence(b, f, k, ins, mods, nxt):
    if "proxy" in mods and "async" in mods:
        def op(t):
            b.proxy_fence(t)
            return nxt
        return op
    return lambda t: nxt


# ---------------------------------------------------------------- wgmma
def _wgmma(b, f, k, ins, mods, nxt):
    what = mods[0]
    if what == "fence":
        return lambda t: nxt
    if what == "commit_group":
        def commit(t):
            st = b.wg_thread(t)
            st["groups"].append(st["open"])
            st["open"] = []
            return nxt
        return commit
    if what == "wait_group":
        n = int(ins.args[0], 0)

        def wait(t):
            st = b.wg_thread(t)
            retire = st["groups"][:max(len(st["groups"]) - n, 0)]
            st["groups"] = st["groups"][len(retire):]
            for group in retire:
                for rec in group:
                    b.perform_wgmma(rec)
            return nxt
        return wait
    if what != "mma_async":
        return _unsupported(ins, nxt)
    shape = next(m for m in mods if re.fullmatch(r"m\d+n\d+k\d+", m))
    M, N, K = (int(x) for x in re.findall(r"\d+", shape))
    types = [m for m in mods if m in _TYPES or m in ("e4m3", "e5m2", "tf32", "s8", "u8")]
    atype = types[1] if len(types) > 1 else "bf16"
    args = ins.args
    dregs = [x.strip() for x in args[0][1:-1].split(",")]
    rs = args[1].startswith("{")
    ga = None if rs else b._getter(f, args[1], "u", 64)
    gb = b._getter(f, args[2], "u", 64)
    gs = b._getter(f, args[3], "p", 1) if len(args) > 3 else (lambda t: True)
    imms = args[4:]
    trans_a = int(imms[2], 0) if len(imms) > 3 else 0
    trans_b = int(imms[3], 0) if len(imms) > 3 else (int(imms[2], 0) if rs and len(imms) > 2 else 0)

    def op(t):
        st = b.wg_thread(t)
        st["count"] += 1
        key = (t.tid // 128, st["count"])
        da = None if rs else ga(t)
        db = gb(t)
        if _unknown(db) or (not rs and _unknown(da)):
            raise ReplayError(f"line {ins.line}: a wgmma descriptor the replay does not know")
        rec = b.wg_records.get(key)
        if rec is None:
            rec = WgmmaRead(warpgroup=key[0], seq=b.next_seq(), shape=(M, N, K), dtype=atype, desc_a=da, desc_b=db,
                            trans_a=trans_a, trans_b=trans_b, line=ins.line, tid=t.tid, scale_d=gs(t))
            b.wg_records[key] = rec
            b.wgmmas.append(rec)
        elif (rec.desc_a, rec.desc_b) != (da, db):
            b.notes.append(f"line {ins.line}: threads of warpgroup {key[0]} gave its wgmma #{key[1]} different "
                           f"descriptors (thread {rec.tid}: {rec.desc_a}, {rec.desc_b}; thread {t.tid}: {da}, {db})")
        if not st["open"] or st["open"][-1] is not rec:
            st["open"].append(rec)
        t.r.update(zeros)
        return nxt
    zeros = {n: (0.0 if n.startswith("%f") else 0) for n in dregs if n.startswith(("%f", "%r"))}
    return op


_FAMILIES = {
    "mov": _mov, "add": _arith("add"), "sub": _arith("sub"), "mul": _arith("mul"), "div": _arith("div"),
    "rem": _arith("rem"), "min": _arith("min"), "max": _arith("max"), "and": _arith("and"), "or": _arith("or"),
    "xor": _arith("xor"), "mad": _fma, "fma": _fma, "shl": _shift, "shr": _shift,
    "not": _unary, "cnot": _unary, "neg": _unary, "abs": _unary, "popc": _unary, "clz": _unary, "brev": _unary,
    "rcp": _unary, "sqrt": _unary, "rsqrt": _unary, "ex2": _unary, "lg2": _unary, "sin": _unary, "cos": _unary,
    "tanh": _unary, "copysign": _float_binop, "bfe": _bfe, "bfi": _bfi, "lop3": _lop3, "shf": _shf, "prmt": _prmt,
    "setp": _setp, "selp": _selp, "slct": _slct, "cvt": _cvt, "cvta": _cvta, "testp": _testp,
    "ld": _ld, "ldu": _ld, "st": _st, "atom": _atom, "red": _atom,
    "bra": _bra, "ret": _ret, "exit": _exit, "trap": _trap, "call": _call, "brkpt": _noop,
    "bar": _bar, "barrier": _bar,
    "shfl": _shfl, "vote": _vote, "redux": _redux, "elect": _elect, "activemask": _activemask,
    "mbarrier": _mbarrier, "mapa": _mapa, "cp": _cp, "fence": _fence, "membar": _noop,
    "prefetch": _noop, "prefetchu": _noop, "setmaxnreg": _noop, "griddepcontrol": _noop, "nanosleep": _noop,
    "pmevent": _noop, "wgmma": _wgmma,
}
