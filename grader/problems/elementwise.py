"""Chapter 01, elementwise: targets from CURRICULUM.md."""
from __future__ import annotations

import numpy as np

from ..check import Problem


def _two_vectors(rng: np.random.Generator, n: int) -> dict:
    return {"a": rng.standard_normal(n, dtype=np.float32),
            "b": rng.standard_normal(n, dtype=np.float32)}


vector_add = Problem(
    name="vector add",
    make_inputs=_two_vectors,
    outputs=lambda n, inputs: {"c": ((n,), np.float32)},
    reference=lambda a, b: {"c": a.astype(np.float64) + b.astype(np.float64)},
    # 1 element; not a multiple of any block size; a large prime-ish size
    sizes=[1, 1000, 1_000_003, 1 << 24],
    sim_sizes=[1, 1000, 4099],
    hidden_sizes=[7, 65_537, 10_000_019],
    hidden_sim_sizes=[3, 2049, 5003],
    hint="Each thread handles one element: its global index, and nothing for threads past the end.",
    bytes_moved=lambda n: 3 * 4 * n,   # 3 × 4 B per element: read a, read b, write c
    bench_size=1 << 27,                 # 3 × 512 MiB: far past the L2
    peer="copy",
    # Lesson 01 teaches correctness; its speed cell is a gentle first measurement:
    # any launch that fills the GPU earns the point (one element per thread reached
    # 81% of copy bandwidth on an H200). A single block, or blocks of 1 thread, do not.
    target=0.50,
    floor=0.10,
)
