"""Chapter 04, attention: naive and flash attention, FA2 on tensor cores, decoding (GQA, split-KV,
paged) and MLA decode. Targets from CURRICULUM.md.

Sizes:

* ``Attn(B, H, S, d, causal, Sk, Hkv, kind)`` — q (B, H, S, d), k and v (B, Hkv, Sk, d) (Sk, Hkv
  default to S, H); ``kind`` picks inputs that catch one mistake each: ``"large"`` (integer q, k in
  [-16, 16]: logits of ±300, exact in fp32, that overflow exp without the max subtracted),
  ``"growing"`` (key norms growing along the sequence: each row's max keeps rising, so a running
  output that is not rescaled is wrong), ``"large_v"`` (values near 1e4 under near-uniform
  attention: an fp16 P·V accumulator overflows). ``Sk = 0`` gives rows with no key: O = 0.
* ``Decode(lens, Hq, Hkv, d, page)`` — one query token per sequence over ``lens[b]`` cached
  tokens (0 allowed: O = 0); ``page`` > 0: a paged cache with pages of that many tokens, shuffled.
* ``Mla(lens, Hq)`` — MLA decode over a latent cache of 576 values per token.

Lessons 01–02 are Numba kernels in fp32 (the simulator runs them); 03–05 are compiled CUDA C++ on
bf16 (``simulator=False, arch="sm_80"``, torch tensors). Every reference is float64 from the values
the inputs hold; caches are NaN past each sequence's end (a read past it cannot pass), unused pages
and table entries too. Tolerances: one bf16 rounding of O and of P (2^-8 of the largest |v|), or fp32
sums, both growing with the reduction length. Lesson 02 bounds the device memory its launch may
allocate (``max_scratch_bytes``): an S × S buffer fails. Launch functions of the compiled kernels are
in grader.problems.attention_launch (re-exported here).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import peers
from .. import integrity as _integrity
from ..formats import BF16, bf16_to_f64
from ..peers import Peer
from ..problem import Problem
from . import attention_naive as _naive
from .attention_launch import MLA_SCALE, decode_launch, fa2_launch, mla_launch, paged_decode_launch  # noqa: F401

BF16_NAN = np.uint16(0x7FC0)
V_LARGE = (1e4, 2.5e3)          # "large_v": values of mean 1e4, standard deviation 2500


class Attn(NamedTuple):
    B: int
    H: int
    S: int                       # queries (and keys, unless Sk is given)
    d: int
    causal: bool = False
    Sk: int | None = None        # keys (non-causal only); None: S
    Hkv: int | None = None       # KV heads (GQA: fewer than H); None: H
    kind: str = ""               # "", "large", "growing" or "large_v" (see the module docstring)

    @property
    def keys(self) -> int:
        return self.S if self.Sk is None else self.Sk

    @property
    def kv_heads(self) -> int:
        return self.H if self.Hkv is None else self.Hkv

    def describe(self) -> str:
        s = f"B={self.B} H={self.H} S={self.S} d={self.d}"
        s += f" Sk={self.Sk}" if self.Sk is not None else ""
        s += f" Hkv={self.Hkv}" if self.Hkv is not None else ""
        s += " causal" if self.causal else ""
        return s + (f" ({self.kind} inputs)" if self.kind else "")


class Decode(NamedTuple):
    lens: tuple                  # cached tokens of each sequence (B = len(lens))
    Hq: int
    Hkv: int
    d: int = 128
    page: int = 0                # tokens per page (a power of two); 0: a contiguous cache

    def describe(self) -> str:
        lens = f"{self.lens[0]} × {len(self.lens)}" if len(set(self.lens)) == 1 else ", ".join(map(str, self.lens))
        s = f"B={len(self.lens)} L=({lens}) Hq={self.Hq} Hkv={self.Hkv} d={self.d}"
        return s + (f", pages of {self.page}" if self.page else "")


class Mla(NamedTuple):
    lens: tuple
    Hq: int

    def describe(self) -> str:
        lens = f"{self.lens[0]} × {len(self.lens)}" if len(set(self.lens)) == 1 else ", ".join(map(str, self.lens))
        return f"B={len(self.lens)} L=({lens}) Hq={self.Hq}, 576-wide latent cache"


# ------------------------------------------------------------------ inputs
def _normal(rng, shape, scale=1.0, shift=0.0) -> np.ndarray:
    """Random fp32 of mean ``shift`` and standard deviation ``scale``: uniform on ±√3·scale (as good
    as a normal for these tests, and twice as fast to draw at the benchmark sizes)."""
    from .. import parallel

    x = parallel.random(rng, shape)
    x -= np.float32(0.5)
    x *= np.float32(2 * math.sqrt(3) * scale)
    if shift:
        x += np.float32(shift)
    return x


def to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits, truncated (inputs are whatever bf16 values this makes; the references
    decode the bits): the high half of each float32, without arithmetic."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    return np.ascontiguousarray(x.reshape(-1).view(np.uint16)[1::2]).reshape(x.shape)


def _qkv(rng, s: Attn):
    """fp32 q, k, v of an Attn size, by kind."""
    qs, ks = (s.B, s.H, s.S, s.d), (s.B, s.kv_heads, s.keys, s.d)
    if s.kind == "large":
        q = rng.integers(-16, 17, qs).astype(np.float32)
        k = rng.integers(-16, 17, ks).astype(np.float32)
        return q, k, _normal(rng, ks)
    if s.kind == "growing":
        ramp = np.linspace(0.5, 6.0, max(s.keys, 1), dtype=np.float32)[: s.keys, None]
        return _normal(rng, qs), _normal(rng, ks) * ramp, _normal(rng, ks)
    if s.kind == "large_v":
        return _normal(rng, qs, 0.05), _normal(rng, ks, 0.05), _normal(rng, ks, V_LARGE[1], V_LARGE[0])
    return _normal(rng, qs), _normal(rng, ks), _normal(rng, ks)


def attn_inputs_f32(rng, s: Attn) -> dict:
    q, k, v = _qkv(rng, s)
    return {"q": q, "k": k, "v": v, "causal": int(s.causal)}


def attn_inputs_bf16(rng, s: Attn) -> dict:
    q, k, v = _qkv(rng, s)
    return {"q": to_bf16(q), "k": to_bf16(k), "v": to_bf16(v), "causal": int(s.causal)}


def _values(x) -> np.ndarray:
    return bf16_to_f64(x) if x.dtype == np.uint16 else x.astype(np.float64)


# ------------------------------------------------------------------ references (float64)
def _torch_f64():
    """torch and a CUDA device for large float64 references, or None (small ones use NumPy)."""
    import sys

    torch = sys.modules.get("torch")
    try:
        if torch is None:
            import torch
        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


def attention_f64(q, k, v, causal) -> np.ndarray:
    """softmax(q kᵀ / √d [causal]) v in float64: q (B, H, Sq, d), k, v (B, Hkv, Sk, d); a row with
    no key gives 0. Head by head; on a GPU (torch, float64) when the work is large."""
    B, H, Sq, d = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    out = np.zeros((B, H, Sq, d))
    if Sk == 0 or Sq == 0:
        return out
    torch = _torch_f64() if B * H * Sq * Sk * d > 2e9 else None
    mask = np.triu(np.ones((Sq, Sk), dtype=bool), 1) if causal else None
    if torch is not None and causal:
        mask = torch.from_numpy(mask).cuda()
    for b in range(B):
        for h in range(H):
            qh, kh, vh = _values(q[b, h]), _values(k[b, h * Hkv // H]), _values(v[b, h * Hkv // H])
            if torch is not None:
                qt, kt, vt = (torch.from_numpy(x).cuda() for x in (qh, kh, vh))
                st = qt @ kt.T / math.sqrt(d)
                if causal:
                    st = st.masked_fill(mask, -math.inf)
                out[b, h] = (torch.softmax(st, dim=-1) @ vt).cpu().numpy()
                continue
            s = qh @ kh.T / math.sqrt(d)
            if causal:
                s[mask] = -np.inf
            s -= s.max(axis=-1, keepdims=True)
            p = np.exp(s)
            out[b, h] = (p / p.sum(axis=-1, keepdims=True)) @ vh
    return out


def _attn_reference(q, k, v, causal) -> dict:
    return {"o": attention_f64(q, k, v, bool(causal))}


def _vmax(kind: str) -> float:
    """The largest |v| the inputs of a kind hold (√3 σ: uniform)."""
    return V_LARGE[0] + 2 * V_LARGE[1] if kind == "large_v" else 2.0


def bf16_tolerance(vmax: float, n: int) -> tuple:
    """bf16 output: one rounding of O (2^-8 relative, with margin), P rounded to bf16 before P·V (an
    error of at most 2^-9 of the largest |v| averaged), fp32 sums over n keys."""
    return (2.0 ** -7, vmax * (2.0 ** -8 + n * 2.0 ** -22))


def fp32_tolerance(vmax: float, n: int, kind: str = "") -> tuple:
    """fp32 output: exp and fp32 sums over n keys; logits of ±300 ("large") lose 2^-24 · 300 · √d
    in the sum, which exp turns into a relative error of about 1e-4."""
    return (1e-4, vmax * ((1e-3 if kind == "large" else 1e-5) + n * 2.0 ** -22))


def _attn_flops(s: Attn) -> int:
    # Q·Kᵀ and P·V: 2·Sq·Sk·d each, per head; causal: half the pairs
    return int(4 * s.B * s.H * s.S * s.keys * s.d // (2 if s.causal else 1))


def _attn_bytes(itemsize):
    # q, k, v read once, o written once
    return lambda s: itemsize * (2 * s.B * s.H * s.S * s.d + 2 * s.B * s.kv_heads * s.keys * s.d)


def _attn_outputs(dtype):
    return lambda s, inputs: {"o": ((s.B, s.H, s.S, s.d), dtype)}


# ------------------------------------------------------------------ 01 naive, 02 flash (Numba, fp32)
NAIVE_SIM = [Attn(1, 1, 1, 4), Attn(1, 2, 5, 8), Attn(2, 1, 17, 4, causal=True)]
NAIVE_SIM_HIDDEN = [Attn(1, 1, 3, 4, causal=True), Attn(1, 1, 9, 4, kind="large"),
                    Attn(1, 1, 24, 8, causal=True, kind="growing")]
NAIVE_GPU = [Attn(1, 1, 1, 64), Attn(2, 3, 65, 64), Attn(1, 2, 1000, 64, causal=True),
             Attn(1, 1, 1031, 128, kind="large"), Attn(2, 2, 300, 64, causal=True, kind="growing")]
NAIVE_GPU_HIDDEN = [Attn(1, 1, 7, 128, causal=True), Attn(3, 2, 513, 64), Attn(1, 1, 2048, 64, causal=True, kind="large"),
                    Attn(1, 1, 1000, 128, kind="growing")]
FLASH_BENCH = Attn(2, 16, 4096, 64)

_NAIVE_HINT = ("o[b, h, i] = Σ_j softmax_j(q[b, h, i] · k[b, h, j] / √d) · v[b, h, j]; causal: only keys j ≤ i. "
               "Subtract each row's max before exp (the large-logit tests overflow otherwise).")

attention_naive = Problem(
    name="attention (naive, fp32)",
    make_inputs=attn_inputs_f32,
    outputs=_attn_outputs(np.float32),
    reference=_attn_reference,
    sizes=NAIVE_GPU, sim_sizes=NAIVE_SIM, hidden_sizes=NAIVE_GPU_HIDDEN, hidden_sim_sizes=NAIVE_SIM_HIDDEN,
    tolerance=lambda s, dt: fp32_tolerance(_vmax(s.kind), s.keys, s.kind),
    hint=_NAIVE_HINT,
    bytes_moved=_attn_bytes(4), flops=_attn_flops,
    bench_size=FLASH_BENCH,
)


def flash_scratch_bytes(s: Attn) -> int:
    """Room for four fp32 arrays of (B, H, S, d + 4) (a copy of Q, K, V, O and per-row statistics):
    an S × S fp32 buffer (4·B·H·S² bytes) is larger once S > 4·(d + 4)."""
    return 16 * s.B * s.H * s.S * (s.d + 4)


naive_peer = Peer("lesson 01's three kernels (naive, same run)", _naive.prepare_peer, needs_torch=False)

flash_attention = attention_naive.variant(
    name="flash attention (CUDA cores, fp32)",
    # several tiles of keys (a max that keeps growing, ±300 logits), and sizes where an S × S buffer
    # exceeds the memory bound (S > 4·(d + 4))
    sim_sizes=[Attn(1, 1, 1, 4), Attn(1, 2, 33, 8, kind="large"), Attn(2, 1, 17, 4, causal=True),
               Attn(1, 1, 65, 4, kind="growing")],
    hidden_sim_sizes=[Attn(1, 1, 3, 4, causal=True), Attn(1, 2, 40, 4, causal=True, kind="large"),
                      Attn(1, 1, 70, 8, causal=True, kind="growing")],
    hint=_NAIVE_HINT + " No S × S buffer: keep each tile's scores on chip and carry (m, l) and the "
         "output row across tiles, rescaling them when the max grows.",
    max_scratch_bytes=flash_scratch_bytes,
    peer=naive_peer, target=1.0, floor=0.25,
)

# ------------------------------------------------------------------ 03 FA2 on tensor cores (bf16)
FA2_GPU = [Attn(1, 1, 1, 64), Attn(2, 3, 65, 128, causal=True), Attn(2, 3, 1000, 64), Attn(1, 2, 1031, 128, causal=True),
           Attn(1, 2, 65, 64, Sk=1000), Attn(1, 2, 1000, 128, Sk=65), Attn(1, 8, 300, 128, causal=True, Hkv=2),
           Attn(1, 2, 1000, 128, kind="large"), Attn(1, 2, 1031, 64, causal=True, kind="growing"),
           Attn(1, 1, 1031, 128, kind="large_v"), Attn(1, 2, 65, 128, Sk=0)]
FA2_GPU_HIDDEN = [Attn(1, 1, 127, 128, causal=True), Attn(2, 3, 1031, 64, causal=True, kind="large"),
                  Attn(1, 2, 1, 128, Sk=1031), Attn(1, 6, 300, 64, causal=True, Hkv=2), Attn(1, 8, 200, 128, Sk=333, Hkv=2),
                  Attn(1, 1, 1000, 128, causal=True, kind="large_v"), Attn(1, 2, 2048, 128, kind="growing"),
                  Attn(1, 1, 4096, 128, causal=True), Attn(1, 1, 7, 64, Sk=0)]
FA2_BENCH = Attn(4, 32, 4096, 128)

fa2 = Problem(
    name="FA2 bf16",
    make_inputs=attn_inputs_bf16,
    outputs=_attn_outputs(BF16),
    reference=_attn_reference,
    sizes=FA2_GPU, hidden_sizes=FA2_GPU_HIDDEN,
    tolerance=lambda s, dt: bf16_tolerance(_vmax(s.kind), s.keys),
    hint=_NAIVE_HINT + " Query head h reads KV head h / (H / Hkv); Sq may differ from Sk (non-causal); a row "
         "with no key is 0. Accumulate P·V in fp32.",
    bytes_moved=_attn_bytes(2), flops=_attn_flops,
    bench_size=FA2_BENCH, peer=peers.sdpa("flash"), target=0.5, floor=0.05,
    simulator=False, arch="sm_80", arrays="torch",
)
fa2_causal = fa2.variant(name="FA2 bf16 causal", bench_size=FA2_BENCH._replace(causal=True),
                         peer=peers.sdpa("flash", causal=True))


# ------------------------------------------------------------------ 04 decode (bf16)
def _cache_capacity(lens) -> int:
    return max(64, -(-max(lens, default=0) // 64) * 64)


def _decode_q_cache(rng, s: Decode):
    B, cap = len(s.lens), _cache_capacity(s.lens)
    q = to_bf16(_normal(rng, (B, s.Hq, s.d)))
    k = np.full((B, s.Hkv, cap, s.d), BF16_NAN, np.uint16)        # NaN past each sequence's end
    v = np.full_like(k, BF16_NAN)
    for b, L in enumerate(s.lens):
        k[b, :, :L] = to_bf16(_normal(rng, (s.Hkv, L, s.d)))
        v[b, :, :L] = to_bf16(_normal(rng, (s.Hkv, L, s.d)))
    return q, k, v


def decode_inputs(rng, s: Decode) -> dict:
    q, k, v = _decode_q_cache(rng, s)
    return {"q": q, "k_cache": k, "v_cache": v, "seq_lens": np.asarray(s.lens, np.int32)}


def paged_inputs(rng, s: Decode) -> dict:
    """The cache as pages (num_pages, P, Hkv, d) in shuffled order, NaN where unused, and a block
    table (B, max_pages); unused table entries point at NaN pages."""
    q, k, v = _decode_q_cache(rng, s)
    B, P = len(s.lens), s.page
    max_pages = max(1, -(-max(s.lens, default=0) // P))
    n_pages = B * max_pages + 3
    order = rng.permutation(n_pages)
    kp = np.full((n_pages, P, s.Hkv, s.d), BF16_NAN, np.uint16)
    vp = np.full_like(kp, BF16_NAN)
    table = np.empty((B, max_pages), np.int32)
    for b, L in enumerate(s.lens):
        for i in range(max_pages):
            pg = table[b, i] = order[b * max_pages + i]
            lo, hi = i * P, min(L, (i + 1) * P)
            if hi > lo:
                kp[pg, : hi - lo] = k[b, :, lo:hi].transpose(1, 0, 2)
                vp[pg, : hi - lo] = v[b, :, lo:hi].transpose(1, 0, 2)
    return {"q": q, "k_pages": kp, "v_pages": vp, "block_table": table, "seq_lens": np.asarray(s.lens, np.int32)}


def _decode_one(qb, kb, vb, L, scale) -> np.ndarray:
    """One sequence: qb (Hq, d), kb, vb (Hkv, >= L, d) bf16 bits -> (Hq, d) float64."""
    Hq, d = qb.shape
    out = np.zeros((Hq, d))
    if L == 0:
        return out
    G = Hq // kb.shape[0]
    for j in range(kb.shape[0]):
        qs, kk, vv = bf16_to_f64(qb[j * G:(j + 1) * G]), bf16_to_f64(kb[j, :L]), bf16_to_f64(vb[j, :L])
        sc = qs @ kk.T * scale
        p = np.exp(sc - sc.max(axis=-1, keepdims=True))
        out[j * G:(j + 1) * G] = (p / p.sum(axis=-1, keepdims=True)) @ vv
    return out


def decode_reference(q, k_cache, v_cache, seq_lens) -> dict:
    scale = 1.0 / math.sqrt(q.shape[-1])
    return {"o": np.stack([_decode_one(q[b], k_cache[b], v_cache[b], int(L), scale) for b, L in enumerate(seq_lens)])
            if len(seq_lens) else np.zeros(q.shape)}


def paged_reference(q, k_pages, v_pages, block_table, seq_lens) -> dict:
    scale, P = 1.0 / math.sqrt(q.shape[-1]), k_pages.shape[1]
    out = []
    for b, L in enumerate(seq_lens):
        pages = block_table[b, : -(-int(L) // P)]
        kb = k_pages[pages].reshape(-1, *k_pages.shape[2:]).transpose(1, 0, 2)   # (Hkv, pages·P, d)
        vb = v_pages[pages].reshape(-1, *v_pages.shape[2:]).transpose(1, 0, 2)
        out.append(_decode_one(q[b], kb, vb, int(L), scale))
    return {"o": np.stack(out) if out else np.zeros(q.shape)}


def _decode_bytes(s: Decode) -> int:
    # K and V of every cached token read once (2 bytes each), q read, o written, the lengths
    tokens = sum(s.lens)
    table = 4 * sum(-(-L // s.page) for L in s.lens) if s.page else 0
    return 2 * 2 * tokens * s.Hkv * s.d + 2 * 2 * len(s.lens) * s.Hq * s.d + 4 * len(s.lens) + table


DECODE_GPU = [Decode((1, 1031, 777, 64), 8, 2), Decode((300, 0, 1, 65), 32, 8), Decode((1000, 513), 16, 1, 64),
              Decode((1031, 7, 0), 8, 8, 64)]
DECODE_GPU_HIDDEN = [Decode((2049, 3, 100), 32, 8), Decode((0, 0), 8, 2), Decode((4097,), 16, 2),
                     Decode((129, 1, 63, 64, 65), 4, 4, 64), Decode((8192, 1), 32, 8)]
DECODE_BENCH = Decode((8192,) * 8, 32, 8)

_DECODE_HINT = ("o[b, h] = softmax(q[b, h] · K[b, h // G, :L_b]ᵀ / √d) · V[b, h // G, :L_b] with G = Hq / Hkv: "
                "query heads j·G … j·G + G − 1 share KV head j. Only the first L_b tokens count (the cache is NaN "
                "after them; L_b = 0 gives 0); merge split-KV chunks with their log-sum-exp weights.")

decode = Problem(
    name="decode GQA bf16",
    make_inputs=decode_inputs,
    outputs=lambda s, inputs: {"o": ((len(s.lens), s.Hq, s.d), BF16)},
    reference=decode_reference,
    sizes=DECODE_GPU, hidden_sizes=DECODE_GPU_HIDDEN,
    tolerance=lambda s, dt: bf16_tolerance(_vmax(""), max(s.lens, default=0)),
    hint=_DECODE_HINT,
    bytes_moved=_decode_bytes,
    bench_size=DECODE_BENCH, peer=peers.copy(), target=0.6, floor=0.06,
    simulator=False, arch="sm_80", arrays="torch",
)

PAGED_GPU = [Decode((1, 1031, 777, 64), 8, 2, page=16), Decode((300, 0, 65), 32, 8, page=64),
             Decode((1000, 513), 16, 1, 64, page=32)]
PAGED_GPU_HIDDEN = [Decode((2049, 3, 100), 32, 8, page=32), Decode((0, 17), 8, 2, page=16),
                    Decode((129, 1, 63, 64), 4, 4, 64, page=64), Decode((8192, 1), 32, 8, page=16)]

decode_paged = decode.variant(
    name="decode paged bf16",
    make_inputs=paged_inputs, reference=paged_reference,
    sizes=PAGED_GPU, hidden_sizes=PAGED_GPU_HIDDEN,
    hint=_DECODE_HINT + " Token t of sequence b is row t % P of page block_table[b, t // P] (pages in any order).",
    bench_size=DECODE_BENCH._replace(page=16),
)


def _decode_sdpa(backend: str, repeat: bool = False) -> Peer:
    """torch's SDPA on the decode problem's own q and cache (the first max(L) tokens): with
    enable_gqa, or with K and V repeated to Hq heads beforehand (the path that ignores GQA)."""
    def prepare(ctx):
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel

        t = ctx.tensors()
        L = int(t["seq_lens"].max().item())
        q = t["q"].view(torch.bfloat16)[:, :, None, :]                       # (B, Hq, 1, d)
        k, v = (t[n].view(torch.bfloat16)[:, :, :L] for n in ("k_cache", "v_cache"))
        if repeat:
            G = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
        chosen = getattr(SDPBackend, peers.SDPA_BACKENDS[backend])
        f = torch.nn.functional.scaled_dot_product_attention

        def call():
            with sdpa_kernel([chosen]):
                f(q, k, v, enable_gqa=not repeat)
        return call

    return Peer(f"SDPA {backend}" + (" (K/V repeated)" if repeat else " (enable_gqa)"), prepare)


# the decode plot's other rows, measured on the same inputs in the same run
decode_sdpa_best = peers.best("SDPA's best backend", _decode_sdpa("flash"), _decode_sdpa("cudnn"))
decode_sdpa_repeated = peers.best("SDPA with K/V repeated to Hq heads", _decode_sdpa("flash", True),
                                  _decode_sdpa("cudnn", True), _decode_sdpa("efficient", True))


# ------------------------------------------------------------------ 05 MLA decode (bf16)
MLA_DK, MLA_DV = 576, 512


def mla_inputs(rng, s: Mla) -> dict:
    B, cap = len(s.lens), _cache_capacity(s.lens)
    cache = np.full((B, cap, MLA_DK), BF16_NAN, np.uint16)
    for b, L in enumerate(s.lens):
        cache[b, :L] = to_bf16(_normal(rng, (L, MLA_DK)))
    return {"q": to_bf16(_normal(rng, (B, s.Hq, MLA_DK))), "cache": cache, "seq_lens": np.asarray(s.lens, np.int32)}


def mla_reference(q, cache, seq_lens) -> dict:
    out = np.zeros((q.shape[0], q.shape[1], MLA_DV))
    for b, L in enumerate(seq_lens):
        if L:
            c = bf16_to_f64(cache[b, : int(L)])                              # (L, 576)
            sc = bf16_to_f64(q[b]) @ c.T * MLA_SCALE
            p = np.exp(sc - sc.max(axis=-1, keepdims=True))
            out[b] = (p / p.sum(axis=-1, keepdims=True)) @ c[:, :MLA_DV]
    return {"o": out}


def _mla_bytes(s: Mla) -> int:
    # the latent cache read once (576 bf16 a token), q read, o written
    return 2 * MLA_DK * sum(s.lens) + 2 * len(s.lens) * s.Hq * (MLA_DK + MLA_DV) + 4 * len(s.lens)


MLA_GPU = [Mla((1, 1031, 300), 16), Mla((200, 0, 65), 32), Mla((1000,), 24)]
MLA_GPU_HIDDEN = [Mla((2049, 3), 64), Mla((0, 0), 16), Mla((513, 1, 77), 128), Mla((8192,), 16)]
MLA_BENCH = Mla((8192,) * 64, 16)

mla = Problem(
    name="MLA decode bf16",
    make_inputs=mla_inputs,
    outputs=lambda s, inputs: {"o": ((len(s.lens), s.Hq, MLA_DV), BF16)},
    reference=mla_reference,
    sizes=MLA_GPU, hidden_sizes=MLA_GPU_HIDDEN,
    tolerance=lambda s, dt: bf16_tolerance(_vmax(""), max(s.lens, default=0)),
    hint=("o[b, h] = softmax(q[b, h] · cache[b, :L_b]ᵀ / √192) · cache[b, :L_b, :512]: all 576 columns for the "
          "scores, the first 512 (the latent) as values; the cache is NaN past L_b, L_b = 0 gives 0."),
    bytes_moved=_mla_bytes,
    bench_size=MLA_BENCH, peer=peers.copy(), target=0.5, floor=0.05,
    simulator=False, arch="sm_80", arrays="torch",
)

__all__ = ["Attn", "Decode", "Mla", "attention_naive", "flash_attention", "fa2", "fa2_causal", "decode",
           "decode_paged", "mla", "naive_peer", "decode_sdpa_best", "decode_sdpa_repeated", "attention_f64",
           "flash_scratch_bytes", "fa2_launch", "decode_launch", "paged_decode_launch", "mla_launch", "to_bf16",
           "MLA_SCALE"]


_integrity.record_problems(globals())   # the fields checks rely on, before any learner code
