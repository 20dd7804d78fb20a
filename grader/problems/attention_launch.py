"""Launch functions of chapter 04's compiled kernels (lessons 03–05), built from their launch shapes.

Each kernel is configured by a C++ type (grader.cuda.launch) that states its block size, dynamic
shared memory and tiles; these functions read them from the compiled module and derive the grids,
so a lesson's launch cell is one line: ``launch = P.fa2_launch(fa["fa2<V3<128>>"], fa["fa2<V3<64>>"])``.

* :func:`fa2_launch` — FlashAttention-2 forward: one block per (TILE_M query rows, head, batch);
  one kernel per head dimension (the type's TILE_K), picked by the inputs' d.
* :func:`decode_launch`, :func:`paged_decode_launch` — one query token per sequence, split-KV:
  the cache is cut into chunks so that (sequences × KV-head groups × chunks) fill the GPU twice over
  (a group: the KV heads one block takes, its type's TILE_M / 16; one in the lesson's ``Paged``);
  the chunks are merged by a combine kernel (``merge="kernel"``), by the last block of each
  (sequence, KV head) inside the split kernel (``merge="fused"``), or not split (``"none"``).
* :func:`mla_launch` — MLA decode over the latent cache, split-KV and the combine kernel.

The launch functions take torch tensors (the problems say ``arrays="torch"``) and never wait for
the GPU: the split is chosen from the cache's capacity, not from the sequence lengths (reading
them would stall the host). Decode's split-KV scratch (partial outputs, log-sum-exps) is allocated
once per shape (``_partials``; MLA's still comes from torch's caching allocator on every launch); the
fused merge's arrival counters are kept per size (the kernel resets them).
"""
from __future__ import annotations

import functools
import math

LOG2E = 1.4426950408889634
MLA_SCALE = 1.0 / math.sqrt(192)     # DeepSeek-V3: 128 "nope" + 64 rotary dims per head before absorption


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _by_width(kernels, what: str) -> dict:
    """{TILE_K: kernel} of kernels configured by a type (the head dim or merged width they serve)."""
    out = {}
    for k in kernels:
        shape = k.launch_shape
        if shape is None or not shape.tile_k:
            raise ValueError(f"{k.name}: its configuration type must state THREADS, SMEM_BYTES and TILE_K "
                             f"({what}); see grader/include/course.cuh")
        out[shape.tile_k] = k
    return out


def _stub_guard(kernels):
    """A function that refuses to launch when a kernel's %%cuda cell still holds the exercise's stub,
    called first by each launch function: the learner's check then says "not implemented yet" in one
    line before any host work (allocations, the GPU's SM count). Whether a cell is a stub is decided
    once here: a search of the cell's source costs ~20 µs, too much for every timed launch."""
    from grader.cuda.module import refuse_stub
    from grader.cuda.sass import STUB

    stubbed = [k.module for k in kernels if k is not None and STUB in (getattr(k.module, "source", "") or "")]

    def guard():
        for module in stubbed:
            refuse_stub(module)
    return guard


def _pick(by_width: dict, d: int, what: str):
    if d not in by_width:
        raise ValueError(f"no kernel for {what} {d}: compiled for {sorted(by_width)}")
    return by_width[d]


@functools.cache
def sm_count(device: int = 0) -> int:
    import torch

    return torch.cuda.get_device_properties(device).multi_processor_count


def split_chunk(units: int, capacity: int, tile: int, per_sm: int = 2) -> int:
    """Tokens per chunk so that ``units`` (sequences × KV heads, or × head groups) × chunks ≈
    ``per_sm`` blocks on every SM; a multiple of the kernel's token tile, at least one tile."""
    want = max(1, round(sm_count() * per_sm / max(units, 1)))
    return max(tile, cdiv(cdiv(max(capacity, 1), want), tile) * tile)


