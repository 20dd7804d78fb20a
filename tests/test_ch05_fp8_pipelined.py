"""Chapter 05, lesson 04's dev variants of 2026-11-25 (CPU only). The promotion one k tile behind the wgmmas
(dev/ch05_hopper/fp8_variants/pipelined.cu, CPU only; measured on an H100 in
results/ch05/fp8pipe_h100_2026-11-25.log: slower than the lesson's kernel). What the file's comments
claim about ptxas is checked here: the kernel compiles without serialized wgmmas (no C7514 in the log:
nothing is in flight across the loop's back edge) and without local memory; in MODE 2 (the promotion
behind a loop that runs once) each k step's four QGMMAs come before its 64 promotion FFMAs."""
from __future__ import annotations

import pytest

from tests.conftest import ROOT

SRC = ROOT / "dev" / "ch05_hopper" / "fp8_variants" / "pipelined.cu"
KERNEL = "fp8_gemm_p<Fp8p<6, 1, 8, 2>>"


@pytest.fixture(scope="module")
def module():
    from tests.cells import compile_cell

    return compile_cell(SRC.read_text(), "fp8_pipe", only=KERNEL)


def test_compiles_without_serialized_wgmma_or_spills(module):
    from grader.cuda import sass

    assert "C7514" not in module.log and "serialized" not in module.log, module.log[-2000:]
    sass.require(module, KERNEL, present=["QGMMA.64x128x32.F32.E4M3.E4M3", "UTMALDG.2D", "UTMASTG.2D"],
                 absent=["HGMMA", "LDL", "STL"], no_spills=True)
    ops = sass.opcodes(module, KERNEL, full=True)
    assert ops["QGMMA.64x128x32.F32.E4M3.E4M3"] == 12 and ops["FFMA"] == 128   # the first issue, two steps


def test_each_step_issues_its_four_wgmmas_before_the_promotion(module):
    from grader.cuda import sass

    seq = []                                      # QGMMA and FFMA in program order
    for line in sass.disassemble(module, KERNEL).splitlines():
        words = [w for w in line.replace(";", " ").split() if not w.startswith("/*")]
        if words and not words[0].startswith("@") and words[0].split(".")[0] in ("QGMMA", "FFMA"):
            seq.append(words[0].split(".")[0])
    runs = []                                     # (opcode, length) runs
    for op in seq:
        if runs and runs[-1][0] == op:
            runs[-1][1] += 1
        else:
            runs.append([op, 1])
    # the first issue (4 QGMMA), then per step 4 QGMMA followed by 64 FFMA, twice
    assert runs == [["QGMMA", 4], ["QGMMA", 4], ["FFMA", 64], ["QGMMA", 4], ["FFMA", 64]] or \
        runs == [["QGMMA", 8], ["FFMA", 64], ["QGMMA", 4], ["FFMA", 64]], runs


@pytest.mark.parametrize("patch", ["scale_groups.patch", "lean_chain.patch", "consumer_groups.patch",
                                   "consumer_groups4.patch"])
def test_scale_experiments_compile_without_local_memory(patch):
    import sys

    from grader.cuda import sass
    from tests.cells import compile_cell

    sys.path.insert(0, str(ROOT / "dev" / "ch05_hopper"))
    from variant_patch import variant_source

    lesson = "fp8_gemm<Fp8<128, 192, 4, 1, 8>>"
    # made against the lesson's cell before its scales came by TMA (cell_v6.cu)
    src = variant_source(ROOT / "dev" / "ch05_hopper" / "fp8_variants" / patch,
                         ROOT / "dev" / "ch05_hopper" / "fp8_variants" / "cell_v6.cu")
    module = compile_cell(src, "fp8_" + patch.split(".")[0], only=lesson)
    sass.require(module, lesson, present=["QGMMA.64x192x32.F32.E4M3.E4M3"], absent=["LDL", "STL"], no_spills=True)
    ops = sass.opcodes(module, lesson, full=True)
    if patch == "scale_groups.patch":             # no LDG: the scales come by cp.async (LDGSTS), read with LDS
        assert ops.get("LDGSTS.E", 0) == 2 and ops.get("ARRIVES.LDGSTSBAR.64.ARVCNT", 0) == 1, ops
        assert not any(k.startswith("LDG") and not k.startswith("LDGSTS") for k in ops) and ops["LDS"] >= 4, ops
    if patch.startswith("consumer_groups"):       # the scales staged (STS) and read back (LDS) by the consumers
        assert ops.get("LDS", 0) >= 4 and ops.get("STS", 0) >= 5 + 48, ops    # 48: the epilogue's bf16 pairs
    if patch == "consumer_groups4.patch":         # four k blocks of a row in one vector load where aligned
        assert ops.get("LDG.E.128.CONSTANT", 0) + ops.get("LDG.E.128", 0) >= 1, ops
