"""Number formats NumPy lacks, kept as raw bits in unsigned integers.

bfloat16 (bf16) is the top half of a float32: 1 sign bit, the same 8 exponent
bits, 7 mantissa bits. So a bf16 value is stored as a uint16, and

    float32 bits = bf16 bits << 16          (exact: widening loses nothing)
    bf16 bits    = round(float32 bits >> 16) (round to nearest, ties to even)

These host-side helpers make inputs and decode outputs; kernels do the same
with integer shifts (lesson 01.04). ``BF16`` tells grader.check to poison,
decode and compare a uint16 output as bf16.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Encoded:
    """A number format NumPy lacks, stored in an unsigned integer dtype of the same width.

    bf16 lives in uint16 (see :data:`BF16`). An output declared with an Encoded dtype is
    allocated in ``storage``, poisoned with ``poison`` (a NaN bit pattern no arithmetic
    produces), and compared as ``decode(stored)`` in float64.
    """

    name: str
    storage: str                                  # NumPy dtype the bits live in, e.g. "uint16"
    decode: Callable[[np.ndarray], np.ndarray]    # stored bits -> float64 values
    poison: int
    tolerance: tuple = (0.0, 0.0)                 # default (rtol, atol)

    @property
    def itemsize(self) -> int:
        return np.dtype(self.storage).itemsize

    def __str__(self) -> str:
        return f"{self.name} (stored as {self.storage})"


def storage_dtype(dtype) -> np.dtype:
    """The NumPy dtype an output of ``dtype`` (a dtype or an Encoded) is stored in."""
    return np.dtype(dtype.storage) if isinstance(dtype, Encoded) else np.dtype(dtype)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """uint16 bf16 bits -> float32 values (exact)."""
    bits = np.asarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(values) -> np.ndarray:
    """float32 (or float64, rounded to float32 first) values -> uint16 bf16 bits, round to nearest even.
    In uint32 arithmetic (it wraps only for NaNs, which are replaced), chunk by chunk on every core."""
    from .parallel import chunked

    f = np.ascontiguousarray(values, dtype=np.float32)
    flat, out = f.reshape(-1), np.empty(f.size, dtype=np.uint16)

    def part(a, b):
        u = flat[a:b].view(np.uint32)
        r = (u + ((u >> 16) & 1) + np.uint32(0x7FFF)) >> 16
        r[np.isnan(flat[a:b])] = 0x7FC0
        out[a:b] = r
    chunked(part, flat.size)
    return out.reshape(f.shape)


def bf16_to_f64(bits: np.ndarray) -> np.ndarray:
    return bf16_to_f32(bits).astype(np.float64)


# One bf16 ulp at 1.0 is 2^-7, so rounding a float32 result once costs at most 2^-8
# relative. The default allows twice that: room for fast-math approximations in fp32,
# none for doing the math in bf16 itself (errors of several ulps).
BF16 = Encoded(name="bf16", storage="uint16", decode=bf16_to_f64, poison=0x7FDA,
               tolerance=(2.0**-7, 1e-6))

__all__ = ["Encoded", "storage_dtype", "BF16", "bf16_to_f32", "f32_to_bf16", "bf16_to_f64"]
