"""Chapter 05, lesson 09 (05.09, Blackwell): the problems of its compiled kernels, their launch functions,
and the CPU-graded parts (FA4's exp2 on FMA units). Targets from CURRICULUM.md.

* :data:`umma_gemm` — chapter 03's bf16 GEMM (C = A·B, row-major, fp32 accumulation, cuBLAS as the
  peer at the kernel's shape) for a TMA + ``tcgen05.mma`` kernel: ``arch="sm_100a"``. tcgen05 runs
  only on a Blackwell datacenter GPU (compute capability 10.0); elsewhere check and speed say
  "compiled and inspected only" and the SASS rubric grades the code. Sizes: what TMA can describe
  (K and N multiples of 8) and ragged against the 128 × 256 (pair: 256 × 256) tiles elsewhere.
* :func:`umma_gemm_launch` — its launch function: encodes A's and B's tensor maps, takes the three
  descriptors (the lesson's Python encoders, else :mod:`grader.cuda.umma`'s), and refuses a kernel
  whose SASS holds CTA-pair instructions (``.2CTA``) unless its type states ``CLUSTER`` 2
  (:func:`cluster_problems`): launched without the cluster the peer CTA does not exist.
* :data:`mxfp8_gemm`, :data:`nvfp4_gemm` — block-scaled "TN" GEMMs (A (M, K), B (N, K), one scale
  per 32 (MX) or 16 (NV) values of K) with exact float64 references decoded from the bytes;
  :func:`scaled_gemm_launch`.
* :func:`exp2_fma` — FA4's exponential: 2^x = 2^⌊x⌋ · p(x − ⌊x⌋), p a polynomial evaluated with
  fp32 FMAs, ⌊x⌋ added to p's exponent bits; :func:`exp2_bound` the error a degree guarantees;
  :func:`check_exp2` grades a learner's version; :data:`exp2_kernel` is the same on a GPU.
* :func:`exercise` — for a graded cell that calls the learner's Python functions directly: a stub's
  ``NotImplementedError`` becomes the one-line verdict "not implemented yet", a failed assert a
  one-line :class:`~grader.errors.CheckFailed`.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from .. import integrity as _integrity
from ..errors import CheckFailed
from ..problem import Problem
from .gemm import Shape, hgemm_bf16 as _hgemm_bf16, tensor_core_fp32_tolerance
from .hopper import _map_cache, require_tma_gemm

# ---------------------------------------------------------------- tcgen05 bf16 GEMM
UMMA_SIZES = [Shape(128, 256, 64), Shape(1000, 1032, 1016), Shape(1, 768, 512), Shape(640, 8, 320),
              Shape(200, 136, 8200), Shape(2048, 2048, 2048)]
UMMA_HIDDEN = [Shape(1, 8, 8), Shape(999, 1000, 1000), Shape(257, 264, 8192), Shape(4096, 1024, 1536),
               Shape(3000, 4104, 520)]

umma_gemm = _hgemm_bf16.variant(
    name="tcgen05 gemm bf16",
    sizes=UMMA_SIZES, hidden_sizes=UMMA_HIDDEN, sim_sizes=[], hidden_sim_sizes=[],
    hint=("C[m, n] = sum over k of A[m, k]·B[k, n], all row-major. Garbage everywhere: check the "
          "descriptors with grader.cuda.umma.check_smem / check_instr (B is MN-major: its LBO is the "
          "distance between 64-column boxes), and that A's start address advances 32 bytes per K step "
          "and B's 16 rows (2 KiB). Wrong only with long K: the accumulate flag must be off only for the "
          "very first MMA. Rows or columns past the edge: guard the epilogue's stores."),
    target=0.50,
    floor=0.05,
    simulator=False, arch="sm_100a", arrays="torch",
)


def cluster_problems(kernel) -> list[str]:
    """Why ``kernel`` must not be launched as its type states (empty: it may). A kernel whose SASS
    holds CTA-pair instructions (UTCHMMA.2CTA, UTCBAR.2CTA, UTMALDG…2CTA, UTCATOMSWS.2CTA) needs
    clusters of 2 CTAs (an even number): without the cluster the peer CTA does not exist, and the
    pair's MMA, its barriers in the peer and its tensor-memory allocation fault or hang."""
    from ..cuda import sass

    pair_ops = sorted({op for op in sass.opcodes(kernel.module, kernel.name, full=True) if ".2CTA" in op})
    shape = kernel.launch_shape
    cluster = shape.cluster if shape else 0
    if pair_ops and (cluster < 2 or cluster % 2):
        return [f"{kernel.name} runs CTA-pair instructions ({', '.join(pair_ops)}) but its configuration type "
                f"states {'CLUSTER = ' + str(cluster) if cluster else 'no CLUSTER'}: a cta_group::2 kernel needs "
                "clusters of 2 CTAs (state CLUSTER = 2 in the type: the launch takes it from there)"]
    return []


