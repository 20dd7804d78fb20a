#!/usr/bin/env python3
"""Chapter 04 attention kernels: build, prove correct, prove the wrong kernels are caught, time.

    python3 harness.py build            # nvcc -cubin every source (kernels + wrong/) into build/
    python3 harness.py check  [--family fa2|decode|mla] [--variant NAME] [--json FILE]
    python3 harness.py wrong            # each wrong/ kernel through the checks, in its own process
    python3 harness.py bench  [--json FILE]
    python3 harness.py all    [--out DIR]   # build, check, wrong, bench; logs under DIR ($OUT)

Kernels are compiled with nvcc into cubins and loaded with cuda.core's ObjectCode; every kernel
has a `<name>_meta` twin that reports its Config (threads, dynamic shared memory, tile sizes):
the launches below derive block, shared memory and grid from it, never from a copy.

Checks: fresh random bf16 inputs, a float64 reference computed by torch from the same bf16
values, outputs prefilled with NaN (an element the kernel does not write fails), and the bf16
output tolerance |out - ref| <= 2^-8 · max|V| + 2^-7 · |ref| (P is rounded to bf16 before P·V: an
error of at most 2^-9 of the largest |v| the row averages; the output rounding is 2^-9 relative).
The LSE must match to 1e-3 + 1e-4 · |ref|; a row that sees no key must give O = 0, LSE = -inf.

Timing: CUDA events around the call only, a warm-up, a 512 MiB buffer written before every
repetition (flushes the 50 MB L2), median of REPS repetitions. Peers (torch SDPA backends, a
device-to-device copy) are timed the same way in the same process.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build"
WRONG = HERE / "wrong"
ARCH = "sm_90a"
NVCC_FLAGS = ["-cubin", f"-gencode=arch=compute_90a,code={ARCH}", "-O3", "-std=c++17", "-Xptxas", "-v"]
FAMILY_SOURCE = {"fa2": "fa2.cu", "decode": "decode.cu", "mla": "mla_decode.cu"}
DEV = "cuda"          # the emulation test (dev only) sets "cpu"
REPS = 30
FLUSH_BYTES = 512 * 2**20
# The timed shapes: FA2 (D, B, H, S); decode (B, Hq, Hkv, D, L) and its page sizes; MLA (B, L, Hq list)
BENCH = dict(fa2=((128, 4, 32, 4096), (64, 4, 32, 4096)), decode=(8, 32, 8, 128, 8192), pages=(16, 64),
             mla=(16, 8192, (16, 32, 64, 128)), copy_elems=2**29)

RTOL = 2.0**-7        # bf16 output: 8 significant bits, with margin
ATOL_V = 2.0**-8      # times max|V|: P rounded to bf16 before P·V


# =================================================================================================
# build
# =================================================================================================
def include_dirs() -> list[Path]:
    """course.cuh: a copy beside the harness (the device carry) or the grader's include folder."""
    cands = [HERE / "include", HERE.parent.parent / "grader" / "include"]
    return [p for p in cands if (p / "course.cuh").exists()][:1] + [HERE]


def all_sources() -> dict[str, Path]:
    """cubin stem -> source: the three kernel files and every wrong/*.cu (stem wrong_<file>)."""
    srcs = {Path(f).stem: HERE / f for f in FAMILY_SOURCE.values()}
    for p in sorted(WRONG.glob("*.cu")):
        srcs["wrong_" + p.stem] = p
    return srcs


