"""bfloat16 without a bfloat16 dtype: 16 raw bits in a uint16 array.

NumPy has no bfloat16 and Numba's simulator has none either, so the course
stores bf16 tensors as their bit patterns (``np.uint16``, see grader.formats)
and kernels convert to float32 for the math. bf16 is the top half of a
float32, so the conversions are a shift (and a rounding on the way back):

    host    from_f32(a) -> uint16 bits (round to nearest even);  to_f32(bits) -> float32
            (grader.formats.f32_to_bf16 / bf16_to_f32 under short names)
    device  to_float(b) -> float32;  from_float(f) -> uint16 bits
            lo(u) / hi(u): the two bf16 packed in one uint32 (element 2k is the low half)
            pack(f_lo, f_hi) -> uint32 holding two bf16

On a GPU the device functions compile to a shift and a register move
(libdevice ``int_as_float`` / ``float_as_int``); in the simulator they are
NumPy. ``BF16`` (grader.formats) is what a Problem names as a bf16 output's dtype
so that check() poisons it with a bf16 NaN and compares it as numbers, not bits.
With torch: ``t.view(torch.int16)`` and these bits are the same memory.
"""
from __future__ import annotations

import numpy as np

from .backend import SIMULATOR
from .formats import BF16, bf16_to_f32, f32_to_bf16  # noqa: F401  (the host side lives there)


def from_f32(a) -> np.ndarray:
    """float array -> bf16 bits (uint16), rounding to nearest even."""
    return f32_to_bf16(a)


def to_f32(bits) -> np.ndarray:
    """bf16 bits (uint16) -> float32, exactly."""
    return bf16_to_f32(bits)


def round_trip(a) -> np.ndarray:
    """``a`` rounded to bf16, as float64: what a bf16 input really holds."""
    return to_f32(from_f32(a)).astype(np.float64)


if SIMULATOR:
    # plain Python: the simulator runs kernels as Python and calls these directly
    def to_float(b):
        return np.uint32((int(b) & 0xFFFF) << 16).view(np.float32)

    def from_float(f):
        u = int(np.float32(f).view(np.uint32))
        return np.uint16(((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF)

    def lo(u):
        return np.uint32((int(u) & 0xFFFF) << 16).view(np.float32)

    def hi(u):
        return np.uint32(int(u) & 0xFFFF0000).view(np.float32)

    def pack(f_lo, f_hi):
        return np.uint32(int(from_float(f_lo)) | (int(from_float(f_hi)) << 16))
else:
    from numba import cuda, int32, uint16, uint32
    from numba.cuda import libdevice

    @cuda.jit(device=True)
    def to_float(b):
        return libdevice.int_as_float(int32(uint32(b) << uint32(16)))

    @cuda.jit(device=True)
    def from_float(f):
        u = uint32(libdevice.float_as_int(f))
        return uint16((u + uint32(0x7FFF) + ((u >> uint32(16)) & uint32(1))) >> uint32(16))

    @cuda.jit(device=True)
    def lo(u):
        return libdevice.int_as_float(int32(uint32(u) << uint32(16)))

    @cuda.jit(device=True)
    def hi(u):
        return libdevice.int_as_float(int32(uint32(u) & uint32(0xFFFF0000)))

    @cuda.jit(device=True)
    def pack(f_lo, f_hi):
        return uint32(from_float(f_lo)) | (uint32(from_float(f_hi)) << uint32(16))