def _smem_template(tile) -> int:
    from ..cuda import umma

    d = umma.expected_smem(tile)
    return umma.encode_smem(umma.SmemDesc(start=0, lbo=d.lbo, sbo=d.sbo, swizzle=d.swizzle))


def umma_descriptors(shape) -> tuple[int, int, int]:
    """(idesc, A's descriptor, B's descriptor), start addresses 0, for a ``umma_gemm<G<…>>`` type:
    kind::f16, bf16 in, fp32 out, A K-major, B MN-major, M = 128·CLUSTER, N = TILE_N."""
    from ..cuda import umma

    pair = max(shape.cluster, 1)
    idesc = umma.encode_instr(umma.InstrDesc("f16", 128 * pair, shape.tile_n, "bf16", "bf16", "f32", "K", "MN"))
    a = _smem_template(umma.Tile(128, shape.tile_k, "bf16", "K", "128B"))
    b = _smem_template(umma.Tile(shape.tile_n // pair, shape.tile_k, "bf16", "MN", "128B"))
    return idesc, a, b


def umma_gemm_launch(kernel, descriptors=None):
    """``launch(a, b, c)`` of a ``umma_gemm<G<CTA_GROUP, BN, STAGES>>`` kernel: a (M, K), b (K, N),
    c (M, N) bf16 bits in torch tensors. ``descriptors``: (idesc, a_desc, b_desc) with start
    addresses 0, default :func:`umma_descriptors`. One CTA per 128 × TILE_N tile of C (a pair per
    256 × TILE_N: the grid's x rounded up to the cluster). Refuses, before any GPU call, a kernel
    whose type states no cluster its instructions need (:func:`cluster_problems`)."""
    import numpy as np

    from ..cuda.module import _torch_stream_handle

    shape = kernel.launch_shape
    if shape is None or not (shape.tile_m and shape.tile_n and shape.tile_k):
        raise ValueError(f"{kernel.name}: its configuration type must state THREADS, SMEM_BYTES, TILE_M, "
                         "TILE_N, TILE_K (and CLUSTER for a CTA pair)")
    why = cluster_problems(kernel)
    if why:
        raise ValueError(why[0])
    idesc, a_desc, b_desc = (int(v) for v in (descriptors or umma_descriptors(shape)))
    pair = max(shape.cluster, 1)
    get = _map_cache()
    a_box, b_box = (shape.tile_m, shape.tile_k), (shape.tile_k, 64)

    def launch(a, b, c):
        M, K = a.shape
        N = b.shape[1]
        if M == 0 or N == 0:
            return
        require_tma_gemm(M, N, K)
        tiles_m, tiles_n = -(-M // shape.tile_m), -(-N // shape.tile_n)
        tiles_m = -(-tiles_m // pair) * pair
        kernel.launch((tiles_m, tiles_n), get(a, a_box, "128B"), get(b, b_box, "128B"), c, np.int32(M), np.int32(N), np.int32(K),
                      np.uint32(idesc), np.uint64(a_desc), np.uint64(b_desc), stream=_torch_stream_handle(a))
    launch.__name__ = f"launch {kernel.name}"
    return launch


# ---------------------------------------------------------------- block-scaled MXFP8 / NVFP4
def _e4m3_values() -> np.ndarray:
    """float64 value of each e4m3 byte (OCP FP8: bias 7, no infinities, 0x7f/0xff NaN)."""
    codes = np.arange(256)
    s, e, m = codes >> 7, (codes >> 3) & 15, codes & 7
    v = np.where(e == 0, m / 8 * 2.0 ** -6, (1 + m / 8) * 2.0 ** (e - 7.0))
    v = np.where((e == 15) & (m == 7), np.nan, v)
    return np.where(s == 1, -v, v)


E4M3 = _e4m3_values()
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float64)


def _nearest_e4m3(x: np.ndarray) -> np.ndarray:
    finite = np.flatnonzero(np.isfinite(E4M3))
    order = finite[np.argsort(E4M3[finite])]
    vals = E4M3[order]
    i = np.clip(np.searchsorted(vals, x), 1, len(vals) - 1)
    pick = np.where(np.abs(vals[i - 1] - x) <= np.abs(vals[i] - x), i - 1, i)
    return order[pick].astype(np.uint8)


def _mxfp8_inputs(rng, s: Shape):
    ks = s.K // 32
    return {"a": _nearest_e4m3(rng.uniform(-1, 1, (s.M, s.K))), "b": _nearest_e4m3(rng.uniform(-1, 1, (s.N, s.K))),
            "sfa": rng.integers(125, 130, (s.M, ks), dtype=np.uint8),     # ue8m0: 2^-2 … 2^2
            "sfb": rng.integers(125, 130, (s.N, ks), dtype=np.uint8)}


def _mxfp8_reference(a, b, sfa, sfb):
    sa = np.repeat(2.0 ** (sfa.astype(np.float64) - 127), 32, axis=1)
    sb = np.repeat(2.0 ** (sfb.astype(np.float64) - 127), 32, axis=1)
    return {"c": (E4M3[a] * sa) @ (E4M3[b] * sb).T}


def _nvfp4_inputs(rng, s: Shape):
    ks = s.K // 16
    scale_codes = np.flatnonzero((E4M3 >= 0.25) & (E4M3 <= 4)).astype(np.uint8)   # ue4m3: e4m3 without sign
    return {"a": rng.integers(0, 256, (s.M, s.K // 2), dtype=np.uint8), "b": rng.integers(0, 256, (s.N, s.K // 2), dtype=np.uint8),
            "sfa": rng.choice(scale_codes, (s.M, ks)), "sfb": rng.choice(scale_codes, (s.N, ks))}


def _fp4_unpack(x: np.ndarray) -> np.ndarray:
    """(R, K/2) bytes -> (R, K) values: element 2j in the low nibble of byte j, 2j + 1 in the high."""
    out = np.empty((x.shape[0], 2 * x.shape[1]))
    out[:, 0::2], out[:, 1::2] = E2M1[x & 15], E2M1[x >> 4]
    return out


def _nvfp4_reference(a, b, sfa, sfb):
    sa, sb = np.repeat(E4M3[sfa], 16, axis=1), np.repeat(E4M3[sfb], 16, axis=1)
    return {"c": (_fp4_unpack(a) * sa) @ (_fp4_unpack(b) * sb).T}


def _scaled_tolerance(bound: float):
    """fp32 accumulation of exact products (each |term| ≤ ``bound``): K·2^-20·bound absolute, and the
    tensor core's per-step truncation; a wrong scale byte moves an element by a whole term or more."""
    return lambda s, dtype: (tensor_core_fp32_tolerance(s)[0], s.K * 2.0 ** -20 * bound + 1e-6)


SCALED_SIZES = [Shape(128, 128, 256), Shape(200, 136, 512), Shape(1, 256, 1024), Shape(1000, 520, 2048)]
SCALED_HIDDEN = [Shape(129, 1, 256), Shape(333, 384, 4096), Shape(2048, 2048, 1024)]

mxfp8_gemm = Problem(
    name="MXFP8 block-scaled gemm",
    make_inputs=_mxfp8_inputs,
    outputs=lambda s, inputs: {"c": ((s.M, s.N), np.float32)},
    reference=_mxfp8_reference,
    sizes=SCALED_SIZES, hidden_sizes=SCALED_HIDDEN,
    tolerance=_scaled_tolerance(16.0),
    hint=("C = (A·sa)(B·sb)ᵀ with one ue8m0 scale per 32 values of K. Garbage: the instruction descriptor "
          "(kind::mxf8f6f4, e4m3 = 0, scale type ue8m0 = bit 23) or the A/B descriptors. Off by powers of two "
          "in blocks of 32 columns of K: the scale-factor ids (byte j of the stage's TMEM column for MMA j)."),
    flops=lambda s: 2 * s.M * s.N * s.K, simulator=False, arch="sm_100a", arrays="torch",
)

nvfp4_gemm = mxfp8_gemm.variant(
    name="NVFP4 block-scaled gemm",
    make_inputs=_nvfp4_inputs, reference=_nvfp4_reference,
    tolerance=_scaled_tolerance(6 * 6 * 4 * 4.0),
    hint=("C = (A·sa)(B·sb)ᵀ, e2m1 values two a byte (low nibble first), one ue4m3 scale per 16 values of K. "
          "Off in blocks of 16 columns of K: the order of the 4 scale bytes in each TMEM column."),
)


def scaled_descriptors(nvf4: bool) -> tuple[int, int]:
    """(idesc, A/B descriptor with start 0) of ``scaled_gemm<S<nvf4>>``: M = N = 128, K-major, 128B."""
    from ..cuda import umma

    kind, t = ("mxf4nvf4", "e2m1") if nvf4 else ("mxf8f6f4", "e4m3")
    idesc = umma.encode_instr(umma.InstrDesc(kind, 128, 128, t, t, scale="ue4m3" if nvf4 else "ue8m0"))
    return idesc, _smem_template(umma.Tile(128, 128, "e4m3", "K", "128B"))     # 128 bytes of K either way


def scaled_gemm_launch(kernel, descriptors=None):
    """``launch(a, b, sfa, sfb, c)`` of ``scaled_gemm<S<NVF4>>``: uint8 torch tensors (A (M, K bytes),
    B (N, K bytes), the scales), c (M, N) fp32. One CTA per 128 × 128 tile of C."""
    import numpy as np

    from ..cuda.module import _torch_stream_handle

    shape = kernel.launch_shape
    if shape is None or not shape.tile_k:
        raise ValueError(f"{kernel.name}: its configuration type must state THREADS, SMEM_BYTES and TILE_M/N/K")
    nvf4 = shape.tile_k == 256
    idesc, ab_desc = (int(v) for v in (descriptors or scaled_descriptors(nvf4)))
    get = _map_cache()

    def launch(a, b, sfa, sfb, c):
        M, N, K = a.shape[0], b.shape[0], a.shape[1] * (2 if nvf4 else 1)
        if M == 0 or N == 0:
            return
        if K % (64 if nvf4 else 32):
            raise ValueError(f"K = {K}: must be a multiple of one MMA's K ({64 if nvf4 else 32})")
        tiles_m, tiles_n = -(-M // 128), -(-N // 128)
        kernel.launch((tiles_m, tiles_n), get(a, (128, 128), "128B"), get(b, (128, 128), "128B"), sfa, sfb, c, np.int32(M),
                      np.int32(N), np.int32(K), np.uint32(idesc), np.uint64(ab_desc), stream=_torch_stream_handle(a))
    launch.__name__ = f"launch {kernel.name}"
    return launch


# ---------------------------------------------------------------- graded cells that call Python directly
@contextlib.contextmanager
def exercise(name: str):
    """``with exercise("exercise 1 (smem_desc, gemm_offsets)"):`` around a graded cell's body that calls
    the learner's functions itself (no launch function, so :func:`grader.check` is not there to explain
    a stub): ``NotImplementedError`` -> "not implemented yet: <name> …", a failed ``assert`` ->
    "<name>: <its message>", both as :class:`CheckFailed`, which IPython shows as one line."""
    try:
        yield
    except NotImplementedError:
        raise CheckFailed(f"not implemented yet: {name}: replace `raise NotImplementedError()` with your "
                          "code, run that cell, then this one.") from None
    except CheckFailed:
        raise
    except AssertionError as e:
        raise CheckFailed(f"{name}: {e}") from None


# ---------------------------------------------------------------- FA4: 2^x on the FMA units
def exp2_bound(degree: int) -> float:
    """Relative error a degree-``degree`` polynomial interpolating 2^f at Chebyshev nodes of [0, 1]
    guarantees: |2^f − p(f)| ≤ max|d^{d+1} 2^f| · (1/2)^{d+1} / ((d+1)! · 2^d), with
    max|d^{d+1} 2^f| = 2·(ln 2)^{d+1}, divided by 2^f ≥ 1; plus fp32 rounding, one ulp (2^-23)
    per Horner step and one for the input's reduction."""
    d = degree
    return 2 * math.log(2) ** (d + 1) * 0.5 ** (d + 1) / (math.factorial(d + 1) * 2 ** d) + (d + 2) * 2.0 ** -23


def exp2_coefficients(degree: int) -> tuple:
    """p's coefficients, lowest power first: 2^f interpolated at degree + 1 Chebyshev nodes of [0, 1]."""
    nodes = 0.5 + 0.5 * np.cos((2 * np.arange(degree + 1) + 1) * np.pi / (2 * degree + 2))
    return tuple(float(c) for c in np.polynomial.polynomial.polyfit(nodes, 2.0 ** nodes, degree))


def exp2_fma(x, coeffs) -> np.ndarray:
    """2^x the way FA4 computes it on the FMA units, in fp32: n = ⌊x⌋, f = x − n ∈ [0, 1),
    p = c_d·f + c_{d−1} … by Horner (one FMA a step), then n added to p's exponent field (an integer
    add of n·2^23 to its bits). x is clamped to [−125, 127] first: p(0) is a hair under 1, so below
    −125 the result would be subnormal, where adding to the exponent field is wrong. A masked score
    (x = −∞) so becomes about 2^-125, not 0: negligible beside a softmax row's largest weight (≥ 1),
    but a kernel that needs an exact 0 must select it (or round P to a format that flushes it: e4m3)."""
    x = np.clip(np.asarray(x, dtype=np.float32), np.float32(-125), np.float32(127))
    n = np.floor(x)
    f = (x - n).astype(np.float32)
    c = [np.float32(v) for v in coeffs]
    p = np.full_like(f, c[-1])
    for ci in reversed(c[:-1]):
        p = (p * f + ci).astype(np.float32)          # fp32 multiply-add (numpy rounds twice; an FMA once)
    bits = p.view(np.int32) + (n.astype(np.int32) << 23)
    return bits.view(np.float32)


def check_exp2(fn, degree: int = 3, quiet: bool = False) -> float:
    """Grade a learner's ``fn(xs, coeffs) -> list`` (FA4's exp2): with :func:`exp2_coefficients` its
    relative error must stay within :func:`exp2_bound` on a grid over [−125, 127) and random points;
    with other coefficients it must equal :func:`exp2_fma`'s (the same polynomial, so the learner's
    function really evaluates the coefficients it is given). Returns the worst relative error. A stub
    (``NotImplementedError``) and a wrong answer fail as one-line :class:`CheckFailed` verdicts."""
    with exercise("exp2_by_fma"):
        return _check_exp2(fn, degree, quiet)


def _check_exp2(fn, degree: int, quiet: bool) -> float:
    rng = np.random.default_rng()
    xs = np.concatenate([np.linspace(-125, 126.99, 4001), rng.uniform(-30, 30, 2000), [-1.0, 0.0, 0.5, 1.0, 10.25]])
    xs = xs.astype(np.float32)
    coeffs = exp2_coefficients(degree)
    got = np.asarray(fn(xs.tolist(), list(coeffs)), dtype=np.float64)
    if got.shape != xs.shape:
        raise AssertionError(f"exp2: expected {xs.size} values back, got shape {got.shape}")
    rel = np.abs(got - np.exp2(xs.astype(np.float64))) / np.exp2(xs.astype(np.float64))
    worst = float(np.nanmax(rel)) if np.all(np.isfinite(rel)) else math.inf
    bound = exp2_bound(degree)
    if not worst <= bound:
        i = int(np.nanargmax(np.where(np.isfinite(rel), rel, np.inf)))
        raise AssertionError(f"exp2: relative error {worst:.3g} at x = {xs[i]:g} (got {got[i]:.9g}, 2^x = "
                             f"{2.0 ** float(xs[i]):.9g}); a degree-{degree} polynomial guarantees {bound:.3g}")
    other = [c * (1 + 0.1 * rng.standard_normal()) for c in coeffs]
    mine = exp2_fma(xs, other).astype(np.float64)
    theirs = np.asarray(fn(xs.tolist(), other), dtype=np.float64)
    off = np.abs(theirs - mine) / np.abs(mine)
    if not np.all(off <= 4 * 2.0 ** -23):
        raise AssertionError("exp2: with other coefficients your function does not follow them (is it calling "
                             "np.exp2?): it must evaluate the polynomial it is given, then scale by 2^⌊x⌋")
    if not quiet:
        print(f"✓ exp2 by FMA, degree {degree}: worst relative error {worst:.2e} ≤ {bound:.2e} "
              f"(bf16's rounding: up to 2^-8 = {2.0 ** -8:.1e})")
    return worst


def _exp2_inputs(rng, n):
    return {"x": rng.uniform(-60, 60, n).astype(np.float32)}


exp2_kernel = Problem(
    name="exp2 on FMA units (degree 3)",
    make_inputs=_exp2_inputs,
    outputs=lambda n, inputs: {"y": ((n,), np.float32)},
    reference=lambda x: {"y": np.exp2(x.astype(np.float64))},
    sizes=[1, 1000, 1 << 20], hidden_sizes=[7, 12345],
    tolerance=lambda n, dtype: (exp2_bound(3), 0.0),
    hint="y = 2^x from ⌊x⌋ and a cubic in x − ⌊x⌋: check the Horner order (highest coefficient first) and that "
         "⌊x⌋ is added to the exponent bits (<< 23), not multiplied.",
    simulator=False, arch="sm_80", arrays="torch",
)

__all__ = ["umma_gemm", "umma_gemm_launch", "umma_descriptors", "cluster_problems", "UMMA_SIZES",
           "UMMA_HIDDEN", "mxfp8_gemm", "nvfp4_gemm", "scaled_descriptors", "scaled_gemm_launch", "E4M3", "E2M1",
           "exp2_bound", "exp2_coefficients", "exp2_fma", "check_exp2", "exp2_kernel", "exercise"]

_integrity.record_problems(globals())   # the fields checks rely on, before any learner code
