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

import numpy as np

from .check import Encoded


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """uint16 bf16 bits -> float32 values (exact)."""
    bits = np.asarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(values) -> np.ndarray:
    """float32 (or float64, rounded to float32 first) values -> uint16 bf16 bits, round to nearest even."""
    b = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(np.asarray(values, dtype=np.float32))
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, np.uint16(0x7FC0), rounded)


def bf16_to_f64(bits: np.ndarray) -> np.ndarray:
    return bf16_to_f32(bits).astype(np.float64)


# One bf16 ulp at 1.0 is 2^-7, so rounding a float32 result once costs at most 2^-8
# relative. The default allows twice that: room for fast-math approximations in fp32,
# none for doing the math in bf16 itself (errors of several ulps).
BF16 = Encoded(name="bf16", storage="uint16", decode=bf16_to_f64, poison=0x7FDA,
               tolerance=(2.0**-7, 1e-6))

__all__ = ["BF16", "bf16_to_f32", "f32_to_bf16", "bf16_to_f64"]
