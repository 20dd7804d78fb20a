"""The messages between the judge and the sandboxed runner, over a pair of pipes.

A message is a JSON header and zero or more arrays, each a length-prefixed frame. The judge may
send Python objects (a problem's size is a named tuple) pickled inside the header: only the runner
unpickles, and it trusts the judge. What the runner sends back is JSON and raw arrays of plain
numeric dtypes, read with limits: the judge never unpickles or evaluates anything the learner's
process wrote. A reply that breaks these rules is a :class:`ProtocolError`.
"""
from __future__ import annotations

import base64
import json
import pickle
import struct

import numpy as np

MAX_HEADER = 16 * 2**20
MAX_ARRAY = 8 * 2**30
DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"}


class ProtocolError(RuntimeError):
    """The other side sent something that is not a well-formed message (or hung up)."""


def _read_exact(stream, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise ProtocolError("the runner hung up")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _frame(stream, limit: int) -> bytes:
    (n,) = struct.unpack("<Q", _read_exact(stream, 8))
    if n > limit:
        raise ProtocolError(f"a message of {n} bytes is over the limit ({limit})")
    return _read_exact(stream, n)


def send(stream, header: dict, arrays: dict | None = None, objects: dict | None = None) -> None:
    """Write one message. ``objects`` are pickled (judge to runner only)."""
    arrays = {k: np.ascontiguousarray(v) for k, v in (arrays or {}).items()}
    head = dict(header)
    head["arrays"] = [{"name": k, "dtype": str(a.dtype), "shape": list(a.shape)} for k, a in arrays.items()]
    if objects:
        head["pickle"] = base64.b64encode(pickle.dumps(objects)).decode()
    raw = json.dumps(head, default=_jsonable).encode()
    stream.write(struct.pack("<Q", len(raw)) + raw)
    for a in arrays.values():
        data = a.view(np.uint8).reshape(-1) if a.size else np.zeros(0, np.uint8)
        stream.write(struct.pack("<Q", data.nbytes))
        stream.write(memoryview(data))
    stream.flush()


def recv(stream, allow_pickle: bool = False) -> tuple[dict, dict]:
    """Read one message: (header, name -> array). Pickled objects are in header["objects"] when
    ``allow_pickle`` (the runner reading the judge); otherwise they are refused."""
    try:
        header = json.loads(_frame(stream, MAX_HEADER))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"an unreadable message header ({exc})") from None
    if not isinstance(header, dict):
        raise ProtocolError("a message header that is not an object")
    if "pickle" in header:
        if not allow_pickle:
            raise ProtocolError("the runner sent pickled data")
        header["objects"] = pickle.loads(base64.b64decode(header.pop("pickle")))
    arrays = {}
    for spec in header.pop("arrays", []):
        try:
            name, dtype, shape = str(spec["name"]), str(spec["dtype"]), [int(s) for s in spec["shape"]]
        except (KeyError, TypeError, ValueError):
            raise ProtocolError("a malformed array description") from None
        if dtype not in DTYPES or any(s < 0 for s in shape):
            raise ProtocolError(f"an array of dtype {dtype!r} / shape {shape}")
        raw = _frame(stream, MAX_ARRAY)
        expected = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if len(raw) != expected:
            raise ProtocolError(f"array {name!r}: {len(raw)} bytes for shape {shape} of {dtype}")
        arrays[name] = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    return header, arrays


def _jsonable(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, (set, frozenset)):
        return sorted(x)
    raise TypeError(f"not JSON: {type(x).__name__}")


# ---------------------------------------------------------------- plain values both ways
def encode_value(v):
    """A Python value as JSON that keeps tuples apart from lists (for calls of plain functions)."""
    if isinstance(v, bool) or v is None or isinstance(v, (int, float, str)):
        return v
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, tuple):
        return {"__tuple__": [encode_value(x) for x in v]}
    if isinstance(v, list):
        return [encode_value(x) for x in v]
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):
        return {"__dict__": {k: encode_value(x) for k, x in v.items()}}
    raise TypeError(f"a value of type {type(v).__name__} cannot cross to the judge")


def decode_value(v, depth: int = 0):
    if depth > 64:
        raise ProtocolError("a value nested too deeply")
    if isinstance(v, list):
        return [decode_value(x, depth + 1) for x in v]
    if isinstance(v, dict):
        if set(v) == {"__tuple__"} and isinstance(v["__tuple__"], list):
            return tuple(decode_value(x, depth + 1) for x in v["__tuple__"])
        if set(v) == {"__dict__"} and isinstance(v["__dict__"], dict):
            return {str(k): decode_value(x, depth + 1) for k, x in v["__dict__"].items()}
        raise ProtocolError("an unknown encoded value")
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise ProtocolError("an unknown encoded value")
