"""Hopper's wgmma shared-memory descriptors, checked on the CPU: the learner's own kernel replayed.

Without a Hopper GPU a wgmma kernel compiles and its machine code can be read, but nothing checks
the 64-bit descriptors it builds: a wrong swizzle code, LBO or SBO, or k step computes garbage on
an H100 and passes every SASS rubric. This module checks them two ways.

**The learner's kernel** (:func:`check_gemm`, :func:`check_attention`): the lesson's launch function
is called with stand-ins (:mod:`grader.cuda.replay`), one block of the kernel is replayed from its
PTX (:mod:`grader.cuda.ptx`) — its TMA loads land in shared memory swizzled as their tensor maps
say, each element tagged with where it came from — and every ``wgmma.mma_async`` reads its operands
through its own descriptors at the wait that retires it. For each (row, k) of A and (k, column) of
B the check knows which element of which tensor was read, so it asks what the math needs: each
wgmma reads a contiguous, correctly oriented block of A and of B; A's k and B's k agree; every k of
the tile is summed exactly once; each warpgroup keeps its rows. The first failure is explained by
the descriptor field that differs from the one this tile needs (:func:`expected_desc`), and
:func:`draw` shows where the wrong descriptor reads.

**A descriptor on its own** (:func:`check_desc`, like 05.09's :func:`grader.cuda.umma.check_smem`):
a value, a :class:`~grader.cuda.umma.Tile` as TMA wrote it, a k step — replayed against the tile.

The descriptor (PTX ISA, "Matrix Descriptor Format" of wgmma; CUTLASS ``GmmaDescriptor``):
bits 0–13 start address >> 4, 16–29 leading-dimension byte offset >> 4, 32–45 stride-dimension
byte offset >> 4, 49–51 base offset, 62–63 swizzle (0 none, 1 = 128B, 2 = 64B, 3 = 32B); the other
bits 0. Addresses: the ISA's canonical layouts (:func:`grader.cuda.umma.descriptor_address`, the
same on Blackwell) then Swizzle<B, 4, 3> — B = 3, 2, 1 for 128B, 64B, 32B — which is also what TMA
writes for the map's swizzle (CUTLASS ``get_tma_swizzle_bits``). Not checked against a GPU by this
module; the lessons' kernels that it passes are the ones measured correct on an H100.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from . import umma
from .ptx_values import Elem, ReplayError
from .wgmma_desc import (BITS, MAP_ENUM, SWIZZLE_CODE, Desc, DescCheck, Fit, Operand, _explain,  # noqa: F401
                         check_desc, decode, draw, encode, expected_desc, fit, k_elems, operand_address,
                         operand_addresses, operand_reads, refit)

# ---------------------------------------------------------------- the replayed kernel's wgmmas
# ---------------------------------------------------------------- the report
@dataclass
class Report:
    """The replay's verdict on a kernel: ``problems`` (empty: right), ``notes``, and what a picture
    needs (:meth:`figure`)."""
    kernel: str
    problems: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    checked: int = 0
    picture: object = None              # a DescCheck of the first wrong operand, or None
    block: object = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self):
        if self.ok:
            head = f"✓ {self.kernel}: the replay's {self.checked} wgmmas read A and B where TMA put them"
            return "\n".join([head, *(f"  · {n}" for n in self.notes)])
        return "\n".join([f"✗ {self.kernel}:", *(f"  - {p}" for p in self.problems), *(f"  · {n}" for n in self.notes)])

    def figure(self):
        """What the first wrong descriptor reads (left) and what the right one reads (right); None when
        every wgmma was right."""
        if self.picture is None:
            return None
        from ..plot import subplots

        yours, right = self.picture
        fig, (ax1, ax2) = subplots(1, 2, figsize=(8, 5))
        draw(yours, ax1)
        draw(right, ax2)
        ax1.set_title("your descriptor\n" + ax1.get_title(), fontsize=8)
        ax2.set_title("the descriptor this tile needs\n" + ax2.get_title(), fontsize=8)
        fig.tight_layout()
        return fig


def _box_tiles(block, elem: Elem, tensor_along: str):
    """The TMA load that put ``elem`` in shared memory last: (smem base, box origin (row, col), spec)."""
    best = None
    for op in block.tma:
        if op.kind != "load" or op.spec.tensor != elem.tensor:
            continue
        c0 = op.coords[0]
        r0 = op.coords[1] if len(op.coords) > 1 else 0
        h0 = op.coords[2] if len(op.coords) > 2 else 0
        br, bc = (op.spec.box[-2] if len(op.spec.box) > 1 else 1), op.spec.box[-1]
        if h0 == elem.head and r0 <= elem.row < r0 + br and c0 <= elem.col < c0 + bc:
            best = op
    return best


def _tile_for(block, rec, which: str, want: Operand, origin):
    """The :class:`~grader.cuda.umma.Tile` the operand should read (its box as TMA wrote it, and the
    boxes beside it along M/N), its k step and first row: for :func:`expected_desc`. None when the
    intended element is in no TMA box."""
    h, mn0, k0 = origin
    elem = Elem(want.tensor, *((mn0, k0) if want.along == "row" else (k0, mn0)), h)
    op = _box_tiles(block, elem, want.along)
    if op is None:
        return None
    spec = op.spec
    bits = 8 * spec.itemsize
    br, bc = spec.box[-2], spec.box[-1]
    box_r0, box_c0 = op.coords[1], op.coords[0]
    kelems = 256 // bits
    if want.along == "row":             # K-major: box rows are the operand's rows, box columns its k
        t = umma.Tile(rows=br, cols=bc, dtype=_dtype_for(bits), major="K", swizzle=spec.swizzle, address=op.smem)
        return t, (k0 - box_c0) // kelems, mn0 - box_r0
    # MN-major: box rows are k, box columns the operand's rows; boxes along M/N side by side
    n_rows = rec.shape[1] if which == "b" else rec.shape[0]
    t = umma.Tile(rows=max(n_rows, bc), cols=br, dtype=_dtype_for(bits), major="MN", swizzle=spec.swizzle,
                  address=op.smem)
    return t, (k0 - box_r0) // kelems, mn0 - box_c0


def _dtype_for(bits):
    return {16: "bf16", 8: "e4m3", 32: "tf32"}[bits]


def _pictures(block, rec, which, want, fitted, kelems):
    """(your DescCheck, the right one) for a wrong operand, or None."""
    reads = rec.a if which == "a" else rec.b
    if fitted.origin is None:
        return None
    tile = _tile_for(block, rec, which, want, fitted.origin)
    if tile is None:
        return None
    t, k_step, row0 = tile
    desc = rec.desc_a if which == "a" else rec.desc_b
    rows = rec.shape[0] if which == "a" else rec.shape[1]
    yours = check_desc(desc, t, k_step, rows=min(rows, t.rows - row0) if t.major == "K" else rows, row0=row0)
    yours.reads = {k: a for k, (a, _) in reads.items() if k in yours.wants}
    right = check_desc(encode(expected_desc(t, k_step, row0)), t, k_step,
                       rows=min(rows, t.rows - row0) if t.major == "K" else rows, row0=row0)
    return yours, right


def check_wgmmas(block, kernel: str, operands, extents: dict) -> Report:
    """Check every replayed wgmma of ``block``. ``operands(rec)`` -> (Operand for A or None (A in
    registers), Operand for B, kind): what the wgmma must read. The wgmmas of one kind that add into
    the same output block (the same rows of A, the same block of B, one warpgroup) must together sum
    k = 0 … ``extents[kind]`` − 1 exactly once, A's k and B's k in step."""
    rep = Report(kernel=kernel, block=block)
    rep.notes.extend(block.notes)
    if not block.wgmmas:
        rep.problems.append("the replay saw no wgmma.mma_async: the kernel issued none for this block")
        return rep
    fits, bad = [], []
    for rec in block.wgmmas:
        want_a, want_b, kind = operands(rec)
        M, N, K = rec.shape
        fa = fit(rec.a, want_a, M, K) if want_a is not None and rec.desc_a is not None else None
        fb = fit(rec.b, want_b, N, K)
        fits.append((rec, kind, fa, fb))
        for which, want, f in (("a", want_a, fa), ("b", want_b, fb)):
            if f is not None and f.wrong:
                bad.append((rec, which, want, f))
    rep.checked = len(fits)
    if bad:
        rec, which, want, f = bad[0]
        M, N, K = rec.shape
        rows = M if which == "a" else N
        if f.origin is None or f.origin[1] % rows or f.origin[2] % K:
            # the block it should have read: its rows from this warpgroup's first wgmma that read them
            # right (else the nearest aligned), its k from the other operand when that one read right
            firsts = [(fa if which == "a" else fb) for r, _, fa, fb in fits if r.warpgroup == rec.warpgroup]
            good = next((g for g in firsts if g is not None and not g.wrong), None)
            h = (good or f).origin[0] if (good or f).origin else 0
            mn0 = good.origin[1] if good else (f.origin[1] // rows * rows if f.origin else 0)
            other = next((fb if which == "a" else fa) for r, _, fa, fb in fits if r is rec)
            k0 = other.origin[2] if other is not None and not other.wrong else (f.origin[2] // K * K if f.origin else 0)
            if other is None:           # A in registers: the k step after this warpgroup's wgmma before it
                mine = [(r, fa, fb) for r, _, fa, fb in fits if r.warpgroup == rec.warpgroup]
                idx = next(n for n, (r, _, _) in enumerate(mine) if r is rec)
                prev = mine[idx - 1] if idx else None
                g = prev and (prev[1] if which == "a" else prev[2])
                if g is not None and not g.wrong and prev[0].desc_a is None:
                    k0 = g.origin[2] + K
            bad[0] = (rec, which, want, refit(rec.a if which == "a" else rec.b, want, (h, mn0, k0)))
        rep.problems.append(_operand_problem(block, rep, *bad[0]) +
                            (f"\n    ({len({id(b[0]) for b in bad})} of {len(fits)} wgmmas read an operand wrongly)"
                             if len(bad) > 1 else ""))
        return rep
    groups: dict = {}
    for rec, kind, fa, fb in fits:
        key = (rec.warpgroup, kind, fa.origin[:2] if fa else None, fb.origin[:2])
        groups.setdefault(key, []).append((rec, fa, fb))
    for (wg, kind, a_mn, b_mn), items in groups.items():
        kel = items[0][0].shape[2]
        a_ks = [fa.origin[2] for _, fa, _ in items if fa is not None]
        b_ks = [fb.origin[2] for _, _, fb in items]
        if a_ks and a_ks != b_ks:
            a_step, b_step = _steps(a_ks), _steps(b_ks)
            rec = next(r for r, fa, fb in items if fa.origin[2] != fb.origin[2])
            which = "A" if a_step != {kel} and b_step == {kel} else "B" if b_step != {kel} and a_step == {kel} else None
            msg = (f"line {rec.line}: warpgroup {wg}'s wgmmas read A's k {_first(a_ks, kel)} but B's k "
                   f"{_first(b_ks, kel)}: A's and B's k must step together, {kel} per wgmma")
            if which:
                steps = a_step if which == "A" else b_step
                msg += (f"; {which}'s start moves {' or '.join(str(x) for x in sorted(steps))} k per wgmma instead of "
                        f"{kel} — " + _step_hint(items[0][0], which))
            rep.problems.append(msg)
            return rep
        ext = extents.get(kind)
        if ext:
            count = Counter(k for k0 in b_ks for k in range(k0, k0 + kel))
            twice = sorted(k for k, n in count.items() if n > 1)
            never = sorted(set(range(ext)) - set(count))
            extra = sorted(k for k in count if not 0 <= k < ext)
            if twice or never or extra:
                rep.problems.append(
                    f"warpgroup {wg}: its wgmmas into one output block ({kind}) sum k {_ranges(b_ks, kel)}"
                    + (f"; k {_span(twice)} more than once" if twice else "")
                    + (f"; k {_span(never)} never" if never else "")
                    + (f"; k {_span(extra)} past the end ({ext})" if extra else "")
                    + f": every k of 0–{ext - 1} exactly once (" + _step_hint(items[0][0], "A" if a_ks else "B") + ")")
                return rep
    if block.proxy_problems:
        rep.problems.append(block.proxy_problems[0])
        return rep
    rows = {}
    for (wg, kind, a_mn, b_mn) in groups:
        if a_mn is not None:
            rows.setdefault((kind, a_mn), set()).add(wg)
    for (kind, a_mn), wgs in rows.items():
        if len(wgs) > 1:
            rep.problems.append(f"warpgroups {', '.join(map(str, sorted(wgs)))} all read rows {a_mn[1]}–{a_mn[1] + 63} of "
                                "A: each warpgroup's A descriptor must start at its own 64 rows (64 × 128 B further)")
            return rep
    return rep


def _steps(ks):
    return {b - a for a, b in zip(ks, ks[1:]) if b > a} or set()


def _first(ks, kel):
    return ", ".join(f"{k}–{k + kel - 1}" for k in ks[:4]) + (" …" if len(ks) > 4 else "")


def _step_hint(rec, which):
    trans = rec.trans_a if which == "A" else rec.trans_b
    if which == "A" and rec.desc_a is None:
        return "A is in registers"
    d = decode(rec.desc_a if which == "A" else rec.desc_b)
    if trans:
        return (f"{which} is MN-major: one k{rec.shape[2]} step is {rec.shape[2]} rows of its "
                f"{umma.SWIZZLE_BYTES.get(d.swizzle, 16)}-byte box rows, "
                f"{rec.shape[2] * umma.SWIZZLE_BYTES.get(d.swizzle, 16)} B")
    return (f"{which} is K-major: one k{rec.shape[2]} step is 32 bytes of each row, and past a 128-byte row the "
            "next k is in the next box")


def _operand_problem(block, rep, rec, which, want, fitted) -> str:
    name = "A" if which == "a" else "B"
    desc = rec.desc_a if which == "a" else rec.desc_b
    trans = rec.trans_a if which == "a" else rec.trans_b
    d = decode(desc)
    reads = rec.a if which == "a" else rec.b
    i, kk = fitted.wrong[0]
    got = reads[(i, kk)][1]
    lines = [f"line {rec.line}: warpgroup {rec.warpgroup}'s wgmma #{_nth(block, rec)} ({'m%dn%dk%d' % rec.shape} "
             f"{rec.dtype}) reads {name} wrongly: {len(fitted.wrong)} of {fitted.total} elements are not the "
             f"{want.tensor} block it should read"]
    if fitted.origin is not None:
        h, mn0, k0 = fitted.origin
        exp = (mn0 + i, k0 + kk) if want.along == "row" else (k0 + kk, mn0 + i)
        lines.append(f"({'row' if which == 'a' else 'column'} {i}, k {kk}) of {name} should be "
                     f"{Elem(want.tensor, *exp, h)}; the descriptor reads {_show(got)} at shared "
                     f"0x{reads[(i, kk)][0]:05x}")
    lines.append(f"your descriptor: {d} ({'MN' if trans else 'K'}-major: imm-trans-{which} = {trans})")
    pics = _pictures(block, rec, which, want, fitted, rec.shape[2])
    if pics is not None:
        yours, right = pics
        why = _explain(d, right.desc, yours.tile)
        if why:
            lines.extend(why)
            if any("start address" in w for w in why) and _nth(block, rec) > 1:
                lines.append("a start address right for the first wgmma and wrong for a later one is a k step: " +
                             _step_hint(rec, name))
        elif right.ok and got is None and decode(desc) == right.desc:
            lines.append("your descriptor is the one this tile needs, but the bytes were not there when the wgmma "
                         "read them: the wait before it let it through before TMA's load landed — check the parity "
                         "it names ((it / S) & 1 for the slot's own use) and that it waits on the slot's own barrier")
            pics = None
        elif right.ok:
            lines.append(f"the descriptor this tile needs: {right.desc}")
        if pics is not None:
            rep.picture = pics
    alt = _other_major(block, rec, which, want)
    if alt:
        lines.append(alt)
    return lines[0] + "\n    " + "\n    ".join(lines[1:])


def _other_major(block, rec, which, want):
    """'with imm-trans-b = 1 it would read right' when flipping the transpose flag alone fixes it."""
    desc = rec.desc_a if which == "a" else rec.desc_b
    trans = rec.trans_a if which == "a" else rec.trans_b
    if rec.dtype not in ("bf16", "f16"):
        return None
    d = decode(desc).as_umma()
    bits = BITS[rec.dtype]
    rows = rec.shape[0] if which == "a" else rec.shape[1]
    alt = {}
    for i in range(rows):
        for kk in range(rec.shape[2]):
            a = umma.descriptor_address(d, "K" if trans else "MN", bits, i, kk)
            alt[(i, kk)] = (a, block.element_at(a))
    if not fit(alt, want, rows, rec.shape[2]).wrong:
        return (f"with imm-trans-{which} = {1 - trans} ({'K' if trans else 'MN'}-major) the same descriptor reads "
                f"{'A' if which == 'a' else 'B'} right: the transpose flag (the template argument of wgmma_bf16) is wrong")
    return None


def _nth(block, rec):
    same = [r for r in block.wgmmas if r.warpgroup == rec.warpgroup]
    return same.index(rec) + 1


def _show(v):
    if v is None:
        return "nothing TMA wrote"
    return str(v)


def _span(ks):
    return _ranges(ks, 1)


def _ranges(ks, width):
    ks = sorted(set(ks))
    out, start, prev = [], ks[0], ks[0]
    for k in ks[1:] + [None]:
        if k is not None and k <= prev + width:
            prev = k
            continue
        out.append(f"{start}–{prev + width - 1}")
        if k is not None:
            start = prev = k
    return ", ".join(out)




# ---------------------------------------------------------------- the lessons' kernels
class _Hang(Exception):
    pass


def _replay(kernel, make_launch, *inputs, block_idx=(0, 0, 0)):
    from . import replay
    from .ptx_values import Deadlock

    launches = replay.record_launch(make_launch, kernel, *inputs)
    if not launches:
        raise ValueError("the launch function launched nothing for the replay's problem")
    try:
        block = replay.run(launches[0], block_idx)
    except Deadlock as e:
        raise _Hang(str(e)) from None
    if block.trapped:
        raise _Hang(f"the kernel trapped: {block.trapped}")
    return block


def _guarded(check):
    """A check whose replay hung (or trapped) reports that instead of a verdict on the wgmmas."""
    import functools

    @functools.wraps(check)
    def wrapper(kernel, *a, **kw):
        try:
            return check(kernel, *a, **kw)
        except NotImplementedError as e:            # the cell still holds the exercise's stub
            return Report(kernel=kernel.name, problems=[f"not implemented yet: {e}"])
        except ReplayError as e:
            return Report(kernel=kernel.name, problems=[f"the CPU replay could not follow the kernel: {e}"])
        except _Hang as e:
            return Report(kernel=kernel.name, problems=[str(e) + " (on a GPU: a launch that never ends, or the "
                                                        "bounded wait's trap)"])
    return wrapper


@_guarded
def gemm(kernel, make_launch=None, K: int | None = None, b_major: str = "MN") -> Report:
    """05.02 / 05.03: replay block 0 of a bf16 GEMM kernel ``(a_map, b_map, …)`` launched by
    ``make_launch`` (default :func:`grader.problems.hopper.wgmma_gemm_launch`) on one TILE_M × TILE_N
    tile with K = TILE_K × (STAGES + 2) (every slot of the ring refilled), and check its wgmmas."""
    from .replay import FakeTensor
    from ..problems import hopper

    s = kernel.launch_shape
    make_launch = make_launch or hopper.wgmma_gemm_launch
    K = K or s.tile_k * (max(s.stages, 1) + 2)
    M, N = s.tile_m, s.tile_n
    a, c = FakeTensor("A", (M, K)), FakeTensor("C", (M, N))
    b = FakeTensor("B", (K, N)) if b_major == "MN" else FakeTensor("B", (N, K))
    block = _replay(kernel, make_launch, a, b, c)
    along = "col" if b_major == "MN" else "row"
    return check_wgmmas(block, kernel.name, lambda r: (Operand("A"), Operand("B", along), "A·B"),
                        {"A·B": -(-K // s.tile_k) * s.tile_k})


@_guarded
def fp8_gemm(kernel, K: int | None = None) -> Report:
    """05.06: replay block 0 of an ``fp8_gemm<Cfg>`` (A (M, K) and B (N, K) e4m3, both K-major, scales
    per 128 of K) launched by :func:`grader.problems.hopper_fp8.fp8_gemm_launch` on one tile."""
    from .replay import FakeTensor
    from ..problems import hopper_fp8

    s = kernel.launch_shape
    K = K or 128 * (max(s.stages, 1) + 1)
    M, N = s.tile_m, s.tile_n
    nb = -(-N // 128)
    a, b = FakeTensor("A", (M, K), "e4m3"), FakeTensor("B", (N, K), "e4m3")
    sa, sb = FakeTensor("sa", (K // 128, -(-M // 4) * 4), "f32"), FakeTensor("sb", (K // 128, -(-nb // 4) * 4), "f32")
    c = FakeTensor("C", (M, N))
    block = _replay(kernel, lambda k: hopper_fp8.fp8_gemm_launch(k, ctas=1), a, b, sa, sb, c)
    rep = check_wgmmas(block, kernel.name, lambda r: (Operand("A"), Operand("B"), "A·Bᵀ"), {"A·Bᵀ": K})
    if rep.ok:
        # block scaling: each 128-wide k block is summed into a fresh partial (scale-d 0 on its first
        # wgmma) so that its own scales can multiply it before it joins the accumulator
        for wg in sorted({r.warpgroup for r in block.wgmmas}):
            recs = [r for r in block.wgmmas if r.warpgroup == wg]
            for r in recs:
                k0 = fit(r.b, Operand("B"), r.shape[1], r.shape[2]).origin[2]
                fresh = r.scale_d is False
                if (k0 % 128 == 0) != fresh:
                    rep.problems.append(
                        f"line {r.line}: warpgroup {wg}'s wgmma for k {k0}–{k0 + r.shape[2] - 1} "
                        + ("adds to the sums of the k block before it (scale-d 1): each 128-wide k block must start "
                           "a fresh partial (scale-d 0 on its first wgmma) for its scales to multiply it alone"
                           if not fresh else "overwrites the partial sums of its own k block (scale-d 0 inside a "
                           "block): only a block's first wgmma starts from zero"))
                    return rep
    return rep


@_guarded
def flash3(kernel, Sk: int | None = None) -> Report:
    """05.07: replay the one CTA of an FA3-style kernel on one head, TILE_M queries and ``Sk`` keys
    (default: STAGES + 1 blocks of TILE_N), non-causal; S = Q·Kᵀ must read Q and K (both K-major: k is
    the head dimension) and O += P·V must read V (N-major: its k are the keys)."""
    from .replay import FakeTensor
    from ..problems import flash3 as F

    s = kernel.launch_shape
    d = s.tile_k
    Sk = Sk or s.tile_n * (max(s.stages, 1) + 1)
    q, o = FakeTensor("Q", (1, 1, s.tile_m, d), "i16"), FakeTensor("O", (1, 1, s.tile_m, d), "i16")
    k, v = FakeTensor("K", (1, 1, Sk, d), "i16"), FakeTensor("V", (1, 1, Sk, d), "i16")
    block = _replay(kernel, lambda kern: F.flash3_launch(kern, ctas=1), q, k, v, False, o)

    def operands(rec):
        if rec.desc_a is not None:
            return Operand("Q"), Operand("K"), "S = Q·Kᵀ"
        return None, Operand("V", "col"), "O += P·V"
    return check_wgmmas(block, kernel.name, operands, {"S = Q·Kᵀ": d, "O += P·V": -(-Sk // s.tile_n) * s.tile_n})


def require(report: Report) -> Report:
    """Print the verdict; raise :class:`grader.errors.CheckFailed` with the problems (the picture, when
    there is one, is shown first in a notebook)."""
    from ..errors import CheckFailed

    if report.ok:
        print(str(report).splitlines()[0])
        return report
    fig = report.figure()
    if fig is not None:
        try:
            from IPython.display import display

            display(fig)
        except ImportError:
            pass
    if len(report.problems) == 1 and report.problems[0].startswith("not implemented yet"):
        raise CheckFailed(f"{report.kernel}: {report.problems[0]}")
    raise CheckFailed(str(report).replace("✗ ", "", 1))


__all__ = ["SWIZZLE_CODE", "Desc", "encode", "decode", "operand_address", "k_elems", "check_desc", "expected_desc", "gemm", "fp8_gemm", "flash3", "require",
           "DescCheck", "draw", "Operand", "fit", "check_wgmmas", "Report", "refit", "operand_reads", "operand_addresses"]
