"""Chapter 05, lesson 06's promotion microbenchmark and cubin rewrite (dev/ch05_hopper, CPU only):
ffma_bench.cu compiles for sm_90a without spills, its timed promotion is 96 FFMAs between two clock
reads right after the wgmma wait, and the chain's stop is a warpgroup vote (a per-thread flag let the
four warps disagree: an illegal instruction on the H100); ffma_yield.py's reuse policies change only
the FFMAs' control bits, and only as they say (a reuse flag where the next, adjacent FFMA reads the same
register in that slot and does not overwrite it, the yield bit set with a flag and cleared without;
reuse_y8 leaves every 8th FFMA uncached and yielding), the decoding checked against cuobjdump.
"""
from __future__ import annotations

import re
import struct
import sys

import pytest

from tests.conftest import ROOT

DEV = ROOT / "dev" / "ch05_hopper"
sys.path.insert(0, str(DEV))

import ffma_yield as Y  # noqa: E402

TIMED = "ffma_bench<2, 3, 0, 4>"        # consumer 0: wgmma then the timed promotion; consumer 1: a chain


@pytest.fixture(scope="module")
def bench():
    from grader.cuda import compile_cuda

    return compile_cuda((DEV / "ffma_bench.cu").read_text(), name="ffma_bench", arch="sm_90a",
                        kernels=[TIMED, "ffma_bench<1, 0, 1, 4>", "ffma_bench<1, 3, 2, 4>"])


def _lines(module, kernel):
    from grader.cuda import sass

    return [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*", "", ln).strip() for ln in sass.disassemble(module, kernel).splitlines()]


def test_bench_compiles_and_times_the_promotion_alone(bench):
    from grader.cuda import sass

    for k in bench.kernel_names:
        sass.require(bench, k, absent=["LDL", "STL"], no_spills=True)
    text = _lines(bench, TIMED)
    at = next(i for i, t in enumerate(text) if t.startswith("WARPGROUP.DEPBAR.LE gsb0, 0x0") and "CLOCK" in text[i + 1])
    end = next(i for i in range(at + 2, len(text)) if "CLOCK" in text[i])
    assert sum(t.startswith("FFMA") for t in text[at + 2:end]) == end - at - 2 == 96
    assert any(t.startswith("BAR.RED.OR") for t in text)            # the chain's warpgroup vote
    imm = [t for t in _lines(bench, "ffma_bench<1, 0, 1, 4>") if t.startswith("FFMA")]   # the scale an immediate
    assert len(imm) >= 96 and all(re.match(r"FFMA R\d+, R\d+, 1\.5, R\d+", t) for t in imm[-96:]), imm[-3:]


@pytest.mark.parametrize("policy", ["reuse_all", "reuse_y8"])
def test_reuse_policies_change_only_what_they_say(bench, policy):
    sym = bench.symbol(TIMED)
    new, changed, found = Y.patch(bench.cubin, sym, policy)
    sites = Y.ffma_sites(bench.cubin, sym)
    assert found == len(sites) >= 96 and changed > 0 and Y.ffma_sites(new, sym) == sites
    Y.check_sites(new, sym)
    hi_at = {at: struct.unpack_from("<Q", new, at + 8)[0] for at, _ in sites}
    diff = [i for i in range(len(new)) if new[i] != bench.cubin[i]]
    assert all(any(at + 8 <= i < at + 16 for at in hi_at) for i in diff)     # control words of FFMAs only
    regs = [re.findall(r"R\d+|RZ", ops) for _, ops in sites]
    for n, (at, _) in enumerate(sites):
        hi, old = hi_at[at], struct.unpack_from("<Q", bench.cubin, at + 8)[0]
        assert hi & ~(Y.REUSE_ALL | Y.YIELD) == old & ~(Y.REUSE_ALL | Y.YIELD)     # stall counts, barriers kept
        nxt = regs[n + 1] if n + 1 < len(sites) and sites[n + 1][0] == at + 16 else None
        for slot, flag in ((1, Y.REUSE_A), (2, Y.REUSE_B)):
            if hi & flag:
                assert nxt is not None and nxt[slot] == regs[n][slot] != regs[n][0]
        assert bool(hi & Y.YIELD) == bool(hi & Y.REUSE_ALL)
        if policy == "reuse_y8" and n % 8 == 7:
            assert not hi & (Y.REUSE_A | Y.REUSE_B)
    cached = sum(bool(hi_at[at] & (Y.REUSE_A | Y.REUSE_B)) for at, _ in sites)
    assert cached >= (80 if policy == "reuse_all" else 70)          # ptxas's own code caches 48
