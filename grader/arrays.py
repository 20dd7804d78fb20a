"""Device arrays for checking and timing: poisoned, guarded, as Numba arrays or torch tensors.

* :func:`poisoned` — a host buffer of ``shape`` plus a guard zone, every element a NaN pattern
  no arithmetic produces (integers: their most negative value). An output element the kernel
  never writes, or a write past the end, is then visible.
* :func:`upload` / :func:`output` — a device copy of an input, or a fresh poisoned output, each
  inside a larger poisoned buffer; ``kind`` is "numba" (Numba device arrays, the simulator's too)
  or "torch" (CUDA tensors). Both return ``(flat buffer, view)``: the launch function gets the view.
* :func:`to_host` — any device array (Numba, torch, ``__cuda_array_interface__``) to NumPy.
* :func:`as_torch` — a zero-copy torch view of a device array (for peers that are torch ops).
"""
from __future__ import annotations

import numpy as np

from .formats import Encoded, storage_dtype

GUARD_ELEMENTS = 256          # poisoned elements after every array: writes there are out of bounds


def poison_bits(dtype) -> np.ndarray:
    """The poison of a dtype (or Encoded format) as a 0-d array of its bits."""
    if isinstance(dtype, Encoded):
        return np.array(dtype.poison, dtype=dtype.storage)
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        pattern = {2: 0x7E5A, 4: 0x7FC0DEAD, 8: 0x7FF8DEADBEEF0BAD}[dtype.itemsize]
        return np.array(pattern, dtype=np.dtype(f"u{dtype.itemsize}"))
    if dtype.kind in "iu":
        return np.array(np.iinfo(dtype).min, dtype=dtype)
    raise TypeError(f"cannot poison dtype {dtype}")


def poisoned(shape, dtype) -> np.ndarray:
    """A flat host buffer of ``shape`` + guard zone, every element poison."""
    n = int(np.prod(shape, dtype=np.int64))
    bits = poison_bits(dtype)
    return np.full(n + GUARD_ELEMENTS, bits, dtype=bits.dtype).view(storage_dtype(dtype))


def is_poison(a: np.ndarray, dtype=None) -> np.ndarray:
    bits = poison_bits(a.dtype if dtype is None else dtype)
    return a.view(bits.dtype) == bits


# ---------------------------------------------------------------- torch dtypes
def _torch_dtype(dtype: np.dtype):
    """The torch dtype holding the same bits (unsigned 16/32/64 as signed: torch has few uint ops)."""
    import torch

    dtype = np.dtype(dtype)
    signed_as = {"u2": torch.int16, "u4": torch.int32, "u8": torch.int64}
    key = f"{dtype.kind}{dtype.itemsize}"
    if key in signed_as:
        return signed_as[key]
    return {"f2": torch.float16, "f4": torch.float32, "f8": torch.float64, "i1": torch.int8,
            "i2": torch.int16, "i4": torch.int32, "i8": torch.int64, "u1": torch.uint8,
            "b1": torch.bool}[key]


def _torch_from_host(flat: np.ndarray):
    import torch

    same_width = {"u2": np.int16, "u4": np.int32, "u8": np.int64}.get(f"{flat.dtype.kind}{flat.dtype.itemsize}")
    src = flat.view(same_width) if same_width else flat
    return torch.from_numpy(np.ascontiguousarray(src)).to("cuda")


# ---------------------------------------------------------------- device buffers
def upload(host: np.ndarray, kind: str = "numba"):
    """``host`` on the device inside a larger poisoned buffer: (flat buffer, view of host's shape)."""
    flat = poisoned(host.shape, host.dtype)
    flat[: host.size] = host.ravel()
    return _device_flat(flat, host.shape, kind)


def output(shape, dtype, kind: str = "numba"):
    """A poisoned output of ``shape`` and ``dtype`` (a dtype or Encoded) on the device: (flat, view)."""
    return _device_flat(poisoned(shape, dtype), shape, kind)


def _device_flat(flat: np.ndarray, shape, kind: str):
    n = int(np.prod(shape, dtype=np.int64))
    if kind == "torch":
        d_flat = _torch_from_host(flat)
        return d_flat, d_flat[:n].view(tuple(shape))
    from numba import cuda

    d_flat = cuda.to_device(flat)
    return d_flat, d_flat[:n].reshape(shape)


def device_args(inputs: dict, kind: str = "numba") -> dict:
    """name -> device view for arrays (inside poisoned guard zones), scalars as they are."""
    return {k: (upload(v, kind)[1] if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}


def to_host(arr, dtype=None) -> np.ndarray:
    """A NumPy copy of a device array: a Numba array, a torch tensor, or anything with
    ``__cuda_array_interface__``; ``dtype`` reinterprets the bits (e.g. uint16 for bf16)."""
    if hasattr(arr, "copy_to_host"):
        out = arr.copy_to_host()
    elif type(arr).__module__.startswith("torch"):
        out = arr.detach().cpu().contiguous().numpy()
    elif hasattr(arr, "__cuda_array_interface__"):
        from numba import cuda

        out = cuda.as_cuda_array(arr).copy_to_host()
    else:
        out = np.asarray(arr)
    return out.view(storage_dtype(dtype)) if dtype is not None else out


def copy_into(dst, src) -> None:
    """Device-to-device copy of one buffer into another of the same size (either kind)."""
    if hasattr(dst, "copy_to_device"):
        dst.copy_to_device(src)
    else:
        dst.copy_(src)


def clone(buf):
    """A device copy of a device buffer (either kind)."""
    if hasattr(buf, "copy_to_host"):
        from numba import cuda

        out = cuda.device_array_like(buf)
        out.copy_to_device(buf)
        return out
    return buf.clone()


def as_torch(arr):
    """A zero-copy torch tensor over a device array (torch tensors are returned as they are)."""
    import torch

    if type(arr).__module__.startswith("torch"):
        return arr
    dtype = np.dtype(arr.dtype)
    if dtype.kind == "u" and dtype.itemsize > 1:      # torch reads few unsigned dtypes: same bits, signed
        arr = arr.view(np.dtype(f"i{dtype.itemsize}"))
    return torch.as_tensor(arr, device="cuda")