# ---------------------------------------------------------------- FA2 forward (lesson 03)
def fa2_launch(*kernels):
    """The launch function ``launch(q, k, v, causal, o)`` of ``fa2<Cfg>`` kernels, one per head dim.

    q (B, H, Sq, d), k and v (B, Hkv, Sk, d), o (B, H, Sq, d): bf16 bits in int16 tensors. Grid:
    (Sq / TILE_M, H, B); the kernel takes Sq, Sk, H, Hkv, scale·log2 e and the causal flag."""
    by_d = _by_width(kernels, "the head dimension")
    refuse_stubs = _stub_guard(kernels)

    def launch(q, k, v, causal, o):
        refuse_stubs()
        B, H, Sq, d = q.shape
        Hkv, Sk = k.shape[1], k.shape[2]
        if causal and Sq != Sk:
            raise ValueError("causal attention here needs as many queries as keys")
        kern = _pick(by_d, d, "head dimension")
        if B * H * Sq == 0:
            return
        grid = (cdiv(Sq, kern.launch_shape.tile_m), H, B)
        kern.launch(grid, q, k, v, o, Sq, Sk, H, Hkv, LOG2E / math.sqrt(d), int(bool(causal)))
    launch.__name__ = "launch " + "/".join(k.name for k in kernels)
    return launch


# ---------------------------------------------------------------- decode (lesson 04)
@functools.cache
def _counters(n: int, device: int):
    import torch

    return torch.zeros(n, dtype=torch.int32, device=f"cuda:{device}")


@functools.lru_cache(maxsize=8)
def _partials(B: int, Hq: int, n_splits: int, d: int, device: int):
    """The split-KV partial outputs and log-sum-exps of one shape, allocated once: every launch writes
    them before it reads them (stream order), and two fewer allocations a launch keep a ~70 µs decode
    on an H200 GPU-bound under the judge's back-to-back clock."""
    import torch

    return (torch.empty((B, Hq, n_splits, d), dtype=torch.float32, device=f"cuda:{device}"),
            torch.empty((B, Hq, n_splits), dtype=torch.float32, device=f"cuda:{device}"))


DECODE_HEADS = 16     # query heads a decode block packs per KV head (one m16 tile): TILE_M = 16 · KV heads


