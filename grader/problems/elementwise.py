"""Chapter 01, elementwise: targets from CURRICULUM.md."""
from __future__ import annotations

import numpy as np

from .. import parallel, peers
from .. import integrity as _integrity
from ..problem import Problem


def _two_vectors(rng: np.random.Generator, n: int) -> dict:
    return {"a": parallel.normal(rng, n), "b": parallel.normal(rng, n)}


@parallel.rowwise("a", "b")
def _add_reference(a, b):
    return {"c": a.astype(np.float64) + b.astype(np.float64)}


vector_add = Problem(
    name="vector add",
    make_inputs=_two_vectors,
    outputs=lambda n, inputs: {"c": ((n,), np.float32)},
    reference=_add_reference,
    # 1 element; not a multiple of any block size; a large prime-ish size
    sizes=[1, 1000, 1_000_003, 1 << 24],
    sim_sizes=[1, 1000, 4099],
    hidden_sizes=[7, 65_537, 10_000_019],
    hidden_sim_sizes=[3, 2049, 5003],
    hint="Each thread handles one element: its global index, and nothing for threads past the end.",
    bytes_moved=lambda n: 3 * 4 * n,   # 3 × 4 B per element: read a, read b, write c
    bench_size=1 << 27,                 # 3 × 512 MiB: far past the L2
    peer=peers.copy(),
    # Lesson 01 teaches correctness; its speed cell is a gentle first measurement:
    # any launch that fills the GPU earns the point (one element per thread reached
    # 81% of copy bandwidth on an H200). A single block, or blocks of 1 thread, do not.
    target=0.50,
    floor=0.10,
)


# ---------------------------------------------------------------- 01.02 saxpy
def _saxpy_inputs(rng: np.random.Generator, n: int) -> dict:
    return {"a": np.float32(rng.uniform(0.5, 2.0)),
            "x": parallel.normal(rng, n),
            "y": parallel.normal(rng, n)}


saxpy = Problem(
    name="saxpy",
    make_inputs=_saxpy_inputs,
    outputs=lambda n, inputs: {"z": ((n,), np.float32)},
    reference=parallel.rowwise("x", "y")(lambda a, x, y: {"z": np.float64(a) * x.astype(np.float64) + y.astype(np.float64)}),
    sizes=[1, 1000, 1_000_003, 1 << 24],
    sim_sizes=[1, 1000, 4099],
    hidden_sizes=[7, 65_537, 10_000_019],
    hidden_sim_sizes=[3, 2049, 5003],
    # a·x rounds once (or not at all, fused into an FMA): |a·x| ≤ 2 × 5.5, half an ulp of 11 ≈ 5e-7
    tolerance=lambda n, dtype: (1e-5, 2e-6),
    hint="z[i] = a * x[i] + y[i] for every i < n: a grid-stride loop must visit each i exactly once.",
    bytes_moved=lambda n: 3 * 4 * n,    # 3 × 4 B per element: read x, read y, write z
    flops=None,                         # 2 FLOP per element (multiply, add): graded in GB/s
    bench_size=1 << 27,                 # 3 × 512 MiB
    peer=peers.copy(),
    target=0.60,
    floor=0.15,
)


def saxpy_flops(n: int) -> int:
    return 2 * n                        # one multiply and one add per element


# ---------------------------------------------------------------- 01.03 transpose
def _matrix(rng: np.random.Generator, shape: tuple) -> dict:
    return {"a": parallel.normal(rng, shape)}


