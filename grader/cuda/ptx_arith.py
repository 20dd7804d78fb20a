"""Moves and integer / float arithmetic of the PTX replay (:mod:`grader.cuda.ptx_ops` dispatches)."""
from __future__ import annotations

import math

from .ptx_values import POISON, Pack, ReplayError, _sx, _type_of, _unknown


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