def _digest(src: Path) -> str:
    h = hashlib.sha256()
    h.update(" ".join(NVCC_FLAGS).encode())
    for p in [src, *sorted(HERE.glob("*.cuh")), *(d / "course.cuh" for d in include_dirs() if (d / "course.cuh").exists())]:
        h.update(p.read_bytes())
    for m in re.findall(r'#include "([^"]+)"', src.read_text()):       # wrong/*.cu include a kernel file
        p = (src.parent / m).resolve()
        if p.exists():
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def build(force: bool = False, quiet: bool = False) -> dict[str, str]:
    """Compile every source that changed since its cubin was made; returns stem -> status."""
    BUILD.mkdir(exist_ok=True)
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    jobs, status = [], {}
    for stem, src in all_sources().items():
        cub, tag = BUILD / f"{stem}.cubin", BUILD / f"{stem}.hash"
        dg = _digest(src)
        if not force and cub.exists() and tag.exists() and tag.read_text().strip() == dg:
            status[stem] = "cached"
            continue
        cmd = [nvcc, *NVCC_FLAGS, *(f"-I{d}" for d in include_dirs()), str(src), "-o", str(cub)]
        jobs.append((stem, dg, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    for stem, dg, p in jobs:
        out, _ = p.communicate(timeout=600)
        (BUILD / f"{stem}.log").write_text(out)
        if p.returncode == 0:
            (BUILD / f"{stem}.hash").write_text(dg)
            status[stem] = "built"
        else:
            status[stem] = "FAILED"
            print(f"build {stem}: FAILED\n{out[-3000:]}")
    if not quiet:
        print("build:", ", ".join(f"{k} {v}" for k, v in status.items()))
    return status


def ptxas_report(stem: str) -> dict[str, dict]:
    """kernel -> {registers, spill_stores, spill_loads, stack} from the build log (-Xptxas -v)."""
    rep, cur = {}, None
    log = BUILD / f"{stem}.log"
    if not log.exists():
        return rep
    for line in log.read_text().splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            cur = m.group(1)
            rep[cur] = {}
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur:
            rep[cur].update(stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            rep[cur]["registers"] = int(m.group(1))
    return rep


def sass_counts(stem: str) -> dict[str, dict]:
    """kernel -> counts of HMMA, LDSM (plain), LDSM.MT (transposed), LDGSTS, MUFU.EX2, LDL/STL."""
    tool = shutil.which("cuobjdump")
    if tool is None:
        return {}
    out = subprocess.run([tool, "--dump-sass", str(BUILD / f"{stem}.cubin")], capture_output=True, text=True).stdout
    res, cur = {}, None
    for line in out.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            cur = m.group(1)
            res[cur] = {"HMMA": 0, "LDSM": 0, "LDSM.MT": 0, "LDGSTS": 0, "MUFU.EX2": 0, "LDL/STL": 0}
            continue
        m = re.search(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", line)
        if m and cur:
            op, c = m.group(1), res[cur]
            if op.startswith("HMMA"):
                c["HMMA"] += 1
            elif op.startswith("LDSM"):
                c["LDSM.MT" if ".MT" in op else "LDSM"] += 1
            elif op.startswith("LDGSTS"):
                c["LDGSTS"] += 1
            elif op.startswith("MUFU.EX2"):
                c["MUFU.EX2"] += 1
            elif op.split(".")[0] in ("LDL", "STL"):
                c["LDL/STL"] += 1
    return res


# =================================================================================================
# loading and launching (cuda.core)
# =================================================================================================
def _np():
    import numpy as np

    return np


class Module:
    """A cubin loaded through cuda.core; kernels launched on torch's current stream."""

    def __init__(self, stem: str):
        import torch
        try:
            from cuda.core import Device, ObjectCode
        except ImportError:                                    # older cuda-core
            from cuda.core.experimental import Device, ObjectCode
        torch.cuda.init()
        self.dev = Device()
        self.dev.set_current()                                 # the primary context torch uses too
        self.stem = stem
        self.obj = ObjectCode.from_cubin((BUILD / f"{stem}.cubin").read_bytes(), name=stem)
        self._k, self._meta, self._smem = {}, {}, {}

    def kernel(self, name: str):
        if name not in self._k:
            try:
                self._k[name] = self.obj.get_kernel(name)
            except Exception:                                  # some cuda.core versions want bytes
                self._k[name] = self.obj.get_kernel(name.encode())
        return self._k[name]

    def meta(self, name: str) -> list[int]:
        """The Config of kernel `name`, as its `<name>_meta` twin reports it."""
        if name not in self._meta:
            import torch

            buf = torch.full((16,), -1, dtype=torch.int32, device="cuda")
            self.launch(name + "_meta", (1, 1, 1), (1, 1, 1), 0, buf)
            torch.cuda.synchronize()
            self._meta[name] = buf.tolist()
        return self._meta[name]

    def _set_smem(self, name: str, nbytes: int):
        if nbytes <= max(self._smem.get(name, 0), 48 * 1024):
            return
        from cuda.bindings import driver

        handle = self.kernel(name).handle
        attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        if isinstance(handle, driver.CUkernel):
            (err,) = driver.cuKernelSetAttribute(attr, int(nbytes), handle, driver.CUdevice(self.dev.device_id))
        else:
            (err,) = driver.cuFuncSetAttribute(handle, attr, int(nbytes))
        if int(err) != 0:
            raise RuntimeError(f"{name}: cannot set {nbytes} B of dynamic shared memory: {err!r}")
        self._smem[name] = nbytes

    def launch(self, name: str, grid, block, smem: int, *args):
        import torch

        try:
            from cuda.core import LaunchConfig, Stream, launch
        except ImportError:
            from cuda.core.experimental import LaunchConfig, Stream, launch
        np = _np()
        kargs = []
        for a in args:
            if a is None:
                kargs.append(np.uint64(0))
            elif isinstance(a, torch.Tensor):
                kargs.append(np.uint64(a.data_ptr()))
            elif isinstance(a, float):
                kargs.append(np.float32(a))
            elif isinstance(a, (bool, int)):
                kargs.append(np.int32(a))
            else:
                raise TypeError(f"{name}: argument {a!r}")
        self._set_smem(name, smem)
        h = torch.cuda.current_stream().cuda_stream
        stream = self.dev.default_stream if h == 0 else Stream.from_handle(h)
        cfg = LaunchConfig(grid=tuple(grid), block=tuple(block), shmem_size=int(smem))
        launch(stream, cfg, self.kernel(name), *kargs)


_MODULES: dict[str, Module] = {}
VARIANT: dict[str, str] = {}        # family -> cubin stem replacing its correct one (wrong kernels)


def module(family: str) -> Module:
    stem = VARIANT.get(family) or Path(FAMILY_SOURCE[family]).stem
    if stem not in _MODULES:
        _MODULES[stem] = Module(stem)
    return _MODULES[stem]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# =================================================================================================
# the three operations
# =================================================================================================
def fa2_forward(q, k, v, causal: bool, cfg: str, scale: float | None = None, want_lse: bool = True,
                out=None, lse=None):
    """O (B, Hq, Sq, D), LSE (B, Hq, Sq) fp32 = attention of q (B, Hq, Sq, D), k, v (B, Hkv, Sk, D)."""
    import torch

    B, Hq, Sq, D = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    assert k.shape == v.shape and k.shape[0] == B and k.shape[3] == D and Hq % Hkv == 0
    assert not causal or Sq == Sk, "causal needs Sq == Sk"
    mod = module("fa2")
    threads, smem, BR, BC, Dk = mod.meta(cfg)[:5]
    assert Dk == D, f"{cfg} is built for d = {Dk}"
    if out is None:
        out = torch.full_like(q, float("nan"))
    if want_lse and lse is None:
        lse = torch.full((B, Hq, Sq), float("nan"), device=q.device, dtype=torch.float32)
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    mod.launch(cfg, (cdiv(Sq, BR), Hq, B), (threads, 1, 1), smem, q, k, v, out, lse if want_lse else None,
               Sq, Sk, Hq, Hkv, scale * math.log2(math.e), int(causal))
    return out, lse


def default_splits(n_units: int, L: int, BN: int, sms: int = 132, per_sm: int = 2) -> int:
    """Chunk so that (units × splits) fills `per_sm` blocks on every SM, tiles of BN tokens."""
    want = max(1, round(sms * per_sm / max(n_units, 1)))
    chunk = max(BN, cdiv(cdiv(max(L, 1), want), BN) * BN)
    return chunk


def _buf(bufs: dict, key: str, shape, dtype, fill=float("nan")):
    """A cached output/scratch tensor (allocated, and filled, only on first use: timed calls launch
    nothing but the kernels)."""
    import torch

    t = bufs.get(key)
    if t is None or tuple(t.shape) != tuple(shape):
        t = torch.full(shape, fill, device=DEV, dtype=dtype)
        bufs[key] = t
    return t


def decode_forward(q, kc, vc, seq_lens, lens: list[int], cfg: str, chunk: int | None = None,
                   block_table=None, page_size: int | None = None, scale: float | None = None,
                   bufs: dict | None = None, combine: str = "fused"):
    """O (B, Hq, D), LSE (B, Hq) of one query token per sequence over its cache.

    Contiguous cache: kc, vc (B, Hkv, CAP, D). Paged: kc, vc (num_pages, P, Hkv, D) with
    block_table (B, max_pages) int32 and page_size P. `lens` is seq_lens on the host.
    combine: "fused" (the last block of each (sequence, KV head) merges the splits) or "kernel"
    (a second launch, combine_d<D>)."""
    import torch

    B, Hq, D = q.shape
    paged = block_table is not None
    Hkv = kc.shape[2] if paged else kc.shape[1]
    mod = module("decode")
    threads, smem, BN, HEADS, Dk, _, _, PAGED, PT_INTS = mod.meta(cfg)[:9]
    assert Dk == D and bool(PAGED) == paged and Hq % Hkv == 0 and Hq // Hkv <= HEADS, (cfg, Hq, Hkv)
    maxL = max(lens) if lens else 0
    if chunk is None:
        chunk = default_splits(B * Hkv, maxL, BN)
    if paged:
        assert page_size & (page_size - 1) == 0, "page size must be a power of two"
        chunk = min(chunk, (PT_INTS - 1) * page_size // BN * BN)   # page ids of a chunk fit in smem
    n_splits = max(1, cdiv(maxL, chunk))
    if n_splits == 1:
        chunk = max(chunk, maxL)
    cap = block_table.shape[1] if paged else kc.shape[2]
    bufs = {} if bufs is None else bufs
    o = _buf(bufs, "o", (B, Hq, D), torch.bfloat16)
    lse = _buf(bufs, "lse", (B, Hq), torch.float32)
    o_part = lse_part = counters = None
    if n_splits > 1:
        o_part = _buf(bufs, "o_part", (B, Hq, n_splits, D), torch.float32)
        lse_part = _buf(bufs, "lse_part", (B, Hq, n_splits), torch.float32)
        if combine == "fused":
            counters = _buf(bufs, "counters", (B * Hkv,), torch.int32, 0)   # the kernel leaves them 0
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    shift = int(math.log2(page_size)) if paged else 0
    mod.launch(cfg, (n_splits, Hkv, B), (threads, 1, 1), smem, q, kc, vc, block_table, seq_lens, o_part,
               lse_part, o, lse, counters, Hq, Hkv, cap, shift, chunk, n_splits, scale * math.log2(math.e))
    if n_splits > 1 and combine != "fused":
        comb = f"combine_d{D}"
        cthreads, csmem = mod.meta(comb)[:2]
        mod.launch(comb, (Hq, B, 1), (cthreads, 1, 1), csmem, o_part, lse_part, seq_lens, o, lse, Hq, chunk,
                   n_splits)
    return o, lse, n_splits


def mla_forward(q, cache, seq_lens, lens: list[int], cfg: str, chunk: int | None = None,
                scale: float | None = None, bufs: dict | None = None, combine: str = "kernel"):
    """O (B, Hq, 512), LSE (B, Hq) of q (B, Hq, 576) over the latent cache (B, CAP, 576).
    combine: "kernel" (default: a second launch spreads the merge over B · Hq blocks; measured
    faster than "fused" here, whose last block per (sequence, head group) merges HEADS × 512 alone)."""
    import torch

    B, Hq, DK = q.shape
    mod = module("mla")
    threads, smem, BN, HEADS, DKc, _, _, DV = mod.meta(cfg)[:8]
    assert DK == DKc == 576
    HG = cdiv(Hq, HEADS)
    maxL = max(lens) if lens else 0
    if chunk is None:
        chunk = default_splits(B * HG, maxL, BN, per_sm=1)
    n_splits = max(1, cdiv(maxL, chunk))
    if n_splits == 1:
        chunk = max(chunk, maxL)
    bufs = {} if bufs is None else bufs
    o = _buf(bufs, "o", (B, Hq, DV), torch.bfloat16)
    lse = _buf(bufs, "lse", (B, Hq), torch.float32)
    o_part = lse_part = counters = None
    if n_splits > 1:
        o_part = _buf(bufs, "o_part", (B, Hq, n_splits, DV), torch.float32)
        lse_part = _buf(bufs, "lse_part", (B, Hq, n_splits), torch.float32)
        if combine == "fused":
            counters = _buf(bufs, "counters", (B * HG,), torch.int32, 0)
    scale = 1.0 / math.sqrt(192) if scale is None else scale
    mod.launch(cfg, (HG, n_splits, B), (threads, 1, 1), smem, q, cache, seq_lens, o_part, lse_part, o, lse,
               counters, Hq, cache.shape[1], chunk, n_splits, scale * math.log2(math.e))
    if n_splits > 1 and combine != "fused":
        dm = module("decode")                                  # the combine kernel lives in decode.cu
        cthreads, csmem = dm.meta("combine_d512")[:2]
        dm.launch("combine_d512", (Hq, B, 1), (cthreads, 1, 1), csmem, o_part, lse_part, seq_lens, o, lse, Hq,
                  chunk, n_splits)
    return o, lse, n_splits


# =================================================================================================
# references (float64, from the same bf16 values)
# =================================================================================================
def ref_attention(q, k, v, causal: bool, scale: float):
    """q (B, Hq, Sq, D), k, v (B, Hkv, Sk, D) -> O (B, Hq, Sq, D) f64, LSE (B, Hq, Sq) f64."""
    import torch

    q, k, v = q.double(), k.double(), v.double()
    G = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if causal:
        Sq, Sk = s.shape[-2:]
        s = s.masked_fill(torch.ones(Sq, Sk, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None])
    return torch.einsum("bhqk,bhkd->bhqd", p, v), lse


def ref_decode(q, K, V, lens, scale):
    """q (B, Hq, D); K, V (B, Hkv, CAP, D) contiguous; per-sequence lengths -> O (B, Hq, D), LSE (B, Hq)."""
    import torch

    B, Hq, D = q.shape
    o = torch.zeros(B, Hq, D, dtype=torch.float64, device=q.device)
    lse = torch.full((B, Hq), float("-inf"), dtype=torch.float64, device=q.device)
    for b, L in enumerate(lens):
        if L == 0:
            continue
        ob, lb = ref_attention(q[b:b + 1, :, None, :], K[b:b + 1, :, :L], V[b:b + 1, :, :L], False, scale)
        o[b], lse[b] = ob[0, :, 0], lb[0, :, 0]
    return o, lse


def ref_mla(q, cache, lens, scale):
    """q (B, Hq, 576), cache (B, CAP, 576) -> O (B, Hq, 512), LSE (B, Hq)."""
    import torch

    B, Hq, _ = q.shape
    o = torch.zeros(B, Hq, 512, dtype=torch.float64, device=q.device)
    lse = torch.full((B, Hq), float("-inf"), dtype=torch.float64, device=q.device)
    for b, L in enumerate(lens):
        if L == 0:
            continue
        c = cache[b, :L].double()
        s = q[b].double() @ c.T * scale                       # (Hq, L)
        lb = torch.logsumexp(s, dim=-1)
        o[b], lse[b] = torch.exp(s - lb[:, None]) @ c[:, :512], lb
    return o, lse


def compare(out, ref, lse=None, lse_ref=None, vmax: float = 1.0) -> tuple[bool, str]:
    """(ok, reason): reason 'nonfinite ...' (NaN/inf, unwritten elements included) or 'mismatch ...'."""
    import torch

    out = out.double()
    bad_nf = int((~torch.isfinite(out)).sum())
    if bad_nf:
        return False, f"nonfinite: {bad_nf} of {out.numel()} output elements are NaN/inf"
    err = (out - ref).abs()
    tol = ATOL_V * vmax + RTOL * ref.abs()
    worst = float((err / tol).max()) if err.numel() else 0.0
    nbad = int((err > tol).sum())
    if nbad:
        i = int((err - tol).argmax())
        return False, (f"mismatch: {nbad} of {out.numel()} elements out of tolerance; worst at flat index {i}: "
                       f"got {out.flatten()[i].item():.5g}, want {ref.flatten()[i].item():.5g} (tol {tol.flatten()[i].item():.3g})")
    if lse is not None:
        lse = lse.double()
        both_inf = torch.isneginf(lse) & torch.isneginf(lse_ref)
        if int(torch.isnan(lse).sum()):
            return False, f"nonfinite: {int(torch.isnan(lse).sum())} LSE values are NaN"
        e = torch.where(both_inf, torch.zeros_like(lse), (lse - lse_ref).abs())
        e = torch.nan_to_num(e, nan=float("inf"))
        nbad = int((e > 1e-3 + 1e-4 * lse_ref.abs().nan_to_num(posinf=0, neginf=0)).sum())
        if nbad:
            i = int(e.argmax())
            return False, (f"mismatch: {nbad} LSE values off; worst got {lse.flatten()[i].item():.6g}, "
                           f"want {lse_ref.flatten()[i].item():.6g}")
    return True, f"ok (max err/tol {worst:.3f})"


# =================================================================================================
# tests
# =================================================================================================
FA2_CFGS = {128: ["fa2_d128_a", "fa2_d128_b", "fa2_d128_c", "fa2_d128_d", "fa2_d128_e"],
            64: ["fa2_d64_a", "fa2_d64_b", "fa2_d64_c", "fa2_d64_d"]}
DEC_CFGS = {(128, False): ["dec_d128_a", "dec_d128_b", "dec_d128_c"], (64, False): ["dec_d64_a"],
            (128, True): ["pdec_d128_a", "pdec_d128_b", "pdec_d128_c"], (64, True): ["pdec_d64_a"]}
DEC_M2 = "dec_d128_m2"
MLA_CFGS = {16: ["mla_h16_a", "mla_h16_b", "mla_h16_c"], 32: ["mla_h32_a", "mla_h32_b"]}


def _gen():
    import torch

    g = torch.Generator(device=DEV)
    g.manual_seed(int.from_bytes(os.urandom(4), "little"))   # fresh inputs on every run
    return g


def randn(shape, gen, scale=1.0, shift=0.0):
    import torch

    return (torch.randn(shape, device=DEV, generator=gen, dtype=torch.float32) * scale + shift).to(torch.bfloat16)


def fa2_tests(all_cfgs: bool):
    """(name, thunk) pairs; each thunk returns (ok, reason)."""
    import torch

    tests = []
    for D in (64, 128):
        cfgs = FA2_CFGS[D] if all_cfgs else FA2_CFGS[D][:1]
        for cfg in cfgs:
            def case(cfg=cfg, D=D, B=2, Hq=3, Hkv=3, Sq=1, Sk=1, causal=False, kind="normal"):
                def run():
                    gen = _gen()
                    scale = 1.0 / math.sqrt(D)
                    if kind == "large-logits":
                        # integer q, k in [-16, 16]: every partial sum of q·k is exact in fp32 (no
                        # order-dependent rounding for exp to amplify); scale 10 makes logits ~1e4
                        q = randint((B, Hq, Sq, D), gen)
                        k = randint((B, Hkv, Sk, D), gen)
                        v = randn((B, Hkv, Sk, D), gen)
                        scale = 10.0
                    elif kind == "growing":
                        # key norms grow along the sequence: every row's max keeps rising, far past
                        # the lazy-rescale threshold, so the running output must be rescaled often
                        q = randn((B, Hq, Sq, D), gen)
                        ramp = torch.linspace(0.5, 6.0, Sk, device=DEV)[None, None, :, None]
                        k = (torch.randn((B, Hkv, Sk, D), device=DEV, generator=gen) * ramp).to(torch.bfloat16)
                        v = randn((B, Hkv, Sk, D), gen)
                    elif kind == "large-v":
                        # near-uniform attention over values ~200: the unnormalized P·V sum is ~2e5
                        q = randn((B, Hq, Sq, D), gen, 0.05)
                        k = randn((B, Hkv, Sk, D), gen, 0.05)
                        v = randn((B, Hkv, Sk, D), gen, 50.0, 200.0)
                    else:
                        q = randn((B, Hq, Sq, D), gen)
                        k = randn((B, Hkv, Sk, D), gen)
                        v = randn((B, Hkv, Sk, D), gen)
                    # K and V sit in front of a NaN guard: rows past Sk of the last head are poison
                    guard = 128 * D
                    kb = torch_full_nan(k.numel() + guard)
                    vb = torch_full_nan(v.numel() + guard)
                    kb[: k.numel()] = k.flatten()
                    vb[: v.numel()] = v.flatten()
                    k2, v2 = kb[: k.numel()].view(k.shape), vb[: v.numel()].view(v.shape)
                    o, lse = fa2_forward(q, k2, v2, causal, cfg, scale)
                    ro, rl = ref_attention(q, k, v, causal, scale)
                    vmax = float(v.float().abs().max()) if v.numel() else 1.0
                    return compare(o, ro, lse, rl, vmax=vmax)
                return run
            for causal in (False, True):
                for S in (1, 65, 127, 1000, 1031):
                    tests.append((f"fa2/{cfg}/{'causal' if causal else 'full'}/S{S}", case(Sq=S, Sk=S, causal=causal)))
            for Sq, Sk in ((65, 1000), (1000, 65), (1, 1031), (127, 1), (65, 0)):
                tests.append((f"fa2/{cfg}/full/Sq{Sq}-Sk{Sk}", case(Sq=Sq, Sk=Sk)))
            tests.append((f"fa2/{cfg}/gqa/causal/S300", case(Hq=6, Hkv=2, Sq=300, Sk=300, causal=True)))
            tests.append((f"fa2/{cfg}/gqa/full/Sq200-Sk333", case(B=1, Hq=8, Hkv=2, Sq=200, Sk=333)))
            tests.append((f"fa2/{cfg}/large-logits/full/S1000", case(Sq=1000, Sk=1000, kind="large-logits")))
            tests.append((f"fa2/{cfg}/large-logits/causal/S1031", case(Sq=1031, Sk=1031, causal=True, kind="large-logits")))
            tests.append((f"fa2/{cfg}/growing/full/S1031", case(Sq=1031, Sk=1031, kind="growing")))
            tests.append((f"fa2/{cfg}/growing/causal/S1031", case(Sq=1031, Sk=1031, causal=True, kind="growing")))
            tests.append((f"fa2/{cfg}/large-v/full/S1031", case(Sq=1031, Sk=1031, kind="large-v")))
            tests.append((f"fa2/{cfg}/large-v/causal/S1000", case(Sq=1000, Sk=1000, causal=True, kind="large-v")))
    return tests


def randint(shape, gen, lo=-16, hi=16):
    import torch

    return torch.randint(lo, hi + 1, shape, device=DEV, generator=gen).to(torch.bfloat16)


def torch_full_nan(n):
    import torch

    return torch.full((n,), float("nan"), device=DEV, dtype=torch.bfloat16)


def make_cache(B, Hkv, D, lens, gen, guard=128):
    """K, V (B, Hkv, CAP, D): random for the first L_b tokens, NaN after (an unused cache is poison)."""
    import torch

    cap = max(lens) + guard
    K = torch.full((B, Hkv, cap, D), float("nan"), device=DEV, dtype=torch.bfloat16)
    V = torch.full_like(K, float("nan"))
    for b, L in enumerate(lens):
        K[b, :, :L] = randn((Hkv, L, D), gen)
        V[b, :, :L] = randn((Hkv, L, D), gen)
    return K, V


def page_cache(K, V, lens, P, gen, shuffle=True, extra_pages=5):
    """The same cache as pages (num_pages, P, Hkv, D) and a block table (B, max_pages).

    Unused pages and the unused tail of each last page are NaN; unused table entries point at
    poison pages. shuffle=False lays sequence b's pages at b · max_pages + i (the 'contiguous' order
    a kernel that ignores the table would assume)."""
    import torch

    B, Hkv, _, D = K.shape
    max_pages = max(1, cdiv(max(lens), P))
    n_pages = B * max_pages + extra_pages
    perm = torch.randperm(n_pages, generator=torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little")))
    if not shuffle:
        perm = torch.arange(n_pages)
    KP = torch.full((n_pages, P, Hkv, D), float("nan"), device=DEV, dtype=torch.bfloat16)
    VP = torch.full_like(KP, float("nan"))
    table = torch.empty((B, max_pages), dtype=torch.int32)
    for b, L in enumerate(lens):
        for i in range(max_pages):
            pg = int(perm[b * max_pages + i])
            table[b, i] = pg
            lo, hi = i * P, min(L, (i + 1) * P)
            if hi > lo:
                KP[pg, : hi - lo] = K[b, :, lo:hi].transpose(0, 1)
                VP[pg, : hi - lo] = V[b, :, lo:hi].transpose(0, 1)
    return KP, VP, table.to(DEV)


def decode_tests(all_cfgs: bool):
    import torch

    tests = []

    def case(cfg, D, Hq, Hkv, lens, chunk=None, paged=None, shuffle=True, combine="fused"):
        def run():
            gen = _gen()
            B = len(lens)
            q = randn((B, Hq, D), gen)
            K, V = make_cache(B, Hkv, D, lens, gen)
            sl = torch.tensor(lens, dtype=torch.int32, device=DEV)
            scale = 1.0 / math.sqrt(D)
            if paged:
                KP, VP, table = page_cache(K, V, lens, paged, gen, shuffle)
                o, lse, ns = decode_forward(q, KP, VP, sl, lens, cfg, chunk, table, paged, scale, combine=combine)
            else:
                o, lse, ns = decode_forward(q, K, V, sl, lens, cfg, chunk, scale=scale, combine=combine)
            ro, rl = ref_decode(q, K.nan_to_num(0.0), V.nan_to_num(0.0), lens, scale)
            vmax = max([float(V[b, :, :L].float().abs().max()) for b, L in enumerate(lens) if L] + [1.0])
            ok, why = compare(o, ro, lse, rl, vmax=vmax)
            return ok, why + f" [{ns} splits]"
        return run

    lens_ragged = [1, 1031, 777, 64]
    for D in (128, 64):
        for paged in (None, 16, 32, 64):
            cfgs = DEC_CFGS[(D, bool(paged))]
            cfgs = cfgs if all_cfgs else cfgs[:1]
            if paged and D == 64 and paged != 16:
                continue
            for cfg in cfgs:
                kind = f"paged{paged}" if paged else "contig"
                for Hq, Hkv in ((8, 2), (8, 8), (16, 1), (32, 8)):
                    for chunk, cname in ((64, "split64"), (256, "split256"), (None, "auto"), (4096, "nosplit")):
                        tests.append((f"dec/{cfg}/{kind}/Hq{Hq}-Hkv{Hkv}/{cname}/ragged",
                                      case(cfg, D, Hq, Hkv, lens_ragged, chunk, paged)))
                tests.append((f"dec/{cfg}/{kind}/Hq8-Hkv2/split64-kernel/ragged",
                              case(cfg, D, 8, 2, lens_ragged, 64, paged, combine="kernel")))
                tests.append((f"dec/{cfg}/{kind}/Hq8-Hkv2/split256/empty-seq",
                              case(cfg, D, 8, 2, [0, 300, 1, 0], 256, paged)))
                tests.append((f"dec/{cfg}/{kind}/Hq8-Hkv2/split256-kernel/empty-seq",
                              case(cfg, D, 8, 2, [0, 300, 1, 0], 256, paged, combine="kernel")))
                tests.append((f"dec/{cfg}/{kind}/Hq8-Hkv2/nosplit/empty-seq",
                              case(cfg, D, 8, 2, [0, 300, 1, 0], 4096, paged)))
                if paged:
                    tests.append((f"dec/{cfg}/paged{paged}-inorder/Hq8-Hkv2/split256/ragged",
                                  case(cfg, D, 8, 2, lens_ragged, 256, paged, shuffle=False)))
    tests.append((f"dec/{DEC_M2}/contig/Hq32-Hkv1/split256/ragged", case(DEC_M2, 128, 32, 1, lens_ragged, 256)))
    tests.append((f"dec/{DEC_M2}/contig/Hq64-Hkv2/auto/ragged", case(DEC_M2, 128, 64, 2, lens_ragged)))
    return tests


def mla_tests(all_cfgs: bool):
    import torch

    tests = []

    def case(cfg, Hq, lens, chunk=None, combine="fused"):
        def run():
            gen = _gen()
            B = len(lens)
            cap = max(lens) + 128
            q = randn((B, Hq, 576), gen)
            cache = torch.full((B, cap, 576), float("nan"), device=DEV, dtype=torch.bfloat16)
            for b, L in enumerate(lens):
                cache[b, :L] = randn((L, 576), gen)
            sl = torch.tensor(lens, dtype=torch.int32, device=DEV)
            scale = 1.0 / math.sqrt(192)
            o, lse, ns = mla_forward(q, cache, sl, lens, cfg, chunk, scale, combine=combine)
            ro, rl = ref_mla(q, cache.nan_to_num(0.0), lens, scale)
            vmax = max([float(cache[b, :L, :512].float().abs().max()) for b, L in enumerate(lens) if L] + [1.0])
            ok, why = compare(o, ro, lse, rl, vmax=vmax)
            return ok, why + f" [{ns} splits]"
        return run

    for hb, cfgs in MLA_CFGS.items():
        cfgs = cfgs if all_cfgs else cfgs[:1]
        for cfg in cfgs:
            for Hq in sorted({hb, 2 * hb, 128} | ({24} if hb == 16 else set())):
                for chunk, cname in ((64, "split64"), (None, "auto"), (4096, "nosplit")):
                    tests.append((f"mla/{cfg}/Hq{Hq}/{cname}/ragged", case(cfg, Hq, [1, 1031, 300], chunk)))
            tests.append((f"mla/{cfg}/Hq{hb}/split64-kernel/ragged", case(cfg, hb, [1, 1031, 300], 64, "kernel")))
            tests.append((f"mla/{cfg}/Hq{hb}/split64/empty-seq", case(cfg, hb, [0, 200, 0], 64)))
            tests.append((f"mla/{cfg}/Hq{hb}/nosplit/empty-seq", case(cfg, hb, [0, 200, 0], 4096)))
    return tests


FAMILY_TESTS = {"fa2": fa2_tests, "decode": decode_tests, "mla": mla_tests}


def run_checks(families, all_cfgs=True, log=print) -> list[dict]:
    import torch

    results = []
    for fam in families:
        for name, fn in FAMILY_TESTS[fam](all_cfgs):
            t = time.time()
            try:
                ok, why = fn()
                if DEV == "cuda":
                    torch.cuda.synchronize()
            except Exception as e:                            # a launch error fails the test, loudly
                ok, why = False, f"error: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            results.append(dict(name=name, ok=ok, reason=why, seconds=round(time.time() - t, 3)))
            log(f"{'PASS' if ok else 'FAIL'} {name}: {why}")
            if why.startswith("error:") and "CUDA" in why.upper() and "illegal" in why.lower():
                log("sticky CUDA error: stopping this process")
                return results
    return results


# =================================================================================================
# wrong kernels
# =================================================================================================
def wrong_variants() -> list[dict]:
    """From wrong/*.cu: family (first `#include "../X.cu"`), and every `// expect: PREFIX REASON` line."""
    out = []
    fam_of = {v: k for k, v in FAMILY_SOURCE.items()}
    for p in sorted(WRONG.glob("*.cu")):
        txt = p.read_text()
        inc = re.search(r'#include "\.\./([\w.]+)"', txt)
        exp = re.findall(r"^// expect: (\S+) ([\w|]+)", txt, flags=re.M)
        what = re.search(r"^// wrong: (.*)$", txt, flags=re.M)
        out.append(dict(stem="wrong_" + p.stem, family=fam_of[inc.group(1)], expect=exp,
                        what=what.group(1) if what else p.stem))
    return out


def judge_wrong(v: dict, results: list[dict]) -> tuple[bool, list[str]]:
    """Caught iff, for every expect line, some test named PREFIX... failed with a REASON... reason."""
    lines, caught = [], True
    for prefix, reason in v["expect"]:
        hits = [r for r in results if r["name"].startswith(prefix) and not r["ok"]
                and any(r["reason"].startswith(x) for x in reason.split("|"))]
        if hits:
            lines.append(f"  FAILED (as expected) {hits[0]['name']}: {hits[0]['reason'][:160]}  "
                         f"[{len(hits)} of {sum(r['name'].startswith(prefix) for r in results)} '{prefix}' tests]")
        else:
            caught = False
            lines.append(f"  NOT CAUGHT: no '{prefix}' test failed with '{reason}'")
    passed = sum(r["ok"] for r in results)
    lines.append(f"  ({passed} of {len(results)} tests of the family still pass: the failure is specific)")
    return caught, lines


def run_wrong(out_dir: Path, parallel: int = 4, timeout: int = 75) -> list[dict]:
    variants = wrong_variants()
    procs, res = [], []
    for v in variants:
        js = out_dir / f"{v['stem']}.json"
        cmd = [sys.executable, str(HERE / "harness.py"), "check", "--family", v["family"], "--variant", v["stem"],
               "--json", str(js), "--quick"]
        procs.append((v, js, cmd))
    running = []
    while procs or running:
        while procs and len(running) < parallel:
            v, js, cmd = procs.pop(0)
            logf = open(out_dir / f"{v['stem']}.log", "w")
            running.append((v, js, subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT), time.time(), logf))
        for item in list(running):
            v, js, p, t0, logf = item
            if p.poll() is None and time.time() - t0 < timeout:
                continue
            if p.poll() is None:
                p.kill()
            p.wait()
            logf.close()
            running.remove(item)
            results = json.loads(js.read_text()) if js.exists() else []
            caught, lines = judge_wrong(v, results)
            res.append(dict(stem=v["stem"], what=v["what"], caught=caught, lines=lines, rc=p.returncode))
        time.sleep(0.2)
    res.sort(key=lambda r: r["stem"])
    for r in res:
        print(f"{r['stem']}: {r['what']} -> {'CAUGHT' if r['caught'] else 'NOT CAUGHT'} (rc {r['rc']})")
        for line in r["lines"]:
            print(line)
    return res


# =================================================================================================
# timing
# =================================================================================================
def sync():
    import torch

    if DEV == "cuda":
        torch.cuda.synchronize()


class Timer:
    """Median of `reps` event-timed calls, the L2 flushed before each by writing FLUSH_BYTES (the
    course's method). clean=True also reads a second FLUSH_BYTES buffer after the write, so the L2
    holds clean lines: the timed call then pays no write-back of the flush's dirty lines (up to the
    50 MB L2 of an H100, ~17 µs at 3 TB/s) -- a diagnostic, reported beside the prescribed figure."""

    def __init__(self):
        import torch

        self.flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
        self.flush2 = None

    def __call__(self, fn, reps: int = REPS, warmup: int = 3, clean: bool = False) -> dict:
        import torch

        if clean and self.flush2 is None:
            self.flush2 = torch.ones(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for s, e in ev:
            self.flush.fill_(1)                                # evict the L2 (and give the CPU a head start)
            if clean:
                self.flush2.sum()                              # ... and leave it holding clean lines
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        ts = sorted(s.elapsed_time(e) * 1e-3 for s, e in ev)
        med = ts[len(ts) // 2]
        return dict(median_s=med, min_s=ts[0], p90_s=ts[int(0.9 * (len(ts) - 1))], reps=reps)


# The reference configuration of each kernel: timed with REF_REPS repetitions, in both flush modes,
# and quoted in the summary. Device run 3 (NOTES.md) timed fa2_d128_a and the MLA 64/128-head rows
# with the fused merge as references; the sweep of that run (and of run 2, for fa2_d128_b) put
# fa2_d128_b and the combine kernel ahead, so those are the references from now on.
REFERENCE = {"fa2": {128: "fa2_d128_b", 64: "fa2_d64_a"},
             "decode": ("dec_d128_b", None, "fused"), "paged": ("pdec_d128_b", None, "fused"),
             "mla": {16: ("mla_h16_a", None, "kernel"), 32: ("mla_h16_a", None, "kernel"),
                     64: ("mla_h32_b", None, "kernel"), 128: ("mla_h32_b", None, "kernel")}}
REF_REPS = 60
SWEEP_REPS = 20


def bench(log=print) -> dict:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    T = Timer()
    props = torch.cuda.get_device_properties(0) if DEV == "cuda" else None
    res = dict(device=props.name if props else "cpu", sms=props.multi_processor_count if props else 0,
               date=time.strftime("%Y-%m-%d %H:%M:%S"), torch=torch.__version__, rows=[])
    rows = res["rows"]

    def add(group, name, t, flops=None, nbytes=None, note="", ref=False):
        r = dict(group=group, name=name, ms=t["median_s"] * 1e3, min_ms=t["min_s"] * 1e3, p90_ms=t["p90_s"] * 1e3,
                 note=note, ref=ref, reps=t["reps"])
        if flops:
            r["tflops"] = flops / t["median_s"] / 1e12
        if nbytes:
            r["gbs"] = nbytes / t["median_s"] / 1e9
        rows.append(r)
        log(f"{group:28s} {name:34s} {r['ms']:9.4f} ms  "
            + (f"{r['tflops']:7.1f} TFLOP/s " if flops else "") + (f"{r['gbs']:7.0f} GB/s " if nbytes else "") + note)
        return r

    def copy_bw(tag, clean=False):
        src = torch.randn(BENCH["copy_elems"], device=DEV, dtype=torch.bfloat16)   # 1 GiB
        dst = torch.empty_like(src)
        t = T(lambda: dst.copy_(src), clean=clean)
        del src, dst
        return add("copy-clean" if clean else "copy", f"d2d copy {BENCH['copy_elems'] * 2 / 2**30:.2f} GiB ({tag})",
                   t, nbytes=4 * BENCH["copy_elems"], note="bytes read + written")

    copies = [copy_bw("start")]
    gen = torch.Generator(device=DEV)
    gen.manual_seed(1234)

    # ---- FA2 against the SDPA backends ------------------------------------------------------------
    backends = [("sdpa-flash", SDPBackend.FLASH_ATTENTION), ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION),
                ("sdpa-efficient", SDPBackend.EFFICIENT_ATTENTION)]
    for D, B, H, S in BENCH["fa2"]:
        q = torch.randn(B, H, S, D, device=DEV, generator=gen).to(torch.bfloat16)
        k = torch.randn(B, H, S, D, device=DEV, generator=gen).to(torch.bfloat16)
        v = torch.randn(B, H, S, D, device=DEV, generator=gen).to(torch.bfloat16)
        for causal in (False, True):
            grp = f"fa2 d{D} S{S} B{B} H{H} {'causal' if causal else 'full'}"
            flops = 4 * B * H * S * S * D / (2 if causal else 1)
            for cfg in FA2_CFGS[D]:
                try:
                    o = torch.full_like(q, float("nan"))
                    lse = torch.empty(B, H, S, device=DEV, dtype=torch.float32)
                    o, lse = fa2_forward(q, k, v, causal, cfg, out=o, lse=lse)
                    sync()
                    # proof at the timed shape: first and last (batch, head) against float64
                    ok = True
                    for b, h in ((0, 0), (B - 1, H - 1)):
                        ro, rl = ref_attention(q[b:b + 1, h:h + 1], k[b:b + 1, h:h + 1], v[b:b + 1, h:h + 1], causal,
                                               1 / math.sqrt(D))
                        ok_bh, why = compare(o[b:b + 1, h:h + 1], ro, lse[b:b + 1, h:h + 1], rl,
                                             vmax=float(v[b, h].float().abs().max()))
                        ok &= ok_bh
                    ref = cfg == REFERENCE["fa2"][D]
                    t = T(lambda: fa2_forward(q, k, v, causal, cfg, out=o, lse=lse), reps=REF_REPS if ref else SWEEP_REPS)
                    add(grp, cfg, t, flops=flops, note="" if ok else f"CHECK FAILED: {why}", ref=ref)
                except Exception as e:
                    log(f"{grp} {cfg}: error {e!r}")
            for bname, be in backends:
                try:
                    with sdpa_kernel([be]):
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        t = T(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), reps=REF_REPS)
                    add(grp, bname, t, flops=flops)
                except Exception as e:
                    log(f"{grp} {bname}: unavailable ({str(e).splitlines()[0][:120] if str(e) else type(e).__name__})")
        del q, k, v
        if DEV == "cuda":
            torch.cuda.empty_cache()

    copies.append(copy_bw("middle"))

    # ---- decode: B=8, L=8192, 32 query heads / 8 KV heads, d=128 ----------------------------------
    B, Hq, Hkv, D, L = BENCH["decode"]
    q = torch.randn(B, Hq, D, device=DEV, generator=gen).to(torch.bfloat16)
    K = torch.randn(B, Hkv, L, D, device=DEV, generator=gen).to(torch.bfloat16)
    V = torch.randn(B, Hkv, L, D, device=DEV, generator=gen).to(torch.bfloat16)
    lens = [L] * B
    sl = torch.tensor(lens, dtype=torch.int32, device=DEV)
    kv_bytes = 2 * B * Hkv * L * D * 2                    # K + V, bf16
    io_bytes = 2 * B * Hq * D * 2                         # q read + o written
    nbytes = kv_bytes + io_bytes
    grp = f"decode B{B} L{L} Hq{Hq}/Hkv{Hkv} d{D}"
    ro, rl = ref_decode(q, K, V, lens, 1 / math.sqrt(D))
    runs = [(cfg, chunk, "fused") for cfg in DEC_CFGS[(128, False)] for chunk in (None, 1024, 2048)]
    runs += [(cfg, None, "kernel") for cfg in DEC_CFGS[(128, False)]]
    for clean in (False, True):
        g2 = grp + (" [clean-L2 flush]" if clean else "")
        for cfg, chunk, comb in runs:
            ref = (cfg, chunk, comb) == REFERENCE["decode"]
            if clean and not ref:
                continue
            try:
                bufs = {}
                o, lse, ns = decode_forward(q, K, V, sl, lens, cfg, chunk, bufs=bufs, combine=comb)
                sync()
                ok, why = compare(o, ro, lse, rl, vmax=float(V.float().abs().max()))
                t = T(lambda: decode_forward(q, K, V, sl, lens, cfg, chunk, bufs=bufs, combine=comb),
                      reps=REF_REPS if ref else SWEEP_REPS, clean=clean)
                add(g2, f"{cfg} chunk={chunk or 'auto'} ({ns} splits, {comb} combine)", t, nbytes=nbytes,
                    note="" if ok else f"CHECK FAILED: {why}", ref=ref)
            except Exception as e:
                log(f"{grp} {cfg} {chunk}: error {e!r}")
    q4, K4, V4 = q[:, :, None, :], K, V
    for clean in (False, True):
        g2 = grp + (" [clean-L2 flush]" if clean else "")
        for bname, be in backends + ([] if clean else [("sdpa-math", SDPBackend.MATH)]):
            try:
                with sdpa_kernel([be]):
                    so = F.scaled_dot_product_attention(q4, K4, V4, enable_gqa=True)
                    sync()
                    ok, why = compare(so[:, :, 0], ro, vmax=float(V.float().abs().max()))
                    t = T(lambda: F.scaled_dot_product_attention(q4, K4, V4, enable_gqa=True),
                          reps=REF_REPS if bname != "sdpa-math" else 5, clean=clean)
                add(g2, f"{bname} (enable_gqa)", t, nbytes=nbytes, note="" if ok else f"peer off: {why[:80]}")
            except Exception as e:
                log(f"{grp} {bname}: unavailable ({str(e).splitlines()[0][:120] if str(e) else type(e).__name__})")
    Kr, Vr = K.repeat_interleave(Hq // Hkv, dim=1), V.repeat_interleave(Hq // Hkv, dim=1)
    for bname, be in backends:
        try:
            with sdpa_kernel([be]):
                F.scaled_dot_product_attention(q4, Kr, Vr)
                t = T(lambda: F.scaled_dot_product_attention(q4, Kr, Vr), reps=SWEEP_REPS)
            add(grp, f"{bname} (K/V repeated to {Hq} heads)", t, nbytes=nbytes,
                note=f"reads {4 * kv_bytes / 1e9:.2f} GB of K/V")
        except Exception as e:
            log(f"{grp} {bname} repeated: unavailable ({str(e).splitlines()[0][:120] if str(e) else type(e).__name__})")
    del Kr, Vr
    # paged: the same cache in shuffled pages
    for P in BENCH["pages"]:
        KP, VP, table = page_cache(K, V, lens, P, gen, shuffle=True, extra_pages=3)
        pg = f"paged P{P} B{B} L{L} Hq{Hq}/Hkv{Hkv} d{D}"
        runs = [(cfg, chunk, "fused") for cfg in DEC_CFGS[(128, True)] for chunk in (None, 2048)]
        runs += [(DEC_CFGS[(128, True)][1], None, "kernel")]
        for clean in (False, True):
            g2 = pg + (" [clean-L2 flush]" if clean else "")
            for cfg, chunk, comb in runs:
                ref = (cfg, chunk, comb) == REFERENCE["paged"]
                if clean and not ref:
                    continue
                try:
                    bufs = {}
                    o, lse, ns = decode_forward(q, KP, VP, sl, lens, cfg, chunk, table, P, bufs=bufs, combine=comb)
                    sync()
                    ok, why = compare(o, ro, lse, rl, vmax=float(V.float().abs().max()))
                    t = T(lambda: decode_forward(q, KP, VP, sl, lens, cfg, chunk, table, P, bufs=bufs, combine=comb),
                          reps=REF_REPS if ref else SWEEP_REPS, clean=clean)
                    add(g2, f"{cfg} chunk={chunk or 'auto'} ({ns} splits, {comb} combine)", t, nbytes=nbytes,
                        note="" if ok else f"CHECK FAILED: {why}", ref=ref)
                except Exception as e:
                    log(f"{pg} {cfg} {chunk}: error {e!r}")
        del KP, VP
    del K, V, ro, rl
    if DEV == "cuda":
        torch.cuda.empty_cache()

    # ---- MLA decode: one 576-wide latent per token; BENCH["mla"] (B, L, heads), then a 4x batch ---------
    B0, L, mla_heads = BENCH["mla"]
    for B, heads in ((B0, mla_heads), (4 * B0, tuple(h for h in mla_heads if h <= 32))):
        cache = torch.randn(B, L, 576, device=DEV, generator=gen).to(torch.bfloat16)
        lens = [L] * B
        sl = torch.tensor(lens, dtype=torch.int32, device=DEV)
        for Hq in heads:
            q = torch.randn(B, Hq, 576, device=DEV, generator=gen).to(torch.bfloat16)
            nbytes = B * L * 576 * 2 + B * Hq * 576 * 2 + B * Hq * 512 * 2     # cache + q + o
            flops = 2 * B * Hq * L * (576 + 512)
            grp = f"mla B{B} L{L} Hq{Hq}"
            ro, rl = ref_mla(q, cache, lens, 1 / math.sqrt(192))
            refcfg = REFERENCE["mla"][Hq]
            runs = [refcfg]
            if B == B0:
                runs += [(cfg, chunk, comb) for hb, cs in MLA_CFGS.items() if hb <= Hq for cfg in cs
                         for chunk in (None, 2048) for comb in ("fused", "kernel")]
            seen = set()
            for clean in (False, True):
                g2 = grp + (" [clean-L2 flush]" if clean else "")
                for cfg, chunk, comb in runs:
                    ref = (cfg, chunk, comb) == refcfg
                    if (clean and not ref) or (clean, cfg, chunk, comb) in seen:
                        continue
                    seen.add((clean, cfg, chunk, comb))
                    try:
                        bufs = {}
                        o, lse, ns = mla_forward(q, cache, sl, lens, cfg, chunk, bufs=bufs, combine=comb)
                        sync()
                        ok, why = compare(o, ro, lse, rl, vmax=float(cache[..., :512].float().abs().max()))
                        t = T(lambda: mla_forward(q, cache, sl, lens, cfg, chunk, bufs=bufs, combine=comb),
                              reps=REF_REPS if ref else SWEEP_REPS, clean=clean)
                        add(g2, f"{cfg} chunk={chunk or 'auto'} ({ns} splits, {comb} combine)", t, flops=flops,
                            nbytes=nbytes, note="" if ok else f"CHECK FAILED: {why}", ref=ref)
                    except Exception as e:
                        log(f"{grp} {cfg} {chunk}: error {e!r}")
            del q, ro, rl
        del cache
        if DEV == "cuda":
            torch.cuda.empty_cache()
    copies.append(copy_bw("end"))
    res["copy_gbs"] = max(c["gbs"] for c in copies)
    res["copy_clean_gbs"] = copy_bw("clean-L2 flush", clean=True)["gbs"]
    return res


def profile():
    """One launch of a few kernels at the timed shapes, for `ncu --clock-control none ... harness.py profile`."""
    import torch

    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    D, B, H, S = BENCH["fa2"][0]
    q, k, v = (torch.randn(B, H, S, D, device="cuda", generator=gen).to(torch.bfloat16) for _ in range(3))
    for cfg in FA2_CFGS[D]:
        fa2_forward(q, k, v, False, cfg)
    fa2_forward(q, k, v, True, FA2_CFGS[D][0])
    del q, k, v
    B, Hq, Hkv, D, L = BENCH["decode"]
    q = torch.randn(B, Hq, D, device="cuda", generator=gen).to(torch.bfloat16)
    K = torch.randn(B, Hkv, L, D, device="cuda", generator=gen).to(torch.bfloat16)
    V = torch.randn(B, Hkv, L, D, device="cuda", generator=gen).to(torch.bfloat16)
    lens = [L] * B
    sl = torch.tensor(lens, dtype=torch.int32, device="cuda")
    for cfg in DEC_CFGS[(D, False)]:
        decode_forward(q, K, V, sl, lens, cfg)
    KP, VP, table = page_cache(K, V, lens, 16, gen, extra_pages=3)
    decode_forward(q, KP, VP, sl, lens, REFERENCE["paged"][0], None, table, 16)
    del K, V, KP, VP
    B, L, heads = BENCH["mla"]
    cache = torch.randn(B, L, 576, device="cuda", generator=gen).to(torch.bfloat16)
    sl = torch.tensor([L] * B, dtype=torch.int32, device="cuda")
    for Hq in (16, 128):
        q = torch.randn(B, Hq, 576, device="cuda", generator=gen).to(torch.bfloat16)
        cfg, chunk, comb = REFERENCE["mla"][Hq]
        mla_forward(q, cache, sl, [L] * B, cfg, chunk, combine=comb)
    torch.cuda.synchronize()
    print("profile: done")


def summary(res: dict) -> str:
    """The short table: each kernel's best row against each peer of the same run."""
    rows = res["rows"]
    copy = res["copy_gbs"]
    copy_clean = res.get("copy_clean_gbs", copy)
    lines = [f"{res['device']} ({res['sms']} SMs), torch {res['torch']}, {res['date']}; "
             f"copy {copy:.0f} GB/s (best of {sum(r['group'] == 'copy' for r in rows)}); "
             f"with the clean-L2 flush {copy_clean:.0f} GB/s"]
    groups = []
    for r in rows:
        if r["group"] not in groups and not r["group"].startswith("copy"):
            groups.append(r["group"])
    for g in groups:
        copy = copy_clean if "clean-L2" in g else res["copy_gbs"]
        rs = [r for r in rows if r["group"] == g]
        ours = [r for r in rs if not r["name"].startswith("sdpa")]
        peers = [r for r in rs if r["name"].startswith("sdpa")]
        if not ours:
            continue
        good = [r for r in ours if not r.get("note", "").startswith("CHECK FAILED")]
        if not good:
            lines.append(f"{g}: every configuration FAILED its check at this shape")
            continue
        refs = [r for r in good if r.get("ref")]
        fastest = min(good, key=lambda r: r["ms"])
        best = refs[0] if refs else fastest
        metric = "tflops" if g.startswith("fa2") else "gbs"
        unit = "TFLOP/s" if metric == "tflops" else "GB/s"
        s = (f"{g}: ours {best['name']}{' (reference config)' if refs else ''} {best['ms']:.4f} ms "
             f"[p90 {best['p90_ms']:.4f}, {best['reps']} reps] = {best[metric]:.1f} {unit}")
        if metric == "gbs":
            s += f" = {100 * best['gbs'] / copy:.1f}% of copy"
            if "tflops" in best:
                s += f" ({best['tflops']:.1f} TFLOP/s)"
        for p in peers:
            s += f"\n    peer {p['name']}: {p[metric]:.1f} {unit}"
            if metric == "gbs":
                s += f" ({100 * p['gbs'] / copy:.1f}% of copy)"
            s += f"; ours = {p['ms'] / best['ms']:.3f}x the peer's speed"
            if p.get("note"):
                s += f" [{p['note']}]"
        if fastest is not best:
            s += f"\n    (fastest of the sweep: {fastest['name']} {fastest['ms']:.4f} ms = {fastest[metric]:.1f} {unit})"
        if len(good) < len(ours):
            s += f"\n    !! {len(ours) - len(good)} configuration(s) FAILED the check at this shape"
        lines.append(s)
    return "\n".join(lines)


# =================================================================================================
# main
# =================================================================================================
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["build", "check", "wrong", "bench", "all", "report", "profile"])
    ap.add_argument("--family", action="append", choices=list(FAMILY_SOURCE))
    ap.add_argument("--variant", help="cubin stem (a wrong kernel) replacing the family's module")
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="first configuration of each kind only")
    ap.add_argument("--out", default=os.environ.get("OUT", str(HERE / "out")))
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    import faulthandler

    faulthandler.enable()
    faulthandler.dump_traceback_later(380, exit=True)        # no hang outlives the device call

    if a.cmd in ("build", "all"):
        st = build()
        if any(v == "FAILED" for v in st.values()):
            sys.exit(1)
    if a.cmd == "report":
        for stem in all_sources():
            regs, sass = ptxas_report(stem), sass_counts(stem)
            for k in sorted(regs):
                if k.endswith("_meta"):
                    continue
                print(f"{stem:28s} {k:18s} {regs[k]} {sass.get(k, {})}")
    if a.cmd == "check":
        if a.variant:
            VARIANT[a.family[0]] = a.variant
        fams = a.family or list(FAMILY_SOURCE)
        res = run_checks(fams, all_cfgs=not a.quick)
        if a.json:
            Path(a.json).write_text(json.dumps(res, indent=1))
        n_bad = sum(not r["ok"] for r in res)
        print(f"{len(res) - n_bad} of {len(res)} passed")
    if a.cmd == "wrong":
        run_wrong(out)
    if a.cmd == "profile":
        profile()
    if a.cmd == "bench":
        res = bench()
        if a.json:
            Path(a.json).write_text(json.dumps(res, indent=1))
        print(summary(res))
    if a.cmd == "all":
        t0 = time.time()
        # 1. every correct kernel, one process per family (a fault in one cannot hide the others)
        procs = []
        for fam in FAMILY_SOURCE:
            js = out / f"check_{fam}.json"
            logf = open(out / f"check_{fam}.log", "w")
            procs.append((fam, js, logf, subprocess.Popen(
                [sys.executable, str(HERE / "harness.py"), "check", "--family", fam, "--json", str(js)],
                stdout=logf, stderr=subprocess.STDOUT)))
        check_summary = []
        for fam, js, logf, p in procs:
            try:
                p.wait(timeout=150)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            logf.close()
            res = json.loads(js.read_text()) if js.exists() else []
            bad = [r for r in res if not r["ok"]]
            check_summary.append(f"check {fam}: {len(res) - len(bad)} of {len(res)} passed (rc {p.returncode})")
            for r in bad[:8]:
                check_summary.append(f"  FAIL {r['name']}: {r['reason'][:200]}")
        print("\n".join(check_summary), flush=True)
        print(f"[checks took {time.time() - t0:.0f} s]", flush=True)
        # 2. wrong kernels
        wres = run_wrong(out)
        print(f"[wrong kernels took {time.time() - t0:.0f} s]", flush=True)
        # 3. timing (nothing else runs on the GPU now)
        logf = open(out / "bench.log", "w")

        def log(s):
            logf.write(s + "\n")
            logf.flush()

        try:
            res = bench(log)
            (out / "bench.json").write_text(json.dumps(res, indent=1))
            table = summary(res)
        except Exception:
            table = "bench failed:\n" + traceback.format_exc()
        logf.close()
        print(f"[all took {time.time() - t0:.0f} s]")
        print("\n".join(check_summary))
        print("wrong kernels: " + ", ".join(f"{w['stem'][6:]} {'CAUGHT' if w['caught'] else 'NOT CAUGHT'}" for w in wres))
        print(table)
        (out / "summary.txt").write_text("\n".join(check_summary) + "\n" + table + "\n")


if __name__ == "__main__":
    main()
