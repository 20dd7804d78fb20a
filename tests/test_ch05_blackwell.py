"""Chapter 05, lesson 09 (05.09, Blackwell): tcgen05, tensor memory, CTA pairs, block scaling, FA4's exp2.

On the CPU (CI): the descriptor codec agrees with CUTLASS's make_umma_desc on the canonical layouts
and the checker passes right descriptors and names the wrong field of wrong ones (B's LBO among
them); the instruction descriptor's legal shapes; the lesson's cells compile for sm_100a, each PTX
instruction gives the SASS the lesson's table says, and sm_90a / sm_120a refuse tcgen05; the
rubrics pass for the reference and fail for the released stubs, for tensor memory never freed or
never relinquished, and for exp2 through MUFU; the pair kernel without CLUSTER is refused by its
launch function before any GPU call; the untouched lesson's Python-graded cells and its launch cell give
one-line "not implemented yet" verdicts (no NameError, no bare NotImplementedError); every kernel mistake
applies and compiles; the block-scaled
references decode the bytes exactly; FA4's exp2 meets its bound and every wrong exp2 is caught.
Marked ``gpu``: the exp2 kernel on any GPU from sm_80, a cluster launch with a tensor-map argument
on any sm_90+ GPU, and (only on an sm_100 GPU) the tcgen05 kernels' values and their mistakes.
"""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pytest

import grader  # noqa: F401  (simulator first)
from grader.cuda import umma
from grader.notebooks import cell_source
from grader.problems import blackwell as P
from tests.conftest import ROOT, solution
from tests.wrong import ch05_blackwell as W
from tests.wrong import caught

CH, NB = W.CHAPTER, W.NOTEBOOK
G1, G2 = "umma_gemm<G<1, 256, 4>>", "umma_gemm<G<2, 256, 6>>"
S8, S4 = "scaled_gemm<S<false>>", "scaled_gemm<S<true>>"


def source(cell_id: str, where: str = "solutions") -> str:
    return cell_source(ROOT / where / CH / NB if where == "course" else solution(CH, NB), cell_id)


@lru_cache(maxsize=None)
def build(text: str, name: str | None = None):
    """A %%cuda cell compiled as the magic would (its --arch: sm_100a for the Blackwell cells), once a session."""
    from grader.cuda import compile_cuda
    from grader.cuda.magic import parse_magic_line

    first, _, body = text.partition("\n")
    args = parse_magic_line(first[len("%%cuda"):])
    return compile_cuda(body, name=name or args["name"], arch=args["arch"], kernels=args["kernels"] or None)


def rubric(cell_id: str, namespace: dict | None = None):
    from grader.cuda import sass

    ns = {"sass": sass, "P": P, "umma": umma, "np": np, **(namespace or {})}
    exec(compile(cell_source(solution(CH, NB), cell_id), cell_id, "exec"), ns)


# ---------------------------------------------------------------- descriptors on the CPU
# make_umma_desc of CUTLASS 4.2 (cute/atom/mma_traits_sm100.hpp) evaluated on the host for tiles made
# with tile_to_shape(Layout_{K,MN}_{SW128,INTER}_Atom<bf16>, …): the host sees start address 0.
CUTLASS = {"K SW128 128x64": 0x4000404000010000, "MN SW128 256x64 (atoms along MN first)": 0x4000410000400000,
           "K INTER 128x64": 0x0000400800800000, "MN INTER 256x64": 0x0000400801000000}