transpose = Problem(
    name="transpose",
    make_inputs=_matrix,
    outputs=lambda shape, inputs: {"t": ((shape[1], shape[0]), np.float32)},
    reference=lambda a: {"t": parallel.transposed(a)},
    # a row, a column, not square and not a multiple of any tile, then a large square one
    sizes=[(1, 1), (1, 1000), (1000, 1), (1023, 517), (4096, 4096)],
    sim_sizes=[(1, 1), (1, 100), (100, 1), (67, 45), (40, 72)],
    hidden_sizes=[(7, 13), (1, 65_537), (65_537, 1), (2053, 1031), (3001, 4099)],
    hidden_sim_sizes=[(3, 5), (1, 257), (257, 1), (61, 97), (64, 64)],
    tolerance=lambda shape, dtype: (0.0, 0.0),     # moving bits: exact
    hint=("t[j, i] must equal a[i, j]. Tiles at the right and bottom edges are partial: guard every "
          "read with the shape of `a` and every write with the shape of `t` (they differ)."),
    bytes_moved=lambda shape: 2 * 4 * shape[0] * shape[1],   # read a, write t: 4 B each per element
    bench_size=(8192, 8192),            # 256 MiB each way, 5× the L2 of an H100
    peer=peers.copy(),
    target=0.50,
    floor=0.35,                         # the unpadded 32 × 32 tile reached 35% of copy on an H200 (naive: 13%)
)


# ---------------------------------------------------------------- 01.04 bias + GELU in bf16
GELU_C = np.sqrt(2.0 / np.pi)           # GELU, tanh form: 0.5 v (1 + tanh(C (v + 0.044715 v³)))


def gelu_tanh_f64(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return 0.5 * v * (1.0 + np.tanh(GELU_C * (v + 0.044715 * v**3)))


def _bias_act_inputs(rng: np.random.Generator, shape: tuple) -> dict:
    from ..formats import f32_to_bf16

    m, n = shape
    x = parallel.normal(rng, (m, n))
    x *= np.float32(2)
    # LLM activations have a few outlier channels, orders of magnitude larger than the rest.
    # bf16 holds them (float32's range); fp16 (largest 65504) turns them into inf.
    outliers = rng.choice(n, size=max(1, n // 64), replace=False)
    x[:, outliers] *= np.float32(1e5)
    bias = rng.standard_normal(n, dtype=np.float32)
    return {"x": f32_to_bf16(x), "bias": f32_to_bf16(bias)}        # (m, n), (n,) bf16 as uint16


@parallel.rowwise("x")
def _bias_gelu_reference(x, bias):
    from ..formats import bf16_to_f64

    return {"y": gelu_tanh_f64(bf16_to_f64(x) + bf16_to_f64(bias)[None, :])}


def _bias_act_outputs(shape, inputs):
    from ..formats import BF16

    return {"y": (shape, BF16)}


bias_gelu = Problem(
    name="bias + GELU (bf16)",
    make_inputs=_bias_act_inputs,
    outputs=_bias_act_outputs,
    reference=_bias_gelu_reference,
    # (rows, features): one element, a row, a column, odd widths, then a large one
    sizes=[(1, 1), (1, 4096), (4096, 1), (333, 1000), (2048, 4096)],
    sim_sizes=[(1, 1), (1, 300), (300, 1), (37, 129), (16, 512)],
    hidden_sizes=[(7, 13), (1, 65_537), (65_537, 1), (1000, 4099), (4096, 2052)],
    hidden_sim_sizes=[(3, 5), (1, 1031), (257, 1), (61, 97), (8, 1024)],
    tolerance=None,                     # BF16's default: 2^-7 relative (twice one rounding), 1e-6 absolute
    hint=("y = gelu(x + bias[column]), rounded once to bf16 at the end. Do the math in float32: "
          "fp16 overflows above 65504 and bf16 arithmetic loses several ulps."),
    bytes_moved=lambda shape: 2 * 2 * shape[0] * shape[1] + 2 * shape[1],  # read x, write y (2 B each), read bias once
    bench_size=(32768, 4096),           # 2^27 elements: 256 MiB each way
    peer=peers.copy(),
    target=0.70,
    floor=0.20,
)


@parallel.rowwise("x")
def _bias_silu_reference(x, bias):
    from ..formats import bf16_to_f64

    v = bf16_to_f64(x) + bf16_to_f64(bias)[None, :]
    with np.errstate(over="ignore"):
        return {"y": v / (1.0 + np.exp(-v))}


bias_silu = bias_gelu.variant(
    name="bias + SiLU (bf16)",
    reference=_bias_silu_reference,
    hint="y = silu(x + bias[column]) = v / (1 + exp(-v)), in float32, rounded once to bf16.",
)


_integrity.record_problems(globals())   # the fields checks rely on, before any learner code
