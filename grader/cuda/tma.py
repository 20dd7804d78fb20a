"""Tensor maps for TMA (Hopper's bulk tensor copies), encoded from Python and passed by value.

A kernel that moves tiles with ``cp.async.bulk.tensor`` names the tensor through a *tensor map*:
128 opaque bytes the CUDA driver encodes (``cuTensorMapEncodeTiled``) from the tensor's address,
sizes, row strides, the box one copy moves, the shared-memory swizzle and the out-of-bounds fill.
The kernel takes it as a ``const __grid_constant__ course::TensorMap`` parameter
(grader/include/tma.cuh); :meth:`grader.cuda.module.CudaKernel.__call__` passes a
:class:`TensorMap` argument by value.

:func:`layout_problems` states the hardware's rules (16-byte row strides, boxes of at most 256 per
side, the swizzle span) and needs no GPU; :func:`tiled_2d` checks them, then encodes through
``cuda.bindings.driver`` (a GPU driver is needed from there on).
"""
from __future__ import annotations

import ctypes

import numpy as np

#: Swizzle modes: the bytes of a box row the swizzle pattern spans (0: none).
SWIZZLES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
MAX_BOX = 256


class TensorMap:
    """An encoded tensor map: 128 bytes kept 64-byte aligned, passed to kernels by value."""

    SIZE = 128

    def __init__(self, raw: bytes, *, shape: tuple, box: tuple, dtype, swizzle: str):
        if len(raw) != self.SIZE:
            raise ValueError(f"a tensor map is {self.SIZE} bytes, got {len(raw)}")
        self._buf = (ctypes.c_ubyte * (self.SIZE + 64))()
        self._addr = ctypes.addressof(self._buf) + (-ctypes.addressof(self._buf)) % 64
        ctypes.memmove(self._addr, raw, self.SIZE)
        self.shape, self.box, self.dtype, self.swizzle = tuple(shape), tuple(box), np.dtype(dtype), swizzle

    def param_address(self) -> int:
        """Host address of the 128 bytes (the launch copies them into the kernel's parameters)."""
        return self._addr

    def __bytes__(self) -> bytes:
        return ctypes.string_at(self._addr, self.SIZE)

    def __repr__(self):
        return (f"<TensorMap {self.dtype} {self.shape[0]}×{self.shape[1]}, box {self.box[0]}×{self.box[1]}, "
                f"swizzle {self.swizzle}>")


def layout_problems(shape: tuple, row_stride_bytes: int, itemsize: int, box: tuple, swizzle: str = "128B",
                    address: int = 0) -> list[str]:
    """Why TMA cannot describe a row-major 2-D tensor this way ([] when it can). shape and box are
    (rows, columns); the rules are those of ``cuTensorMapEncodeTiled``."""
    rows, cols = shape
    brows, bcols = box
    out = []
    if swizzle not in SWIZZLES:
        out.append(f"swizzle must be one of {', '.join(SWIZZLES)}, not {swizzle!r}")
    if not (1 <= rows <= 2**32 and 1 <= cols <= 2**32):
        out.append(f"each dimension must be 1 … 2^32 elements, not {rows} × {cols}")
    if address % 16:
        out.append(f"the tensor's address must be a multiple of 16 bytes (it is {address:#x})")
    if rows > 1 and (row_stride_bytes % 16 or row_stride_bytes >= 2**40):
        out.append(f"a row is {row_stride_bytes} B apart from the next: TMA needs a multiple of 16 B "
                   f"(here: columns a multiple of {16 // itemsize})")
    if not (1 <= brows <= MAX_BOX and 1 <= bcols <= MAX_BOX):
        out.append(f"a box side must be 1 … {MAX_BOX} elements, not {brows} × {bcols}")
    if (bcols * itemsize) % 16:
        out.append(f"a box row must be a multiple of 16 B, not {bcols * itemsize} B")
    span = SWIZZLES.get(swizzle, 0)
    if span and bcols * itemsize > span:
        out.append(f"with the {swizzle} swizzle a box row holds at most {span} B, not {bcols * itemsize} B")
    return out


def _data_type(dtype: np.dtype):
    from cuda.bindings import driver as d

    t = d.CUtensorMapDataType
    table = {np.dtype(np.float32): t.CU_TENSOR_MAP_DATA_TYPE_FLOAT32, np.dtype(np.float16): t.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
             np.dtype(np.uint16): t.CU_TENSOR_MAP_DATA_TYPE_UINT16, np.dtype(np.int16): t.CU_TENSOR_MAP_DATA_TYPE_UINT16,
             np.dtype(np.uint8): t.CU_TENSOR_MAP_DATA_TYPE_UINT8, np.dtype(np.int32): t.CU_TENSOR_MAP_DATA_TYPE_INT32,
             np.dtype(np.uint32): t.CU_TENSOR_MAP_DATA_TYPE_UINT32, np.dtype(np.float64): t.CU_TENSOR_MAP_DATA_TYPE_FLOAT64}
    if dtype not in table:
        raise ValueError(f"no tensor-map data type for {dtype}")
    return table[dtype]


