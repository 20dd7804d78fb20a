"""Chapter 05, lesson 07 (05.07): FlashAttention-3 ideas.

On the CPU: the problem is chapter 04's FA2 problem on sm_90a with cuDNN's SDPA as the peer and more
key tiles; the launch refuses what it cannot run and picks the kernel by head dim; the cell compiles
for sm_90a (nvcc 13.0 here, as in CI) with every ablation configuration, without spills, serialized
wgmmas or local memory, setmaxnreg in effect where there is a producer; the rubric passes for the
reference and fails for the released stub and for setmaxnreg without ``__launch_bounds__(THREADS,
1)``; every mistake of tests/wrong/ch05_flash3.py applies and compiles.
Marked ``gpu``: the reference passes at every visible and hidden size (its checkpoint kernels too, and
those of a step-1-only body at the visible sizes), and each GPU mistake is
caught in a process of its own (the ping-pong hand-over to itself by the bounded wait's trap).
"""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

import grader  # noqa: F401  (simulator first)
from grader.check import check
from grader.cuda.launch import LaunchShape
from grader.notebooks import cell_source, run_cells
from grader.problems import attention as A
from grader.problems import flash3 as P
from tests.cells import check_in_own_process, compile_cell, run_rubric
from tests.conftest import ROOT, solution
from tests.wrong import ch05_flash3 as W

CH, NB, CELL, RUBRIC, KERNEL = W.CHAPTER, W.NOTEBOOK, W.CELL, W.RUBRIC, W.KERNEL
ABLATION = ["flash3<F3<128, 0, 1, 1>>", "flash3<F3<128, 1, 0, 1>>", "flash3<F3<128, 1, 1, 0>>", "flash3<F3<128, 1, 1, 1, 2>>"]
CHECKPOINT = ["flash3<F3<128, 1, 0, 0>>", "flash3<F3<64, 1, 0, 0>>"]     # the plain schedule: step 1 of the exercise

# The loop body as step 1 of the exercise asks for it: no turns, no overlap (wait_group 0, P V retired at
# once). It is the reference's body with the turns and the OVERLAP branches taken out (made from the
# notebook's text, never written out here), right for F3<D, 1, 0, 0> (the checkpoint cell) and not meant
# for the reference's switches.
STEP1_EDITS = [("      if (C::OVERLAP && j >= 2) pv_done(j - 2);", None), ("      my_turn();", None),
               ("      pass_turn();", None), ("      if constexpr (C::OVERLAP) course::wgmma_wait<1>();", None),
               ("      else course::wgmma_wait<0>();", "      course::wgmma_wait<0>();"),
               ("      if (!C::OVERLAP) pv_done(j - 1);", "      pv_done(j - 1);")]


def step1_source() -> str:
    """The reference cell with its loop body (the third solution region) rewritten by STEP1_EDITS."""
    src = reference()
    begin = src.index("// BEGIN SOLUTION", src.index("course::mbar_wait_or_trap(&v_full[sp]"))
    begin = src.index("\n", begin) + 1
    end = src.rindex("\n", 0, src.index("// END SOLUTION", begin)) + 1
    lines = src[begin:end].splitlines()
    for start, replacement in STEP1_EDITS:
        hits = [i for i, line in enumerate(lines) if line.startswith(start)]
        assert len(hits) == 1, f"the reference's loop body changed: {start.strip()!r} found {len(hits)} times"
        if replacement is None:
            del lines[hits[0]]
        else:
            lines[hits[0]] = replacement
    return src[:begin] + "\n".join(lines) + "\n" + src[end:]


def reference() -> str:
    return cell_source(solution(CH, NB), CELL)


def _compile(source: str, name: str, only: str | None = None):
    return compile_cell(source, name, only)


def _rubric(module):
    run_rubric(CH, NB, RUBRIC, f3=module)


# ---------------------------------------------------------------- the problem
def test_problem_is_fa2s_on_hopper_against_cudnn():
    f3, fa2 = P.flash3, A.fa2
    assert f3.reference is fa2.reference and f3.tolerance is fa2.tolerance and f3.make_inputs is fa2.make_inputs
    assert set(fa2.sizes) < set(f3.sizes) and set(fa2.hidden_sizes) < set(f3.hidden_sizes)
    assert (f3.arch, f3.target, f3.floor, f3.bench_size) == ("sm_90a", 0.6, 0.06, A.Attn(4, 32, 4096, 128))
    assert f3.peer.label == "SDPA cudnn" and P.flash3_causal.peer.label == "SDPA cudnn causal"
    assert P.flash3_causal.bench_size.causal and not f3.bench_size.causal
    for sizes in (f3.sizes, f3.hidden_sizes):
        assert {s.d for s in sizes} == {64, 128}
        assert any(s.causal and s.S % 128 and s.S > 1024 for s in sizes)             # ragged causal, many blocks
        assert any(s.kind == "growing" and s.keys > 1000 for s in sizes)              # the max moves tile after tile
        assert any(s.keys % 128 and s.Sk is not None for s in sizes)                  # Sq ≠ Sk, ragged keys
        assert any(s.keys == 0 for s in sizes)                                         # no key: O = 0


