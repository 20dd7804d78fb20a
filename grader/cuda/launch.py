"""The launch contract: a kernel's configuration is written once, in its C++ type.

A kernel configured by a type, ``template <class Cfg> __global__ void gemm(...)``, is compiled by
name expression (``%%cuda hg -k "gemm<V3>"``). The type states what the host needs as
``static constexpr int`` members, each optional::

    THREADS      threads per block (also the kernel's __launch_bounds__)
    SMEM_BYTES   dynamic shared memory per block
    TILE_M, TILE_N, TILE_K, STAGES    the tile one block computes and its pipeline depth
    CLUSTER      blocks per cluster (1 or absent: no cluster)

``course.cuh`` turns them into a device variable ``course::launch_shape<Cfg>``; the compiler
instantiates it beside the kernel and :func:`read_launch_shape` reads its bytes from the cubin
(no GPU needed). The host then derives block, shared memory and the tile grid from it —
nothing is written twice, nothing is parsed from the source.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass

#: Field order of ``course::LaunchShape`` in grader/include/course.cuh (int32 each).
FIELDS = ("threads", "smem_bytes", "tile_m", "tile_n", "tile_k", "stages", "cluster")


@dataclass(frozen=True)
class LaunchShape:
    threads: int
    smem_bytes: int = 0
    tile_m: int = 0
    tile_n: int = 0
    tile_k: int = 0
    stages: int = 0
    cluster: int = 0

    def tiles(self, m: int, n: int) -> tuple[int, int]:
        """Tiles of (TILE_M, TILE_N) covering an m × n output: (tiles along m, tiles along n)."""
        if not (self.tile_m and self.tile_n):
            raise ValueError("this configuration states no TILE_M / TILE_N")
        return -(-m // self.tile_m), -(-n // self.tile_n)

    def __str__(self):
        parts = [f"{self.threads} threads", f"{self.smem_bytes / 1024:g} KiB shared memory"]
        if self.tile_m:
            parts.append("tile " + " × ".join(str(t) for t in (self.tile_m, self.tile_n, self.tile_k) if t))
        if self.stages:
            parts.append(f"{self.stages} stages")
        if self.cluster > 1:
            parts.append(f"clusters of {self.cluster}")
        return ", ".join(parts)


def _template_argument(expr: str) -> str | None:
    """``"gemm<V3>"`` -> ``"V3"``; None unless the expression has exactly one template argument
    that can be a type (not a number or a bool)."""
    m = re.fullmatch(r"\s*[A-Za-z_][\w:]*\s*<(.*)>\s*", expr, re.S)
    if not m:
        return None
    arg, depth = m.group(1).strip(), 0
    for ch in arg:
        depth += ch in "<(["
        depth -= ch in ">)]"
        if ch == "," and depth == 0:
            return None
    if not arg or re.fullmatch(r"[-+]?[\d.]+[uUlLfF]*|true|false", arg):
        return None
    return arg


def shape_expression(kernel_expr: str) -> str | None:
    """The name expression of the launch shape that goes with a kernel name expression."""
    arg = _template_argument(kernel_expr)
    return f"&course::launch_shape<{arg}>" if arg else None


def read_launch_shape(cubin_reader, symbol_mapping: dict, kernel_expr: str) -> LaunchShape | None:
    """The LaunchShape compiled for ``kernel_expr``, or None when the kernel has none (not
    configured by a type, compiled with nvcc, or a type that states no THREADS)."""
    expr = shape_expression(kernel_expr)
    symbol = symbol_mapping.get(expr) if expr else None
    if symbol is None:
        return None
    raw = cubin_reader.variable_bytes(symbol)
    values = struct.unpack(f"<{len(FIELDS)}i", raw[: 4 * len(FIELDS)])
    shape = LaunchShape(**dict(zip(FIELDS, values)))
    return shape if shape.threads > 0 else None
