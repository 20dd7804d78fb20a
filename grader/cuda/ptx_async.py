"""mbarriers, TMA copies, fences and wgmma of the PTX replay."""
from __future__ import annotations

import re

from .ptx_values import (ReplayError, TmaOp, WgmmaRead, _GEN_SHARED, _TYPES, _Yield, _sx, _unknown,
                         _unsupported)


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