def _kernel(d):
    return SimpleNamespace(name=f"flash3<F3<{d}, 1, 1, 1>>", launch_shape=LaunchShape(384, 165888, 128, 128, d, 2, 0))


def test_the_launch_refuses_what_it_cannot_run():
    launch = P.flash3_launch(_kernel(128), _kernel(64))
    q = SimpleNamespace(shape=(1, 2, 100, 128))
    with pytest.raises(ValueError, match="as many queries as keys"):
        launch(q, SimpleNamespace(shape=(1, 2, 99, 128)), None, True, None)
    with pytest.raises(ValueError, match="head dimension 96"):
        launch(SimpleNamespace(shape=(1, 2, 100, 96)), SimpleNamespace(shape=(1, 2, 100, 96)), None, False, None)
    with pytest.raises(ValueError, match="evenly"):
        launch(SimpleNamespace(shape=(1, 6, 100, 64)), SimpleNamespace(shape=(1, 4, 100, 64)), None, False, None)
    with pytest.raises(ValueError, match="TILE_K"):
        P.flash3_launch(SimpleNamespace(name="k", launch_shape=None))


# ---------------------------------------------------------------- compiled here (no GPU)
@pytest.fixture(scope="module")
def module():
    return _compile(reference(), "f3_all")


def test_every_configuration_compiles_clean(module):
    from grader.cuda import sass

    assert set(module.kernel_names) == {KERNEL, "flash3<F3<64, 1, 1, 1>>", *ABLATION, *CHECKPOINT}
    for k in module.kernel_names:
        sass.require(module, k, present=["HGMMA.64x128x16.F32.BF16", "UTMALDG.3D", "SYNCS.PHASECHK"],
                     absent=["LDL", "STL", "HMMA", "LDG"], no_spills=True)
        sass.require_wgmma(module, k, max_pending=1)                  # no C7512 serialization
        if ", 0, 1, 1>>" not in k:                                    # a producer: setmaxnreg in effect
            assert sass.require_setmaxnreg(module, k, threads=384)["registers"] == 168
        else:                                                         # no producer: 256 threads, no setmaxnreg
            assert module.launch_shape(k).threads == 256 and "USETMAXREG" not in str(sass.opcodes(module, k))
    for k in (KERNEL, "flash3<F3<64, 1, 1, 1>>", "flash3<F3<128, 1, 0, 1>>"):                   # the overlap:
        assert _ex2_under_pv(sass.disassemble(module, k)) >= 64, k     # a tile's 64 ex2 run while P V does
    for k in ("flash3<F3<128, 1, 1, 0>>", *CHECKPOINT):                       # no overlap: nothing under P V
        assert _ex2_under_pv(sass.disassemble(module, k)) == 0, k
        assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" not in sass.disassemble(module, k), k


def test_the_checkpoint_builds_from_a_step1_body():
    """What the checkpoint cell asks for -- the loop body without the turns and the overlap -- compiles
    into the plain schedule's kernels clean (and the lesson's launch cell finds them)."""
    from grader.cuda import sass

    src = step1_source()
    assert "my_turn();" not in src.split("for (int j = 1; j < n; ++j)")[1].split("// the last tile's P V")[0]
    for k in CHECKPOINT:
        m = _compile(src, "f3_step1", k)
        sass.require(m, k, present=["HGMMA.64x128x16.F32.BF16", "UTMALDG.3D", "SYNCS.PHASECHK"],
                     absent=["LDL", "STL", "HMMA", "LDG"], no_spills=True)
        sass.require_wgmma(m, k, max_pending=1)
        assert sass.require_setmaxnreg(m, k, threads=384)["registers"] == 168
    launch = cell_source(solution(CH, NB), "launch_flash3")
    assert all(k in launch for k in CHECKPOINT) and all(k in reference().splitlines()[0] for k in CHECKPOINT)