def _torch_dtype_to_numpy(t) -> np.dtype:
    name = str(t.dtype).replace("torch.", "")
    # bf16 and the FP8 formats as unsigned integers of their width: TMA moves bytes, it does not convert
    return np.dtype({"bfloat16": "uint16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}.get(name, name))


def _encode_tiled(dtype, address: int, sizes: list, strides: list, box: list, swizzle: str, what: str) -> bytes:
    """``cuTensorMapEncodeTiled``'s 128 bytes for a tensor of ``sizes`` elements (innermost first),
    ``strides`` bytes between the outer dimensions' steps, boxes of ``box`` elements (innermost
    first), every element of a box, no interleave, L2 promotion of 128 B, zeros past the edges."""
    from cuda.bindings import driver as d

    u64, u32 = d.cuuint64_t, d.cuuint32_t
    mode = {"none": "NONE", "32B": "32B", "64B": "64B", "128B": "128B"}[swizzle]
    err, tmap = d.cuTensorMapEncodeTiled(
        _data_type(dtype), len(sizes), address,
        [u64(n) for n in sizes], [u64(b) for b in strides], [u32(n) for n in box], [u32(1)] * len(sizes),
        d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(d.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{mode}"),
        d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)   # NONE: zeros past the edges
    if int(err) != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed ({err!r}) for {what}")
    return ctypes.string_at(int(tmap.getPtr()), TensorMap.SIZE)


def tiled_2d(tensor, box: tuple, swizzle: str = "128B", cols: int | None = None) -> TensorMap:
    """The tensor map of a row-major 2-D device tensor (a torch tensor, or anything with
    ``__cuda_array_interface__``): boxes of ``box`` = (rows, columns) elements, swizzled in shared
    memory as ``swizzle`` says, zeros read past the edges (and writes past them dropped). ``cols``:
    describe only each row's first ``cols`` elements (the rest is padding), as a view [:, :cols] would
    — without making one (a launch function of a library-free problem may run no torch operation)."""
    from .module import current_device

    current_device()                                                  # the driver initialised, the device current
    if hasattr(tensor, "data_ptr"):                                   # torch
        address, shape = int(tensor.data_ptr()), tuple(tensor.shape)
        dtype = _torch_dtype_to_numpy(tensor)
        strides = tuple(s * tensor.element_size() for s in tensor.stride())
    else:
        cai = tensor.__cuda_array_interface__
        address, shape, dtype = int(cai["data"][0]), tuple(cai["shape"]), np.dtype(cai["typestr"])
        strides = cai.get("strides") or (shape[1] * dtype.itemsize, dtype.itemsize)
    if len(shape) != 2:
        raise ValueError(f"tiled_2d takes a 2-D tensor, not one of shape {shape}")
    if cols is not None:
        if not 0 < cols <= shape[1]:
            raise ValueError(f"cols must be 1 … {shape[1]}, not {cols}")
        shape = (shape[0], cols)
    if strides[1] != dtype.itemsize:
        raise ValueError("the tensor's columns must be contiguous (call .contiguous())")
    problems = layout_problems(shape, strides[0], dtype.itemsize, box, swizzle, address)
    if problems:
        raise ValueError(f"TMA cannot describe a {shape[0]} × {shape[1]} {dtype} tensor: " + "; ".join(problems))
    raw = _encode_tiled(dtype, address, sizes=[shape[1], shape[0]],   # columns, rows (innermost first)
                        strides=[strides[0]], box=[box[1], box[0]], swizzle=swizzle,
                        what=f"a {shape} {dtype} tensor, box {box}")
    return TensorMap(raw, shape=shape, box=box, dtype=dtype, swizzle=swizzle)


def tiled_rows_3d(tensor, box: tuple, swizzle: str = "128B") -> TensorMap:
    """The tensor map of a contiguous (..., rows, columns) device tensor seen as 3-D (heads, rows,
    columns), every leading dimension folded into heads: boxes of ``box`` = (rows, columns) of one
    head. A box that runs past the last row of a head is zero-filled there (a 2-D view of
    (heads · rows, columns) would read the next head's first rows instead). Lesson 05.05 (attention)."""
    from .module import current_device

    current_device()
    shape = tuple(tensor.shape)
    if len(shape) < 2 or not tensor.is_contiguous():
        raise ValueError(f"tiled_rows_3d takes a contiguous tensor of 2 or more dimensions, not {shape}")
    rows, cols = shape[-2], shape[-1]
    heads = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    dtype, item = _torch_dtype_to_numpy(tensor), tensor.element_size()
    address = int(tensor.data_ptr())
    problems = layout_problems((rows, cols), cols * item, item, box, swizzle, address)
    if problems:
        raise ValueError(f"TMA cannot describe a {rows} × {cols} {dtype} tensor: " + "; ".join(problems))
    raw = _encode_tiled(dtype, address, sizes=[cols, rows, heads],
                        strides=[cols * item, rows * cols * item],          # bytes between rows, between heads
                        box=[box[1], box[0], 1], swizzle=swizzle, what=f"a {shape} {dtype} tensor, box {box}")
    return TensorMap(raw, shape=(heads * rows, cols), box=box, dtype=dtype, swizzle=swizzle)


__all__ = ["TensorMap", "tiled_2d", "tiled_rows_3d", "layout_problems", "SWIZZLES"]