def _decode(kernels, combine, merge: str, per_sm: int = 2):
    if merge not in ("none", "kernel", "fused"):
        raise ValueError("merge is 'none', 'kernel' or 'fused'")
    if int(per_sm) != per_sm or per_sm < 1:
        raise ValueError(f"per_sm is a whole number of blocks per SM, at least 1 (got {per_sm!r})")
    by_d = _by_width(kernels, "the head dimension")
    comb = _by_width(combine, "the merged width") if combine else {}
    if merge == "kernel" and not comb:
        raise ValueError("merge='kernel' needs the combine kernels")
    refuse_stubs = _stub_guard(tuple(kernels) + tuple(combine or ()))

    def run(q, kc, vc, table, seq_lens, o, cap, Hkv, page):
        refuse_stubs()
        import torch

        B, Hq, d = q.shape
        kern = _pick(by_d, d, "head dimension")
        shape = kern.launch_shape
        if Hq % Hkv or Hq // Hkv > DECODE_HEADS or shape.tile_m % DECODE_HEADS:
            raise ValueError(f"{Hq} query heads over {Hkv} KV heads: a block packs at most {DECODE_HEADS} per KV head "
                             f"(its type's TILE_M, {shape.tile_m}, is {DECODE_HEADS} × the KV heads it takes)")
        if B == 0:
            return
        groups = cdiv(Hkv, shape.tile_m // DECODE_HEADS)      # blocks per sequence and chunk
        chunk = cap if merge == "none" else split_chunk(B * groups, cap, shape.tile_n, per_sm=per_sm)
        n_splits = max(1, cdiv(cap, chunk))
        if n_splits == 1:
            chunk = max(cap, 1)
        o_part = lse_part = counters = None
        if n_splits > 1:
            o_part, lse_part = _partials(B, Hq, n_splits, d, q.device.index or 0)
            if merge == "fused":
                counters = _counters(B * Hkv, q.device.index or 0)
        shift = int(math.log2(page)) if page else 0
        kern.launch((n_splits, groups, B), q, kc, vc, table, seq_lens, o_part, lse_part, o, counters, Hq, Hkv, cap,
                    shift, chunk, n_splits, LOG2E / math.sqrt(d))
        if n_splits > 1 and merge == "kernel":
            _pick(comb, d, "head dimension").launch((Hq, B), o_part, lse_part, seq_lens, o, Hq, chunk, n_splits)

    return run


def decode_launch(*kernels, combine=(), merge: str = "fused", per_sm: int = 2):
    """``launch(q, k_cache, v_cache, seq_lens, o)`` of ``decode<Cfg>`` kernels over a contiguous cache
    (B, Hkv, CAP, d); ``combine``: the ``combine<Cfg>`` kernels (merge="kernel"); ``per_sm``: the
    blocks per SM the split aims at (:func:`split_chunk`)."""
    run = _decode(kernels, combine, merge, per_sm)

    def launch(q, k_cache, v_cache, seq_lens, o):
        run(q, k_cache, v_cache, None, seq_lens, o, k_cache.shape[2], k_cache.shape[1], 0)
    launch.__name__ = f"launch decode ({merge} merge)"
    return launch


def paged_decode_launch(*kernels, combine=(), merge: str = "fused", per_sm: int = 2):
    """``launch(q, k_pages, v_pages, block_table, seq_lens, o)`` of paged ``decode<Cfg>`` kernels:
    pages (num_pages, P, Hkv, d), P a power of two; block_table (B, max_pages) int32; ``per_sm``
    as for :func:`decode_launch`."""
    run = _decode(kernels, combine, merge, per_sm)

    def launch(q, k_pages, v_pages, block_table, seq_lens, o):
        P = k_pages.shape[1]
        if P & (P - 1):
            raise ValueError(f"page size {P} is not a power of two")
        run(q, k_pages, v_pages, block_table, seq_lens, o, block_table.shape[1] * P, k_pages.shape[2], P)
    launch.__name__ = f"launch paged decode ({merge} merge)"
    return launch


# ---------------------------------------------------------------- MLA decode (lesson 05)
def mla_launch(kernel, combine):
    """``launch(q, cache, seq_lens, o)`` of an ``mla<Cfg>`` kernel: q (B, Hq, 576), cache (B, CAP, 576),
    o (B, Hq, 512); head groups of TILE_M, split-KV (one block per SM), then ``combine``."""
    shape = kernel.launch_shape
    if shape is None or not shape.tile_m:
        raise ValueError(f"{kernel.name}: its configuration type must state THREADS, SMEM_BYTES and TILE_M")
    refuse_stubs = _stub_guard((kernel, combine))

    def launch(q, cache, seq_lens, o):
        refuse_stubs()
        import torch

        B, Hq, _ = q.shape
        cap = cache.shape[1]
        if B == 0:
            return
        groups = cdiv(Hq, shape.tile_m)
        chunk = split_chunk(B * groups, cap, shape.tile_n, per_sm=1)
        n_splits = max(1, cdiv(cap, chunk))
        if n_splits == 1:
            chunk = max(cap, 1)
        o_part = lse_part = None
        if n_splits > 1:
            o_part = torch.empty((B, Hq, n_splits, 512), dtype=torch.float32, device=q.device)
            lse_part = torch.empty((B, Hq, n_splits), dtype=torch.float32, device=q.device)
        kernel.launch((groups, n_splits, B), q, cache, seq_lens, o_part, lse_part, o, Hq, cap, chunk, n_splits,
                      MLA_SCALE * LOG2E)
        if n_splits > 1:
            combine.launch((Hq, B), o_part, lse_part, seq_lens, o, Hq, chunk, n_splits)
    launch.__name__ = f"launch {kernel.name}"
    return launch


__all__ = ["fa2_launch", "decode_launch", "paged_decode_launch", "mla_launch", "split_chunk", "MLA_SCALE"]