def test_smem_codec_agrees_with_cutlass():
    k = umma.decode_smem(CUTLASS["K SW128 128x64"])
    assert (k.lbo, k.sbo, k.swizzle, k.version) == (16, 1024, "128B", 1)
    mn = umma.decode_smem(CUTLASS["MN SW128 256x64 (atoms along MN first)"])
    assert (mn.lbo, mn.sbo) == (1024, 4096)        # LBO: next MN atom (1 KiB there), SBO: next 8 K-rows
    ki, mi = umma.decode_smem(CUTLASS["K INTER 128x64"]), umma.decode_smem(CUTLASS["MN INTER 256x64"])
    assert (ki.lbo, ki.sbo, mi.lbo, mi.sbo) == (2048, 128, 4096, 128)
    for v in CUTLASS.values():
        assert umma.encode_smem(umma.decode_smem(v)) == v
    # the same semantics in the checker's own address model: CUTLASS's MN layout is read right
    d = umma.decode_smem(CUTLASS["MN SW128 256x64 (atoms along MN first)"])
    for i, kk in ((0, 0), (64, 0), (200, 3), (100, 9)):       # element (i along N, kk along K)
        atom, inner = divmod(i, 64)
        linear = atom * 1024 + (kk // 8) * 4096 + (kk % 8) * 128 + inner * 2
        assert umma.descriptor_address(d, "MN", 16, i, kk) == umma.swizzle(linear, "128B")
    assert umma.expected_smem(umma.Tile(128, 64, "bf16", "K", "128B")).lbo == k.lbo
    assert umma.expected_smem(umma.Tile(128, 64, "bf16", "K", "none")).lbo == ki.lbo


@pytest.mark.parametrize("tile", [umma.Tile(128, 64, "bf16", "K", "128B", 0x400), umma.Tile(256, 64, "bf16", "MN", "128B", 0x4400),
                                  umma.Tile(128, 128, "e4m3", "K", "128B", 0), umma.Tile(128, 256, "e2m1", "K", "128B", 0),
                                  umma.Tile(128, 64, "bf16", "K", "none", 0), umma.Tile(256, 64, "bf16", "MN", "none", 0),
                                  umma.Tile(128, 32, "bf16", "K", "64B", 0x200)], ids=str)
def test_the_checker_accepts_the_right_descriptor_of_every_k_slice(tile):
    for k in range(tile.cols * tile.bits // 8 // umma.K_BYTES):
        r = umma.check_smem(umma.encode_smem(umma.expected_smem(tile, k)), tile, k)
        assert r.ok, str(r)


@pytest.mark.parametrize("mistake", sorted(W.DESCRIPTOR_MISTAKES))
def test_the_checker_catches_wrong_descriptors(mistake):
    B = umma.Tile(256, 64, "bf16", "MN", "128B", address=0x4400)
    found = [umma.check_smem(W.DESCRIPTOR_MISTAKES[mistake](0x4400, k), B, k) for k in range(4)]
    assert not any(r.ok for r in found[1:]), mistake            # (slice 0 of a wrong K step is right)
    text = str(found[1])
    if mistake == "b_lbo_wrong":
        assert "leading byte offset (LBO) is 1024 B; this tile needs 8192 B" in text, text
    if mistake == "hopper_descriptor":
        assert "0b001" in text


def test_the_lessons_right_encoder_passes_and_a_wrong_lbo_fails_its_graded_cell():
    ns = {}
    exec(compile(source("v_desc"), "v_desc", "exec"), ns)
    rubric("test_smem_desc", ns)
    rubric("test_instr_desc", ns)
    wrong = dict(ns, gemm_offsets=lambda n_cta=256: (16, 1024, 1024, 1024))       # B's LBO: 8 rows, not a box
    with pytest.raises(AssertionError, match=r"(?s)B \(256 columns\), K slice 0:.*LBO\) is 1024 B; this tile needs 8192 B"):
        rubric("test_smem_desc", wrong)
    hopper = dict(ns, idesc_f16=lambda M, N, b_mn_major=True: ns["idesc_f16"](M, N, b_mn_major) | 1 << 23)
    with pytest.raises(AssertionError, match="reserved bits"):
        rubric("test_instr_desc", hopper)


def test_instruction_descriptor_shapes_and_fields():
    v = umma.encode_instr(umma.InstrDesc("f16", 128, 256, "bf16", "bf16", "f32", "K", "MN"))
    assert v == (1 << 4) | (1 << 7) | (1 << 10) | (1 << 16) | (32 << 17) | (8 << 24)
    assert umma.check_instr(v, "f16", 1) == []
    assert "not legal" in umma.check_instr(umma.encode_instr(umma.InstrDesc("f16", 256, 256)), "f16", 1)[0]
    assert "not legal" in umma.check_instr(umma.encode_instr(umma.InstrDesc("f16", 256, 248)), "f16", 2)[0]
    assert umma.check_instr(umma.encode_instr(umma.InstrDesc("f16", 256, 256)), "f16", 2) == []
    # one CTA: N by 8 for M = 64, by 16 for M = 128 (CUTLASS's SM100 atoms assert the same)
    assert umma.check_instr(umma.encode_instr(umma.InstrDesc("f16", 64, 136)), "f16", 1) == []
    assert "and M = 128 (16 … 256 in steps of 16)" in umma.check_instr(
        umma.encode_instr(umma.InstrDesc("f16", 128, 136)), "f16", 1)[0]
    assert "K-major operands only" in " ".join(umma.check_instr(
        umma.encode_instr(umma.InstrDesc("mxf4nvf4", 128, 128, "e2m1", "e2m1", a_major="MN")), "mxf4nvf4", 1))
    idesc8, desc = P.scaled_descriptors(False)
    assert umma.check_instr(idesc8, "mxf8f6f4", 1, a="e4m3", b="e4m3") == []
    idesc4, _ = P.scaled_descriptors(True)
    d4 = umma.decode_instr(idesc4, "mxf4nvf4")
    assert (d4.a, d4.scale, d4.M, d4.N) == ("e2m1", "ue4m3", 128, 128)
    assert umma.check_smem(desc | (0x400 >> 4), umma.Tile(128, 128, "e4m3", "K", "128B", 0x400), 0).ok


def test_draw_smem_pictures_right_and_wrong():
    B = umma.Tile(256, 64, "bf16", "MN", "128B", address=0x4400)
    bad = umma.check_smem(W.DESCRIPTOR_MISTAKES["b_lbo_wrong"](0x4400, 1), B, 1)
    fig = umma.draw_smem(bad)
    img = fig.axes[0].images[0].get_array()
    assert (img == 3).any() and (img == 4).any()          # red: read wrong; orange: missed
    good = umma.check_smem(umma.encode_smem(umma.expected_smem(B, 1)), B, 1)
    img = umma.draw_smem(good).axes[0].images[0].get_array()
    assert (img == 2).any() and not (img == 3).any() and not (img == 4).any()


# ---------------------------------------------------------------- compiled for sm_100a, no GPU
PROBE = r'''
extern "C" __global__ void k_mma(unsigned* o, unsigned long long a, unsigned long long b, unsigned i, unsigned t) {
  asm volatile("{.reg .pred p; setp.ne.b32 p, %4, 0; tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;}" :: "r"(t), "l"(a), "l"(b), "r"(i), "r"(t)); }
extern "C" __global__ void k_mma2(unsigned* o, unsigned long long a, unsigned long long b, unsigned i, unsigned t) {
  asm volatile("{.reg .pred p; setp.ne.b32 p, %4, 0; tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %2, %3, p;}" :: "r"(t), "l"(a), "l"(b), "r"(i), "r"(t)); }
extern "C" __global__ void k_f8(unsigned* o, unsigned long long a, unsigned long long b, unsigned i, unsigned t) {
  asm volatile("{.reg .pred p; setp.ne.b32 p, %4, 0; tcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, p;}" :: "r"(t), "l"(a), "l"(b), "r"(i), "r"(t)); }
extern "C" __global__ void k_mx8(unsigned* o, unsigned long long a, unsigned long long b, unsigned i, unsigned t) {
  asm volatile("{.reg .pred p; setp.ne.b32 p, %4, 0; tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale [%0], %1, %2, %3, [%5], [%6], p;}" :: "r"(t), "l"(a), "l"(b), "r"(i), "r"(t), "r"(t + 64), "r"(t + 96)); }
extern "C" __global__ void k_nv4(unsigned* o, unsigned long long a, unsigned long long b, unsigned i, unsigned t) {
  asm volatile("{.reg .pred p; setp.ne.b32 p, %4, 0; tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [%0], %1, %2, %3, [%5], [%6], p;}" :: "r"(t), "l"(a), "l"(b), "r"(i), "r"(t), "r"(t + 64), "r"(t + 96)); }
extern "C" __global__ void k_commit(unsigned* o, unsigned long long a, unsigned long long b, unsigned i, unsigned t) {
  __shared__ unsigned long long bar;
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"((unsigned)__cvta_generic_to_shared(&bar))); }
extern "C" __global__ void k_ld(unsigned* o, unsigned long long a, unsigned long long b, unsigned i, unsigned t) {
  unsigned v; asm volatile("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%0}, [%1];" : "=r"(v) : "r"(t));
  asm volatile("tcgen05.wait::ld.sync.aligned;"); o[threadIdx.x] = v; }
extern "C" __global__ void k_dealloc(unsigned* o, unsigned long long a, unsigned long long b, unsigned i, unsigned t) {
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(t)); }
extern "C" __global__ void k_relinquish(unsigned* o, unsigned long long a, unsigned long long b, unsigned i, unsigned t) {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;"); }
'''
OPCODES = {"k_mma": "UTCHMMA", "k_mma2": "UTCHMMA.2CTA", "k_f8": "UTCQMMA", "k_mx8": "UTCQMMA", "k_nv4": "UTCOMMA.4X",
           "k_commit": "UTCBAR", "k_ld": "LDTM", "k_dealloc": "UTCATOMSWS.AND", "k_relinquish": "UVIRTCOUNT.DEALLOC.SMPOOL"}


def test_each_tcgen05_instruction_gives_the_opcode_the_lesson_says():
    from grader.cuda import compile_cuda, sass

    m = compile_cuda(PROBE, name="tc_probe", arch="sm_100a")
    for kernel, want in OPCODES.items():
        ops = {o for o in sass.opcodes(m, kernel, full=True) if o.startswith(("UTC", "LDTM", "UVIRT"))}
        assert ops == {want}, (kernel, ops)
    mx = [ln for ln in sass.disassemble(m, "k_mx8").splitlines() if "UTCQMMA" in ln]
    plain = [ln for ln in sass.disassemble(m, "k_f8").splitlines() if "UTCQMMA" in ln]
    assert mx[0].count("tmem[") == 3 and plain[0].count("tmem[") == 2    # the scale factors' operand


@pytest.mark.parametrize("arch", ["sm_90a", "sm_120a"])
def test_hopper_and_rtx_blackwell_refuse_tcgen05(arch):
    from grader.cuda import CompileError, compile_cuda

    with pytest.raises(CompileError, match=f"tcgen05.* not supported on .target '{arch}'"):
        compile_cuda(PROBE, name="tc_probe", arch=arch)


def test_rubrics_pass_for_the_reference():
    um, bs, ex = build(source(W.GEMM_CELL)), build(source(W.SCALED_CELL)), build(source(W.EXP2_CELL))
    for cell_id, ns in (("test_umma_sass", {"um": um}), ("test_pair_sass", {"um": um}),
                        ("test_scaled_sass", {"bs": bs}), ("test_exp2_sass", {"ex": ex})):
        rubric(cell_id, ns)


def _nvcc_13_0():
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc")
    if not nvcc:
        return None
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    return nvcc if "release 13.0" in out else None


@pytest.mark.parametrize("cell_id", [W.GEMM_CELL, W.SCALED_CELL])
def test_the_reference_keeps_no_local_memory_with_ptxas_13_0(cell_id, tmp_path):
    """NVRTC 13.0 (the lent H100's, torch cu130's) put the epilogue's w[] of the tcgen05 GEMM in local
    memory and held the block-scaled kernel to 40 registers with spills, where NVRTC 13.5 did neither:
    the reference lost its rubric points there (2026-11-24). ptxas 13.0 of the local nvcc reproduces it."""
    import subprocess

    nvcc = _nvcc_13_0()
    if nvcc is None:
        pytest.skip("needs nvcc 13.0 (the ptxas the device's NVRTC 13.0 matches)")
    first, _, body = source(cell_id).partition("\n")
    kernels = re.findall(r'-k "([^"]+)"', first)
    body += "\nstatic void* const keep[] = {" + ", ".join(f"(void*)&{k}" for k in kernels) + "};\n"
    (tmp_path / "cell.cu").write_text(body)
    res = subprocess.run([nvcc, "-arch=sm_100a", "-cubin", "-std=c++17", f"-I{ROOT / 'grader' / 'include'}",
                          "-Xptxas", "-v", "cell.cu", "-o", "cell.cubin"], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    frames = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", res.stderr)
    assert len(frames) >= len(kernels), res.stderr[-2000:]
    assert all(f == ("0", "0", "0") for f in frames), res.stderr[-2000:]


def test_rubrics_fail_for_the_released_stubs():
    from grader.cuda.sass import RubricFailed

    for cell_id, rub, name in ((W.GEMM_CELL, "test_umma_sass", "um"), (W.GEMM_CELL, "test_pair_sass", "um"),
                               (W.SCALED_CELL, "test_scaled_sass", "bs"), (W.EXP2_CELL, "test_exp2_sass", "ex")):
        stub = source(cell_id, "course")
        assert "// YOUR CODE HERE" in stub and "BEGIN SOLUTION" not in stub
        with pytest.raises((RubricFailed, AssertionError), match="not implemented yet|scale-factor"):
            rubric(rub, {name: build(stub, name=f"stub_{name}")})


def test_the_untouched_lessons_python_cells_say_not_implemented_yet():
    """The released stubs of exercises 1 and 4: their graded cells fail as one-line CheckFailed verdicts,
    and the launch cell still defines launch_v1 / launch_v2 -- launch functions that say exercise 1 is
    missing when a check calls them (they launch nothing)."""
    from grader.check import explain
    from grader.errors import CheckFailed

    ns = {"np": np}
    exec(compile(source("v_desc", "course"), "v_desc", "exec"), ns)
    exec(compile(source("v_exp2_py", "course"), "v_exp2_py", "exec"), ns)
    for cell in ("test_smem_desc", "test_instr_desc"):
        with pytest.raises(CheckFailed, match="^not implemented yet: exercise 1"):
            rubric(cell, ns)
    with pytest.raises(CheckFailed, match="^not implemented yet: exp2_by_fma"):
        rubric("test_exp2_py", ns)
    ns["um"] = build(source(W.GEMM_CELL, "course"), name="stub_um")
    launch_ns = {"P": P, **ns}
    exec(compile(source("launch"), "launch", "exec"), launch_ns)
    for name in ("launch_v1", "launch_v2"):
        with pytest.raises(NotImplementedError) as err:
            launch_ns[name](None, None, None)
        assert explain(err.value).startswith("not implemented yet: exercise 1"), explain(err.value)


@pytest.mark.parametrize("mistake", sorted(W.RUBRIC_CATCHES))
def test_the_rubric_catches_tensor_memory_not_given_back(mistake):
    from grader.cuda.sass import RubricFailed

    module = build(W.cpp_variant(source(W.GEMM_CELL), W.UMMA_MISTAKES[mistake]), name=f"wrong_{mistake}")
    for rub in ("test_umma_sass", "test_pair_sass"):
        with pytest.raises(RubricFailed, match=f"missing {W.RUBRIC_CATCHES[mistake]}"):
            rubric(rub, {"um": module})


def test_exp2_through_mufu_fails_the_rubric():
    from grader.cuda.sass import RubricFailed

    module = build(W.cpp_variant(source(W.EXP2_CELL), W.EXP2_MUFU), name="wrong_exp2")
    with pytest.raises(RubricFailed, match="forbidden MUFU.EX2"):
        rubric("test_exp2_sass", {"ex": module})


@pytest.mark.parametrize("mistake", sorted(W.UMMA_MISTAKES))
def test_kernel_mistakes_apply_and_compile(mistake):
    module = build(W.cpp_variant(source(W.GEMM_CELL), W.UMMA_MISTAKES[mistake]), name=f"wrong_{mistake}")
    assert set(module.kernel_names) == {G1, G2}


def test_the_pair_kernel_without_cluster_is_refused_before_launch():
    module = build(W.cpp_variant(source(W.GEMM_CELL), W.NO_CLUSTER), name="wrong_nocluster")
    assert module.launch_shape(G2).cluster == 0
    assert P.cluster_problems(module[G2]) and not P.cluster_problems(module[G1])
    with pytest.raises(ValueError, match=r"CTA-pair instructions \(.*UTCHMMA.2CTA.*\) .* states no CLUSTER"):
        P.umma_gemm_launch(module[G2])
    right = build(source(W.GEMM_CELL))
    assert not P.cluster_problems(right[G2])
    launch = P.umma_gemm_launch(right[G2])                   # building the launch needs no GPU
    assert launch.__name__ == f"launch {G2}"


def test_launch_shapes_come_from_the_types():
    um, bs = build(source(W.GEMM_CELL)), build(source(W.SCALED_CELL))
    one, pair = um.launch_shape(G1), um.launch_shape(G2)
    assert (one.threads, one.tile_m, one.tile_n, one.tile_k, one.stages, one.cluster) == (192, 128, 256, 64, 4, 1)
    assert (pair.stages, pair.cluster) == (6, 2)
    assert one.smem_bytes == 4 * (128 * 64 * 2 + 64 * 256 * 2) + 1024 <= 227 * 1024
    assert pair.smem_bytes == 6 * (128 * 64 * 2 + 64 * 128 * 2) + 1024
    idesc, a, b = P.umma_descriptors(pair)
    assert umma.decode_instr(idesc, "f16").M == 256 and umma.decode_smem(b).lbo == 64 * 128
    assert (bs.launch_shape(S8).tile_k, bs.launch_shape(S4).tile_k) == (128, 256)
    launch = cell_source(solution(CH, NB), "launch")
    assert not re.search(r"\(\s*\d+\s*,\s*\d+|threads\s*=", launch), launch     # nothing restated


# ---------------------------------------------------------------- references and FA4's exp2
def test_block_scaled_references_decode_the_bytes():
    assert P.E4M3[0x7E] == 448 and P.E4M3[0x01] == 2.0 ** -9 and P.E4M3[0x38] == 1 and np.isnan(P.E4M3[0x7F])
    assert P.E4M3[0xB8] == -1 and P.E2M1[7] == 6 and P.E2M1[9] == -0.5
    rng = np.random.default_rng(1)
    s = P.Shape(3, 2, 64)
    i8 = P.mxfp8_gemm.make_inputs(rng, s)
    a = P.E4M3[i8["a"]] * np.repeat(2.0 ** (i8["sfa"].astype(float) - 127), 32, axis=1)
    b = P.E4M3[i8["b"]] * np.repeat(2.0 ** (i8["sfb"].astype(float) - 127), 32, axis=1)
    assert np.array_equal(P.mxfp8_gemm.reference(**i8)["c"], a @ b.T)
    i4 = P.nvfp4_gemm.make_inputs(rng, P.Shape(2, 2, 64))
    lo, hi = P.E2M1[i4["a"][0, 0] & 15], P.E2M1[i4["a"][0, 0] >> 4]
    unpacked = P._fp4_unpack(i4["a"])
    assert (unpacked[0, 0], unpacked[0, 1]) == (lo, hi)                   # low nibble first
    assert P.mxfp8_gemm.arch == P.nvfp4_gemm.arch == P.umma_gemm.arch == "sm_100a"
    why = P.umma_gemm.unavailable(False, (9, 0))
    assert why == ("compiled and inspected only: running it needs a Blackwell GPU (B200/GB200, sm_100a); "
                   "this GPU has compute capability 9.0")
    assert "Blackwell" in P.umma_gemm.unavailable(True, None) and P.umma_gemm.unavailable(False, (10, 0)) is None
    assert P.umma_gemm.unavailable(False, (10, 3)) and P.umma_gemm.unavailable(False, (12, 0))


def test_exp2_bound_and_reference():
    # bf16 keeps 8 significant bits: it rounds to within 2^-8. Degree 2 errs about as much (so it would
    # nearly double P's error), degree 3 more than 20 times less (the lesson's prose says so)
    assert 2.0 ** -8 > P.exp2_bound(2) > 2.0 ** -9 and 2.0 ** -8 > 20 * P.exp2_bound(3)
    assert P.exp2_bound(3) > P.exp2_bound(4) > P.exp2_bound(5)
    xs = np.linspace(-125, 126.99, 20001).astype(np.float32)
    for d in (3, 4, 5):
        y = P.exp2_fma(xs, P.exp2_coefficients(d)).astype(np.float64)
        assert np.max(np.abs(y / np.exp2(xs.astype(np.float64)) - 1)) <= P.exp2_bound(d)
    ns = {"np": np}
    exec(compile(source("v_exp2_py"), "v_exp2_py", "exec"), ns)
    assert P.check_exp2(ns["exp2_by_fma"], quiet=True) < P.exp2_bound(3)


@pytest.mark.parametrize("mistake", sorted(W.EXP2_MISTAKES))
def test_wrong_exp2_is_caught(mistake):
    with pytest.raises(AssertionError, match="exp2:"):
        P.check_exp2(W.EXP2_MISTAKES[mistake], quiet=True)


def test_the_cells_compiled_default_arch_build_the_exp2_kernel_everywhere():
    from grader.cuda import compile_cuda, sass

    body = source(W.EXP2_CELL).partition("\n")[2]
    for arch in ("sm_80", "sm_90a", "sm_100a"):
        m = compile_cuda(body, name="ex_arch", arch=arch)
        sass.require(m, "exp2_poly", present=["FFMA"], absent=["MUFU.EX2"])


def test_the_cute_dsl_cell_skips_cleanly_or_compiles_for_sm_100a(tmp_path):
    """The CuTe DSL is optional: without it the cell says so; with it (here, not in CI) the kernel
    compiles for sm_100a with no GPU and its SASS holds the three FFMAs and no MUFU."""
    import importlib.util
    import subprocess
    import sys

    script = tmp_path / "cute_dsl_cell.py"               # the DSL reads its kernels' source from a file
    script.write_text("import grader, numpy as np\nfrom grader.cuda import sass\n"
                      "from grader.problems import blackwell as P\n" + source("cute_dsl") + "\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""})
    if importlib.util.find_spec("cutlass") is None:
        assert "CuTe DSL not installed" in r.stdout and "skipped" in r.stdout, r.stdout + r.stderr
    else:
        assert "compiled for sm_100a: FFMA 3, MUFU 0" in r.stdout, r.stdout + r.stderr


# ---------------------------------------------------------------- on a GPU
def _cc():
    from grader.cuda.toolchain import compute_capability

    return compute_capability()


@pytest.mark.gpu
def test_exp2_kernel_on_any_gpu_from_ampere():
    from grader.check import check
    from grader.notebooks import run_cells

    if (_cc() or (0, 0)) < (8, 0):
        pytest.skip("needs compute capability 8.0+")
    ns = run_cells(solution(CH, NB), ["launch_exp2"], {"ex": build(source(W.EXP2_CELL).replace("%%cuda ex", "%%cuda ex_gpu"))})
    check(ns["launch_exp2"], P.exp2_kernel, quiet=True)
    check(ns["launch_exp2"], P.exp2_kernel, hidden=True, quiet=True)
    wrong = build(W.cpp_variant(source(W.EXP2_CELL), [("C0 = 0.999900288f", "C0 = 0.99f")]), name="ex_wrong")
    bad = run_cells(solution(CH, NB), ["launch_exp2"], {"ex": wrong})
    assert caught(bad["launch_exp2"], P.exp2_kernel)


CLUSTER_PROBE = r'''
#include "course.cuh"
#include "tma.cuh"
// Each CTA writes its cluster rank and the tensor map's first word: a cluster launch with a map argument.
extern "C" __global__ void cluster_probe(const __grid_constant__ course::TensorMap map, unsigned* out) {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  if (threadIdx.x == 0) out[blockIdx.x] = r * 1000u + (unsigned)(map.opaque[0] != 0);
}
'''


@pytest.mark.gpu
def test_a_cluster_launch_with_a_tensor_map_argument():
    """cuLaunchKernelEx with the cluster attribute (grader/cuda/module.py): the path the CTA-pair GEMM
    takes, checked on any GPU with clusters (sm_90+)."""
    import torch

    from grader.cuda import compile_cuda
    from grader.cuda.tma import tiled_2d

    if (_cc() or (0, 0)) < (9, 0):
        pytest.skip("clusters need compute capability 9.0+")
    m = compile_cuda(CLUSTER_PROBE, name="cluster_probe")
    x = torch.zeros((64, 64), device="cuda", dtype=torch.float32)
    out = torch.full((8,), 7777, device="cuda", dtype=torch.int32)
    m.cluster_probe(tiled_2d(x, (32, 32), "none"), out, grid=8, block=32, cluster=2)
    torch.cuda.synchronize()
    assert out.tolist() == [1, 1001] * 4, out.tolist()


def _blackwell():
    if _cc() != (10, 0):
        pytest.skip("tcgen05 needs a Blackwell GPU (sm_100a); this one has " + str(_cc()))


@pytest.mark.gpu
def test_reference_kernels_pass_on_blackwell():
    from grader.check import check

    _blackwell()
    um, bs = build(source(W.GEMM_CELL)), build(source(W.SCALED_CELL))
    for kernel in (G1, G2):
        launch = P.umma_gemm_launch(um[kernel])
        check(launch, P.umma_gemm, quiet=True)
        check(launch, P.umma_gemm, hidden=True, quiet=True)
    check(P.scaled_gemm_launch(bs[S8]), P.mxfp8_gemm, quiet=True)
    check(P.scaled_gemm_launch(bs[S4]), P.nvfp4_gemm, quiet=True)


@pytest.mark.gpu
@pytest.mark.parametrize("mistake", ["a_k_step_16_bytes", "accumulate_always"])
def test_kernel_mistakes_are_caught_on_blackwell(mistake):
    _blackwell()
    module = build(W.cpp_variant(source(W.GEMM_CELL), W.UMMA_MISTAKES[mistake]), name=f"wrong_{mistake}")
    assert caught(P.umma_gemm_launch(module[G1]), P.umma_gemm)


@pytest.mark.gpu
def test_a_wrong_lbo_is_caught_on_blackwell_too():
    _blackwell()
    um = build(source(W.GEMM_CELL))
    idesc, a, b = P.umma_descriptors(um[G1].launch_shape)
    wrong_b = umma.encode_smem(umma.SmemDesc(0, 1024, 1024, "128B"))
    assert caught(P.umma_gemm_launch(um[G1], (idesc, a, wrong_b)), P.umma_gemm)

