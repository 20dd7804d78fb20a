"""The CPU replay of chapter 05's kernels (grader/cuda/ptx.py, wgmma_replay.py, tma_replay.py).

On the CPU, no GPU: the wgmma descriptor's bit fields are the PTX ISA's (and course::make_smem_desc,
replayed, makes the same 64 bits as the Python encoder); the swizzle is 05.01's pattern; a
descriptor checked against a tile passes when right and names the field when one is wrong; the
interpreter computes warp shuffles, votes, printf and barriers as the hardware defines them and
finds a wait that can never complete; and each lesson's reference kernel passes its replay while
every descriptor and TMA-box mistake of tests/wrong/ch05_*.py is caught with its message (and a
picture where an operand is read from the wrong bytes).
"""
from __future__ import annotations

import pytest

import grader  # noqa: F401  (simulator first)
from grader.cuda import compile_cuda, replay, tma_replay, umma, wgmma_replay as W
from grader.cuda.ptx import Deadlock, Elem, swizzle_addr
from grader.notebooks import cell_source
from tests.conftest import solution
from tests.wrong import ch05_descriptors as D
from tests.wrong import ch05_flash3, ch05_fp8, ch05_hopper, ch05_wgmma
from tests.wrong.ch05_hopper import cpp_variant

CH = "05_hopper_blackwell"


def _body(notebook: str, cell: str) -> str:
    return cell_source(solution(CH, notebook), cell).split("\n", 1)[1]


def _build(body: str, kernel: str, arch: str = "sm_90a"):
    return compile_cuda(body, name="replayed", arch=arch, kernels=[kernel])[kernel]


def _run(source: str, kernel: str, args: list, block: int, grid=(1, 1, 1), smem: int = 0):
    k = compile_cuda(source, name="probe", arch="sm_90a")[kernel]
    return replay.run(replay.Launch(k, grid, block, smem, args))


# ---------------------------------------------------------------- the descriptor's bits
def test_descriptor_fields_sit_where_the_ptx_isa_puts_them():
    # start 0x400 -> 0x40 in bits 0-13; LBO 16 -> 1 in 16-29; SBO 1024 -> 64 in 32-45; 128B -> 1 in 62-63
    assert W.encode(W.Desc(0x400, 16, 1024, "128B")) == 0x4000_0040_0001_0040
    assert W.encode(W.Desc(0, 0, 0, "32B")) == 3 << 62 and W.encode(W.Desc(0, 0, 0, "64B")) == 2 << 62
    assert W.encode(W.Desc(0, 0, 0, "none", base_offset=5)) == 5 << 49
    d = W.decode(0x4000_0040_0200_0440)
    assert (d.start, d.lbo, d.sbo, d.swizzle, d.reserved) == (0x4400, 8192, 1024, "128B", 0)
    assert W.decode(1 << 46).reserved == 1 << 46                # Blackwell's version bit: not Hopper's
    with pytest.raises(ValueError):
        W.encode(W.Desc(0x408, 16, 1024))                       # not a multiple of 16


def test_make_smem_desc_replayed_makes_the_python_encoders_bits():
    src = r'''
#include "course.cuh"
#include "wgmma.cuh"
extern "C" __global__ void desc(unsigned long long* out, unsigned a, unsigned l, unsigned s) {
  out[threadIdx.x] = course::make_smem_desc(a + 1024 * threadIdx.x, l, s, threadIdx.x & 3);
}'''
    b = _run(src, "desc", ["out", 0x400, 8192, 1024], block=4)
    base = b.pointer("out")
    for t in range(4):
        swz = {0: "none", 1: "128B", 2: "64B", 3: "32B"}[t]
        assert b.load(base + 8 * t, 8) == W.encode(W.Desc(0x400 + 1024 * t, 8192, 1024, swz))


def test_the_swizzle_is_05_01s_pattern():
    # 128-byte swizzle: 16-byte chunk j of 128-byte row r lands at chunk j XOR (r mod 8) (05.01's swz)
    for r in range(16):
        for j in range(8):
            assert swizzle_addr(r * 128 + 16 * j, "128B") == r * 128 + 16 * (j ^ (r % 8))
    # 64B: rows of 64 B, the XOR by bits 7-8 of the address; 32B: bit 7
    assert swizzle_addr(2 * 64 + 16, "64B") == 2 * 64 + 16 * (1 ^ 1)
    assert swizzle_addr(128 + 16, "32B") == 128 and swizzle_addr(0x1230, "none") == 0x1230


