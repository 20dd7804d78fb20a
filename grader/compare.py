"""Comparing outputs with the reference, and saying what is wrong in one line a learner can act on.

Pure NumPy: the judge (which runs no learner code and may have no GPU) compares with this too.
"""
from __future__ import annotations

import numpy as np

from .arrays import is_poison
from .formats import Encoded
from .parallel import PARALLEL_MIN, chunked

SHOW_MISMATCHES = 5


def describe_size(size) -> str:
    if callable(getattr(size, "describe", None)):     # a size that names its own fields
        return size.describe()
    if isinstance(size, tuple):
        return "shape=" + "×".join(str(s) for s in size)
    return f"n={size}"


def _fmt(x) -> str:
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.7g}"
    return str(x)


def compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float, dtype=None) -> list[str]:
    """Failure lines (empty if ``got`` matches ``want``). ``dtype``: an :class:`Encoded` format when
    ``got`` holds its stored bits (compared decoded)."""
    if got.shape != want.shape:
        return [f"`{name}` has shape {got.shape}, expected {want.shape}"]
    if got.size >= PARALLEL_MIN and not _any_bad(got, want, rtol, atol, dtype):
        return []                               # the common case, on every core; a failure is described below
    unwritten = is_poison(got, dtype)
    if isinstance(dtype, Encoded):
        got = dtype.decode(got)
    bad = _bad(got, want, rtol, atol)
    if not bad.any():
        return []
    n_bad, n = int(bad.sum()), bad.size
    lines = [f"`{name}`: {n_bad} of {n} elements wrong ({100.0 * n_bad / n:.3g}%)"]
    for i in np.argwhere(bad)[:SHOW_MISMATCHES]:
        i = tuple(int(k) for k in i)
        where = i[0] if len(i) == 1 else i
        got_s = "never written" if unwritten[i] else _fmt(got[i])
        lines.append(f"    at {where}: got {got_s}, expected {_fmt(want[i])}")
    if n_bad > SHOW_MISMATCHES:
        lines.append(f"    … and {n_bad - SHOW_MISMATCHES} more")
    lines.append("hint: " + hint(bad, unwritten, got))
    return lines


def _bad(g: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    if g.dtype.kind == "f":
        g = g.astype(np.float64)
        return ~np.isfinite(g) | ~(np.abs(g - want) <= atol + rtol * np.abs(want))
    return g != want


def _any_bad(got: np.ndarray, want: np.ndarray, rtol: float, atol: float, dtype) -> bool:
    """Whether any element is wrong, chunk by chunk on every core (the same test as :func:`compare`)."""
    flat_g, flat_w = got.reshape(-1), np.asarray(want).reshape(-1)

    def part(a, b):
        g = dtype.decode(flat_g[a:b]) if isinstance(dtype, Encoded) else flat_g[a:b]
        return bool(_bad(g, flat_w[a:b], rtol, atol).any())
    return any(chunked(part, flat_g.size))


def hint(bad: np.ndarray, unwritten: np.ndarray, got: np.ndarray) -> str:
    flat_bad, flat_unw = bad.ravel(), unwritten.ravel()
    n = flat_bad.size
    if flat_unw.all():
        return ("no element was written. Did the launch function launch the kernel "
                "(kernel[blocks, threads](...)) and does the kernel store into the output?")
    if flat_unw.any() and np.array_equal(flat_bad, flat_unw):
        first = int(np.argmax(flat_unw))
        if flat_unw[first:].all():
            return (f"the last {n - first} elements were never written: the grid does not cover "
                    "the whole array. Round the block count up: (n + threads - 1) // threads.")
        return (f"{int(flat_unw.sum())} elements were never written (the first at flat index {first}): "
                "check how each thread computes its index and that every index is covered.")
    if got.dtype.kind == "f" and not np.isfinite(got.astype(np.float64)[bad & ~unwritten]).all():
        return "the kernel produced NaN or inf: look for a read of an element nothing wrote, or an overflow."
    return "values are wrong where written: check the formula, the index each thread uses, and the dtype of the math."


def guard_violation(name: str, flat: np.ndarray, n: int, dtype) -> str | None:
    """A message if anything past the first ``n`` elements of a poisoned buffer was written."""
    guard = is_poison(flat[n:], dtype)
    if guard.all():
        return None
    first = n + int(np.argmin(guard))
    return (f"`{name}`: the kernel wrote past the end of the array (flat index {first}, size {n}). "
            "Threads beyond the data must do nothing: guard with `if i < n:`.")
