"""Comparisons, selections, conversions, loads, stores and atomics of the PTX replay."""
from __future__ import annotations

import math
import re

from .ptx_values import (POISON, Pack, ReplayError, _GEN_LOCAL, _GEN_PARAM, _GEN_SHARED, _TYPES, _bf16, _f2i,
                         _i2f, _space, _sx, _type_of, _unknown)


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