def test_the_vectorised_addresses_are_ummas_canonical_layouts():
    from grader.cuda.wgmma_desc import operand_addresses

    for major in ("K", "MN"):
        for swz in ("none", "32B", "64B", "128B"):
            for bits in (16, 8):
                d = W.Desc(0x1400, 8192 if major == "MN" else 256, 1024, swz)
                want = [umma.descriptor_address(d.as_umma(), major, bits, i, kk) for i in range(64)
                        for kk in range(256 // bits)]
                assert operand_addresses(d, major, bits, 64, 256 // bits) == want, (major, swz, bits)


# ---------------------------------------------------------------- one descriptor against a tile
TILES = [umma.Tile(128, 64, "bf16", "K", "128B", 0x400), umma.Tile(64, 32, "bf16", "K", "64B", 0x800),
         umma.Tile(64, 16, "bf16", "K", "32B", 0x400), umma.Tile(64, 64, "bf16", "K", "none", 0x400),
         umma.Tile(256, 64, "bf16", "MN", "128B", 0x4400), umma.Tile(128, 128, "e4m3", "K", "128B", 0x1000)]


@pytest.mark.parametrize("t", TILES, ids=lambda t: f"{t.rows}x{t.cols}-{t.dtype}-{t.major}-{t.swizzle}")
def test_the_right_descriptor_reads_every_k_slice(t):
    ksteps = t.cols * t.bits // 8 // 32
    for k in range(ksteps):
        r = W.check_desc(W.encode(W.expected_desc(t, k)), t, k)
        assert r.ok, str(r)


@pytest.mark.parametrize("change, phrase", [
    (dict(swizzle="64B"), "swizzle code 2 means 64B"),
    (dict(sbo=128), "stride byte offset (SBO) is 128 B"),
    (dict(start_plus=16), "start address"),
])
def test_a_wrong_field_is_named(change, phrase):
    t = TILES[0]
    d = W.expected_desc(t, 1)
    d = W.Desc(d.start + change.get("start_plus", 0), d.lbo, change.get("sbo", d.sbo), change.get("swizzle", d.swizzle))
    r = W.check_desc(W.encode(d), t, 1)
    assert not r.ok and phrase in str(r), str(r)
    fig = W.draw(r)
    assert fig is not None


def test_mn_major_lbo_sbo_swapped_is_named():
    t = TILES[4]
    d = W.expected_desc(t, 0)
    r = W.check_desc(W.encode(W.Desc(d.start, d.sbo, d.lbo, "128B")), t, 0)
    assert not r.ok and "swapped" in str(r)


# ---------------------------------------------------------------- the interpreter
def test_shuffles_votes_and_printf_are_the_hardwares():
    src = r'''
extern "C" __global__ void k(int* out) {
  int v = threadIdx.x;
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  out[threadIdx.x] = v;
  unsigned b = __ballot_sync(0xffffffff, threadIdx.x & 1);
  if (threadIdx.x == 0) printf("ballot %x sum %d\n", b, v);
}'''
    b = _run(src, "k", ["out"], block=64)
    base = b.pointer("out")
    assert [b.load(base + 4 * t, 4) for t in (0, 31, 32, 63)] == [496, 496, 1520, 1520]    # sums of 0–31, 32–63
    assert b.printf == [(0, "ballot aaaaaaaa sum 496\n")]


def test_a_wait_that_can_never_complete_is_a_hang_with_its_parity():
    src = r'''
#include "course.cuh"
#include "tma.cuh"
extern "C" __global__ void k(int parity, int* out) {
  __shared__ unsigned long long bar;
  if (threadIdx.x == 0) course::mbar_init(&bar, 1);
  __syncthreads();
  course::mbar_wait(&bar, parity);   // nobody arrives: the phase before (parity 1) is done, phase 0 never
  out[threadIdx.x] = 1;
}'''
    _run(src, "k", [1, "out"], block=32)                    # parity 1: at once
    with pytest.raises(Deadlock, match="parity 0 of the mbarrier bar"):
        _run(src, "k", [0, "out"], block=32)


# ---------------------------------------------------------------- the lessons' kernels
TP = "tma_transpose<Tp<8, 2>>"


def test_05_01_reference_transposes_every_element():
    rep = tma_replay.transpose(_build(_body("01_tma.ipynb", "v_tma"), TP, "sm_90"))
    assert rep.ok, str(rep)
    assert rep.grid.all() and len(rep.loads) == len(rep.stores) == 12


@pytest.mark.parametrize("mistake", sorted(ch05_hopper.TMA_MISTAKES))
def test_05_01_every_tma_mistake_is_caught(mistake):
    body = cpp_variant(_body("01_tma.ipynb", "v_tma"), ch05_hopper.TMA_MISTAKES[mistake])
    rep = tma_replay.transpose(_build(body, TP, "sm_90"))
    assert not rep.ok and D.PHRASE[mistake] in str(rep), str(rep)


WG = "wgmma_gemm<Wg<128, 256, 4>>"


def test_05_02_reference_reads_where_tma_wrote():
    rep = W.gemm(_build(_body("02_wgmma.ipynb", "v_wgmma"), WG))
    assert rep.ok and rep.checked == 48, str(rep)


@pytest.mark.parametrize("mistake", sorted(ch05_wgmma.VALUES - {"epilogue_no_warpgroup_rows"}))
def test_05_02_every_descriptor_mistake_is_caught(mistake):
    body = cpp_variant(_body("02_wgmma.ipynb", "v_wgmma"), ch05_wgmma.WGMMA_MISTAKES[mistake])
    rep = W.gemm(_build(body, WG))
    assert not rep.ok and D.PHRASE[mistake] in str(rep), str(rep)
    if mistake != "a_step_in_elements":                          # that one reads the right bytes, k out of step
        assert rep.figure() is not None


def test_05_02_the_epilogue_is_not_the_replays():
    body = cpp_variant(_body("02_wgmma.ipynb", "v_wgmma"), ch05_wgmma.WGMMA_MISTAKES["epilogue_no_warpgroup_rows"])
    assert W.gemm(_build(body, WG)).ok                           # a GPU check's (tests/test_ch05_wgmma.py)


def test_05_03_reference_reads_where_tma_wrote():
    from grader.problems import hopper

    k = _build(_body("03_pipelines.ipynb", "v_ws"), "ws_gemm<Ws<128, 256, 4, 1, 8>>")
    rep = W.gemm(k, lambda kern: hopper.ws_gemm_launch(kern, ctas=1))
    assert rep.ok, str(rep)


@pytest.mark.parametrize("mistake", ["consumer_wrong_parity", "producer_overruns_ring", "epilogue_no_proxy_fence"])
def test_05_03_pipeline_mistakes_are_caught(mistake):
    from grader.problems import hopper
    from tests.wrong import ch05_pipelines

    body = cpp_variant(_body("03_pipelines.ipynb", "v_ws"), ch05_pipelines.PIPELINE_MISTAKES[mistake])
    rep = W.gemm(_build(body, "ws_gemm<Ws<128, 256, 4, 1, 8>>"), lambda kern: hopper.ws_gemm_launch(kern, ctas=1))
    assert not rep.ok and D.PHRASE[mistake] in str(rep), str(rep)


FP8 = "fp8_gemm<Fp8<128, 192, 4, 1, 8>>"


def test_05_06_reference_reads_where_tma_wrote():
    rep = W.fp8_gemm(_build(_body("06_fp8_gemm.ipynb", "v_fp8"), FP8))
    assert rep.ok, str(rep)


@pytest.mark.parametrize("mistake", sorted(D.FP8_DESCRIPTOR_MISTAKES) + ["promotion_skipped"])
def test_05_06_every_descriptor_mistake_is_caught(mistake):
    edits = D.FP8_DESCRIPTOR_MISTAKES.get(mistake) or ch05_fp8.FP8_MISTAKES[mistake]
    rep = W.fp8_gemm(_build(cpp_variant(_body("06_fp8_gemm.ipynb", "v_fp8"), edits), FP8))
    assert not rep.ok and D.PHRASE[mistake] in str(rep), str(rep)


F3 = "flash3<F3<128, 1, 1, 1>>"


def test_05_07_reference_reads_where_tma_wrote():
    rep = W.flash3(_build(_body("07_flash3.ipynb", "v_flash3"), F3))
    assert rep.ok and rep.checked == 128, str(rep)


@pytest.mark.parametrize("mistake", sorted(D.FLASH3_DESCRIPTOR_MISTAKES) + ["pingpong_turn_to_self"])
def test_05_07_every_descriptor_mistake_is_caught(mistake):
    edits = D.FLASH3_DESCRIPTOR_MISTAKES.get(mistake) or ch05_flash3.FLASH3_MISTAKES[mistake]
    rep = W.flash3(_build(cpp_variant(_body("07_flash3.ipynb", "v_flash3"), edits), F3))
    assert not rep.ok and D.PHRASE[mistake] in str(rep), str(rep)


def test_the_released_stub_is_not_implemented_yet():
    from grader.errors import CheckFailed

    import re

    stub = re.sub(r"// BEGIN SOLUTION.*?// END SOLUTION", "// YOUR CODE HERE", _body("02_wgmma.ipynb", "v_wgmma"),
                  flags=re.S)
    rep = W.gemm(_build(stub, WG))
    with pytest.raises(CheckFailed, match="not implemented yet"):
        W.require(rep)


def test_elements_are_named_by_their_tensor():
    assert str(Elem("A", 3, 4)) == "A[3, 4]" and str(Elem("Q", 1, 2, 5)) == "Q[5, 1, 2]"


def test_an_instruction_the_replay_does_not_model_is_one_line():
    from grader.errors import CheckFailed

    body = _body("02_wgmma.ipynb", "v_wgmma").replace(   # a PTX instruction the replay has no model of
        "  const bool leader = threadIdx.x == 0;",
        '  const bool leader = threadIdx.x == 0;\n  asm volatile("{ .reg .b32 r; getctarank.shared::cluster.u32 r, 0; }");')
    rep = W.gemm(_build(body, WG))
    assert not rep.ok and "could not follow the kernel" in str(rep) and "getctarank" in str(rep), str(rep)
    with pytest.raises(CheckFailed, match="could not follow"):
        W.require(rep)
