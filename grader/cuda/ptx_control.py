"""Branches, calls (printf included), barriers and warp-wide instructions of the PTX replay."""
from __future__ import annotations

import re

from .ptx_values import POISON, ReplayError, _Yield, _i2f, _sx, _type_of, _unknown, _unsupported


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
