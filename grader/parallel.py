"""Large host arrays made and compared on every core: the judge's inputs, references and comparisons.

A grade checks kernels on arrays of up to 2^27 elements, and NumPy does each array operation on one
core. NumPy releases the GIL inside its loops, so splitting an array into chunks and handing them to
threads uses every core with results identical to the one-core expression (each element's value
depends only on its own chunk):

* :func:`normal`, :func:`random` — random inputs from a Generator, deterministic for a seed whatever
  the number of cores: a large array is cut into fixed chunks of :data:`CHUNK` elements, each drawn
  from its own stream whose seed the parent Generator draws (small arrays come from the Generator
  itself, as before);
* :func:`rowwise` — a reference computed row block by row block (for references in which each output
  row depends only on the same rows of the inputs);
* :func:`chunked` — any elementwise function over chunks of flat arrays;
* :func:`transposed` — a matrix's transpose, C-contiguous, a block of its rows per core.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numpy as np

CHUNK = 1 << 20                 # elements of one chunk of a drawn array (fixed: inputs do not depend on cores)
PARALLEL_MIN = 1 << 21          # arrays smaller than this are made on one core


@lru_cache(maxsize=1)
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 1), thread_name_prefix="grader-np")


def workers() -> int:
    return _pool()._max_workers


def chunked(fn, n: int, step: int = CHUNK) -> list:
    """``[fn(start, stop) for each chunk of range(n)]``, the chunks on every core (in order)."""
    spans = [(i, min(i + step, n)) for i in range(0, n, step)]
    if len(spans) <= 1 or workers() == 1:
        return [fn(a, b) for a, b in spans]
    return list(_pool().map(lambda ab: fn(*ab), spans))


def _drawn(rng: np.random.Generator, shape, dtype, draw) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    if n < PARALLEL_MIN:
        return draw(rng, n, dtype).reshape(shape)
    seeds = rng.integers(0, 2**63 - 1, size=(n + CHUNK - 1) // CHUNK)
    out = np.empty(n, dtype=dtype)

    def fill(a, b):
        out[a:b] = draw(np.random.default_rng(int(seeds[a // CHUNK])), b - a, dtype)
    chunked(fill, n)
    return out.reshape(shape)


def normal(rng: np.random.Generator, shape, dtype=np.float32) -> np.ndarray:
    """Standard normal values (float32 or float64) of ``shape``."""
    return _drawn(rng, shape, dtype, lambda g, k, dt: g.standard_normal(k, dtype=dt))


def random(rng: np.random.Generator, shape, dtype=np.float32) -> np.ndarray:
    """Uniform values in [0, 1) of ``shape``."""
    return _drawn(rng, shape, dtype, lambda g, k, dt: g.random(k, dtype=dt))


def transposed(a: np.ndarray, dtype=np.float64) -> np.ndarray:
    """``a.T`` as a C-contiguous array of ``dtype``, a block of its rows per core (NumPy copies a
    transposed view on one core, through strided reads)."""
    out = np.empty(a.shape[::-1], dtype)
    if a.size < PARALLEL_MIN or workers() == 1:
        out[...] = a.T
        return out

    def part(i, j):
        out[i:j] = a[:, i:j].T
    chunked(part, out.shape[0], max(1, CHUNK // max(1, a.shape[0])))
    return out


def rowwise(*split: str):
    """Decorator: ``reference(**inputs)`` computed on blocks of rows in parallel, for a reference
    whose output rows depend only on the same rows of the inputs named in ``split`` (the others, a
    bias or a weight, are passed whole); each output is joined along its first dimension. Small
    inputs go through the reference at once."""
    def wrap(reference):
        def run(**inputs):
            rows = inputs[split[0]].shape[0] if split and getattr(inputs.get(split[0]), "ndim", 0) >= 1 else 0
            total = sum(inputs[k].size for k in split if isinstance(inputs.get(k), np.ndarray))
            if rows < 2 or total < PARALLEL_MIN or workers() == 1:
                return reference(**inputs)
            step = max(1, -(-rows * CHUNK // total))          # about CHUNK elements of input a block

            def part(a, b):
                return reference(**{k: (v[a:b] if k in split else v) for k, v in inputs.items()})
            parts = chunked(part, rows, step)
            return {k: np.concatenate([np.asarray(p[k]) for p in parts], axis=0) for k in parts[0]}
        run.__name__ = getattr(reference, "__name__", "reference")
        run.__doc__ = reference.__doc__
        run.__wrapped__ = reference
        return run
    return wrap
