"""The messages between the judge and the sandboxed runner, over a pair of pipes.

A message is a JSON header and zero or more arrays, each a length-prefixed frame. The judge may
send Python objects (a problem's size is a named tuple) pickled inside the header: only the runner
unpickles, and it trusts the judge. What the runner sends back is a contract the judge validates:

* a header of at most ``limits.header`` bytes that parses as a JSON object (any parse failure,
  recursion included, is a ProtocolError);
* arrays only where the request expects them, of plain numeric dtypes, with at most 8 dimensions,
  their sizes declared and checked against ``limits.arrays`` *before* a byte of them is read;
* nothing pickled, nothing evaluated.

:class:`Limits` carries those numbers per request; a reply that breaks them is a
:class:`ProtocolError`, which the judge turns into a graded 0 with a reason (grader.judge.remote).
"""
from __future__ import annotations

import base64
import json
import pickle
import struct
from dataclasses import dataclass

import numpy as np

MAX_HEADER = 1 * 2**20            # a reply's header, unless the request allows more
MAX_ARRAY = 8 * 2**30             # what the runner may read from the judge (the judge trusts nothing back)
MAX_ARRAYS = 64                   # arrays in one message
MAX_DIMS = 8
DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"}


class ProtocolError(RuntimeError):
    """The other side sent something that is not a well-formed message (or hung up)."""


@dataclass(frozen=True)
class Limits:
    """What one reply may hold: header bytes and array bytes in all (0: no arrays)."""
    header: int = MAX_HEADER
    arrays: int = 0


TRUSTED = Limits(header=64 * 2**20, arrays=MAX_ARRAY)     # the runner reading the judge


def _read_exact(stream, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(min(left, 1 << 24))
        if not chunk:
            raise ProtocolError("the runner hung up")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _length(stream) -> int:
    (n,) = struct.unpack("<Q", _read_exact(stream, 8))
    return n


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


def _specs(header: dict) -> list[tuple[str, str, list]]:
    specs = header.pop("arrays", [])
    if not isinstance(specs, list) or len(specs) > MAX_ARRAYS:
        raise ProtocolError("a malformed list of arrays")
    out = []
    for spec in specs:
        if not isinstance(spec, dict):
            raise ProtocolError("a malformed array description")
        name, dtype, shape = spec.get("name"), spec.get("dtype"), spec.get("shape")
        if not isinstance(name, str) or len(name) > 100 or not isinstance(dtype, str) or not isinstance(shape, list):
            raise ProtocolError("a malformed array description")
        if dtype not in DTYPES or len(shape) > MAX_DIMS or \
                not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**40 for s in shape):
            raise ProtocolError(f"an array of dtype {dtype!r} / shape {shape}"[:200])
        out.append((name, dtype, shape))
    return out


def recv(stream, allow_pickle: bool = False, limits: Limits = Limits()) -> tuple[dict, dict]:
    """Read one message: (header, name -> array). Pickled objects are in header["objects"] when
    ``allow_pickle`` (the runner reading the judge); otherwise they are refused. Everything the
    header announces is checked against ``limits`` before it is read."""
    n = _length(stream)
    if n > limits.header:
        raise ProtocolError(f"a message of {n} bytes is over the limit ({limits.header})")
    raw = _read_exact(stream, n)
    try:
        header = json.loads(raw)
    except Exception as exc:                   # ValueError, UnicodeDecodeError, RecursionError, …
        raise ProtocolError(f"an unreadable message header ({type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise ProtocolError("a message header that is not an object")
    if "pickle" in header:
        if not allow_pickle:
            raise ProtocolError("the runner sent pickled data")
        header["objects"] = pickle.loads(base64.b64decode(header.pop("pickle")))
    specs = _specs(header)
    sizes = [int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize for _, dtype, shape in specs]
    if sum(sizes) > limits.arrays:
        raise ProtocolError(f"arrays of {sum(sizes)} bytes announced, over the {limits.arrays} this reply may hold")
    arrays = {}
    for (name, dtype, shape), expected in zip(specs, sizes):
        got = _length(stream)
        if got != expected:
            raise ProtocolError(f"array {name!r}: {got} bytes for shape {shape} of {dtype}"[:300])
        arrays[name] = np.frombuffer(_read_exact(stream, got), dtype=dtype).reshape(shape).copy()
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


# ---------------------------------------------------------------- fields of a reply
def field_of(head: dict, key: str, kind, default=None, *, max_len: int = 100_000):
    """``head[key]`` when it is of ``kind`` (strings cut to ``max_len``), else ``default``: a
    reply's field as the judge uses it, never a surprise type."""
    v = head.get(key, default)
    if kind is int and (isinstance(v, bool) or not isinstance(v, int)):
        return default
    if kind is not int and not isinstance(v, kind):
        return default
    if isinstance(v, str):
        return v[:max_len]
    return v