def _ex2_under_pv(text: str) -> int:
    """The most MUFU.EX2 between a `wait_group 1` (DEPBAR.LE gsb0, 0x1) and the next `wait_group 0`:
    the softmax that runs while P V is on the tensor core. ptxas moves a wait_group 0 that follows the
    softmax in the same basic block above it (the cell's first version: 0 here, though its PTX had 64)."""
    best, count = 0, None
    for line in text.splitlines():
        if "DEPBAR.LE gsb0, 0x1" in line:
            count = 0
        elif "DEPBAR.LE gsb0, 0x0" in line and count is not None:
            best, count = max(best, count), None
        elif "MUFU.EX2" in line and count is not None:
            count += 1
    return best


def test_launch_shape_comes_from_the_type(module):
    s128, s64 = module.launch_shape(KERNEL), module.launch_shape("flash3<F3<64, 1, 1, 1>>")
    assert (s128.threads, s128.tile_m, s128.tile_n, s128.tile_k, s128.stages) == (384, 128, 128, 128, 3)
    assert (s64.tile_k, s64.stages) == (64, 3)
    assert s128.smem_bytes == 128 * 128 * 2 + 2 * 3 * 128 * 128 * 2 + 1024 <= 227 * 1024
    assert module.launch_shape("flash3<F3<128, 1, 1, 1, 2>>").stages == 2


def test_rubric_passes_for_the_reference_and_fails_for_the_stub(module):
    from grader.cuda.sass import RubricFailed

    _rubric(module)
    stub = cell_source(ROOT / "course" / CH / NB, CELL)
    assert stub.count("// YOUR CODE HERE") == 3 and "BEGIN SOLUTION" not in stub
    with pytest.raises(RubricFailed, match="not implemented yet"):
        _rubric(_compile(stub, "f3_stub", KERNEL))


@pytest.mark.parametrize("mistake", sorted(W.RUBRIC_CATCHES))
def test_rubric_catches(mistake):
    from grader.cuda.sass import RubricFailed

    module = _compile(W.cpp_variant(reference(), W.FLASH3_MISTAKES[mistake]), f"f3_{mistake}")
    with pytest.raises(RubricFailed, match=re.escape(W.RUBRIC_CATCHES[mistake])) as err:
        _rubric(module)
    assert "C7508" in str(err.value)


@pytest.mark.parametrize("mistake", sorted(W.ON_GPU))
def test_gpu_mistakes_apply_compile_and_pass_the_rubric(mistake):
    """The GPU-only mistakes compile and look right to the rubric: only running them shows them."""
    module = _compile(W.cpp_variant(reference(), W.FLASH3_MISTAKES[mistake]), f"f3_{mistake}")
    _rubric(module)


# ---------------------------------------------------------------- on a GPU
@pytest.mark.gpu
def test_reference_passes_on_a_gpu():
    ns = run_cells(solution(CH, NB), ["setup_flash3", "v_flash3", "launch_flash3"])
    check(ns["launch_f3"], P.flash3, quiet=True)
    check(ns["launch_f3"], P.flash3, hidden=True, quiet=True)
    check(ns["launch_f3_plain"], P.flash3, quiet=True)                  # the checkpoint, from the reference
    check(ns["launch_f3_plain"], P.flash3, hidden=True, quiet=True)


@pytest.mark.gpu
def test_a_step1_body_passes_the_checkpoint_on_a_gpu():
    line = check_in_own_process("""
        from grader.problems import flash3 as P
        from tests.test_ch05_flash3 import CHECKPOINT, _compile, step1_source
        m = _compile(step1_source(), "f3_step1")
        launch = P.flash3_launch(m[CHECKPOINT[0]], m[CHECKPOINT[1]])
    """, """
        check(launch, P.flash3, quiet=True)
    """)
    assert line == "RESULT: passed", line


@pytest.mark.gpu
@pytest.mark.parametrize("mistake", sorted(W.ON_GPU))
def test_mistakes_are_caught_in_their_own_process(mistake):
    line = check_in_own_process(f"""
        from grader.problems import flash3 as P
        from grader.problems.attention import Attn
        from tests.test_ch05_flash3 import W, _compile, reference
        m = _compile(W.cpp_variant(reference(), W.FLASH3_MISTAKES[{mistake!r}]), "wrong")
        launch = P.flash3_launch(m["flash3<F3<128, 1, 1, 1>>"], m["flash3<F3<64, 1, 1, 1>>"])
    """, """
        check(launch, P.flash3, sizes=[Attn(1, 2, 2000, 128, kind="growing"), Attn(1, 2, 1000, 128, Sk=65)], quiet=True)
    """)
    print(mistake, line)
    assert f"{P.flash3.name} failed at B=" in line, line
    if mistake in W.MUST_TRAP:                                # the kernel's own trap ended it, not the host's timeout
        assert "LAUNCH_FAILED" in line and "did not finish" not in line, line
