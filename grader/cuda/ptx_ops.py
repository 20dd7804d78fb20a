"""The PTX instructions :mod:`grader.cuda.ptx` replays: one closure per instruction, made once.

Each closure takes the thread and returns the index of the next instruction. Families (one module
each): moves and arithmetic (``ptx_arith``); comparisons, conversions, memory and atomics
(``ptx_memory``); control flow, calls (``printf`` included), barriers and warp collectives — a
rendezvous of the warp's lanes (``ptx_control``); mbarriers, TMA copies and wgmma (``ptx_async``).
Anything else raises :class:`~grader.cuda.ptx_values.ReplayError` naming the instruction, when it runs
(not when it is read).
"""
from __future__ import annotations

from .ptx_arith import (_arith, _bfe, _bfi, _float_binop, _fma, _lop3, _mov, _prmt, _shf, _shift,  # noqa: F401
                        _unary)
from .ptx_async import _cp, _fence, _mapa, _mbarrier, _wgmma
from .ptx_control import _activemask, _bar, _bra, _call, _complete_bar, _elect, _exit, _redux, _ret, _shfl, _trap, _vote  # noqa: F401
from .ptx_memory import _atom, _cvt, _cvta, _ld, _selp, _setp, _slct, _st, _testp
from .ptx_values import ReplayError, _noop, _unsupported


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
