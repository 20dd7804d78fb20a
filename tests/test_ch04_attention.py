"""Chapter 04 (attention): references, the memory bound, wrong kernels caught, compiled lessons.

On the CPU (the simulator): the float64 references against brute force; grader.memory counts what
a launch allocates and the flash problem fails an S × S buffer; lessons 01–02's reference cells pass
and each of their mistakes (tests/wrong/ch04_attention.py) is caught by the graded checks; Numba
stand-ins of the C++ mistakes (fp16 P·V, GQA head, LSE-less merge, ignored page table, reads past
the end) are caught by the problems' inputs. The C++ lessons compile here: each rubric passes for the
reference and fails for the released stub and for a variant without ldmatrix and cp.async; every C++
mistake applies to its cell and compiles; the cells build for sm_80 too. Marked ``gpu``: the C++ references pass and each C++
mistake is caught, on a GPU.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import grader  # noqa: F401  (simulator first)
from grader.check import CheckFailed, check, run_case
from grader.formats import bf16_to_f64
from grader.integrity import trust
from grader.notebooks import cell_source, run_cells
from grader.problems import attention as P
from tests.cells import compile_cell, run_rubric
from tests.conftest import ROOT, lesson, solution
from tests.wrong import ch04_attention as W
from tests.wrong import caught

CH = "04_attention"
NB1, NB2 = "01_naive_attention.ipynb", "02_flash_attention_cuda_cores.ipynb"
CPP = {  # notebook: (the %%cuda cell, the rubric cell, the module's name)
    "03_fa2_tensor_cores.ipynb": ("v_fa2", "test_fa2_sass", "fa"),
    "04_decoding.ipynb": ("v_decode", "test_decode_sass", "dec"),
    "05_mla_decode.ipynb": ("v_mla", "test_mla_sass", "mla"),
}


# ---------------------------------------------------------------- references
def test_attention_reference_against_brute_force():
    rng = np.random.default_rng(1)
    for s in (P.Attn(1, 4, 7, 8, causal=True, Hkv=2), P.Attn(2, 2, 5, 4, Sk=9), P.Attn(1, 2, 3, 8, Sk=0)):
        inputs = P.fa2.make_inputs(rng, s)
        q, k, v = (bf16_to_f64(inputs[n]) for n in "qkv")
        got = P.fa2.reference(**inputs)["o"]
        for b in range(s.B):
            for h in range(s.H):
                hk = h // (s.H // s.kv_heads)
                for i in range(s.S):
                    keys = range(min(i + 1, s.keys) if s.causal else s.keys)
                    sc = np.array([q[b, h, i] @ k[b, hk, j] / np.sqrt(s.d) for j in keys])
                    want = (np.exp(sc - sc.max()) / np.exp(sc - sc.max()).sum()) @ v[b, hk, list(keys)] if len(sc) else 0
                    np.testing.assert_allclose(got[b, h, i], want, rtol=1e-12, atol=1e-12)


def test_paged_reference_equals_the_contiguous_one_and_caches_are_poisoned():
    size = P.Decode((1, 1031, 0, 64), 8, 2, 64, page=16)
    paged = P.decode_paged.make_inputs(np.random.default_rng(5), size)
    flat = P.decode.make_inputs(np.random.default_rng(5), size._replace(page=0))
    np.testing.assert_array_equal(P.decode_paged.reference(**paged)["o"], P.decode.reference(**flat)["o"])
    assert np.isnan(bf16_to_f64(flat["k_cache"][0, :, 1:])).all()            # past L_b: NaN
    assert not np.isnan(bf16_to_f64(flat["v_cache"][1, :, :1031])).any()
    used = {int(p) for b, L in enumerate(size.lens) for p in paged["block_table"][b, : -(-L // 16)]}
    unused = [p for p in range(paged["k_pages"].shape[0]) if p not in used]
    assert unused and np.isnan(bf16_to_f64(paged["k_pages"][unused])).all()  # unused pages: NaN
    assert sorted(paged["block_table"].ravel()) != list(range(paged["block_table"].size))   # shuffled


def test_mla_reference_against_brute_force():
    inputs = P.mla.make_inputs(np.random.default_rng(2), P.Mla((3, 0), 2))
    q, c = bf16_to_f64(inputs["q"]), bf16_to_f64(inputs["cache"])
    got = P.mla.reference(**inputs)["o"]
    sc = q[0] @ c[0, :3].T / np.sqrt(192)
    p = np.exp(sc - sc.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got[0], (p / p.sum(axis=1, keepdims=True)) @ c[0, :3, :512], rtol=1e-12)
    assert not got[1].any()                                                   # L = 0: O = 0


def test_every_size_set_has_the_cases_the_mistakes_need():
    for prob in (P.attention_naive, P.flash_attention, P.fa2):
        for sizes in ((prob.sim_sizes + prob.hidden_sim_sizes) if prob.simulator else (), prob.sizes + prob.hidden_sizes):
            if not sizes:
                continue
            kinds = {s.kind for s in sizes}
            assert {"large", "growing"} <= kinds and any(s.causal for s in sizes) and any(s.S % 32 for s in sizes)
    assert any(s.kind == "large_v" for s in P.fa2.sizes) and any(s.keys == 0 for s in P.fa2.sizes)
    assert any(s.Sk not in (None, s.S) for s in P.fa2.sizes) and any(s.Hkv for s in P.fa2.sizes)
    for prob in (P.decode, P.decode_paged, P.mla):
        lens = [L for s in prob.sizes + prob.hidden_sizes for L in s.lens]
        assert 0 in lens and 1 in lens and any(L % 64 for L in lens)
    assert {s.page for s in P.decode_paged.sizes} == {16, 32, 64}
    assert {s.Hq // s.Hkv for s in P.decode.sizes} >= {1, 4, 16}


def test_tolerances_scale_with_the_reduction_and_the_values():
    short, long = P.Attn(1, 1, 64, 64), P.Attn(1, 1, 8192, 64)
    assert P.fa2.tolerances(long, None)[1] > P.fa2.tolerances(short, None)[1]
    assert P.fa2.tolerances(short._replace(kind="large_v"), None)[1] > 100 * P.fa2.tolerances(short, None)[1]
    assert P.attention_naive.tolerances(short._replace(kind="large"), None)[1] > P.attention_naive.tolerances(short, None)[1]


# ---------------------------------------------------------------- grader.memory
def test_memory_counts_what_a_launch_allocates():
    from numba import cuda

    with grader.memory.track() as used:
        a = cuda.device_array((10, 10), np.float32)
        cuda.device_array_like(a)
        cuda.to_device(np.zeros(7))
        a[:3].copy_to_host()                       # views and copies back allocate nothing
    assert used.bytes == 400 + 400 + 56
    with grader.memory.track() as used:
        pass
    assert used.bytes == 0
    assert grader.memory.over_bound(100, 100) == [] and "at most 64 B" in grader.memory.over_bound(101, 64)[0]


def test_the_scratch_bound_separates_linear_from_quadratic():
    for s in P.flash_attention.sizes + P.flash_attention.hidden_sizes:
        assert P.flash_scratch_bytes(s) >= 16 * s.B * s.H * s.S * s.d        # an fp32 copy of q, k, v, o fits
        if s.S >= 300:
            assert 4 * s.B * s.H * s.S ** 2 > P.flash_scratch_bytes(s)       # an S × S buffer does not
    assert any(4 * s.B * s.H * s.S ** 2 > P.flash_scratch_bytes(s) for s in P.flash_attention.sim_sizes)
    assert any(4 * s.B * s.H * s.S ** 2 > P.flash_scratch_bytes(s) for s in P.flash_attention.hidden_sim_sizes)


# ---------------------------------------------------------------- lessons 01-02 (simulator)
@pytest.fixture(scope="module")
def l01():
    return lesson(CH, NB1, ["v1_naive"])


@pytest.fixture(scope="module")
def l02():
    return lesson(CH, NB2, ["v1_flash"])


def test_lesson01_reference_and_the_graders_copy_pass(l01):
    from grader.problems import attention_naive

    for launch in (l01["launch_naive"], attention_naive.launch):
        check(launch, P.attention_naive, sizes=[P.Attn(1, 2, 5, 8), P.Attn(1, 1, 9, 4, causal=True, kind="large")],
              quiet=True)
    size = P.Attn(1, 2, 6, 4)
    obs = run_case(l01["launch_naive"], P.attention_naive, size, P.attention_naive.make_inputs(np.random.default_rng(0), size))
    assert obs.scratch_bytes == 4 * 2 * 6 * 6                                # exactly the S × S buffer


def test_lesson02_reference_passes_and_allocates_nothing(l02):
    check(l02["launch_flash"], P.flash_attention, sizes=[P.Attn(1, 1, 65, 4, kind="growing"),
                                                        P.Attn(1, 2, 40, 4, causal=True, kind="large")], quiet=True)
    size = P.Attn(1, 1, 70, 8, causal=True)
    obs = run_case(l02["launch_flash"], P.flash_attention, size, P.flash_attention.make_inputs(np.random.default_rng(0), size))
    assert obs.scratch_bytes == 0 and obs.error is None


@pytest.mark.parametrize("mistake", sorted(W.NAIVE_MISTAKES))
def test_lesson01_mistakes_are_caught(mistake):
    assert caught(W.naive_with(mistake), P.attention_naive)


@pytest.mark.parametrize("mistake", sorted(W.FLASH_MISTAKES))
def test_lesson02_mistakes_are_caught(mistake):
    why = caught(W.flash_with(mistake), P.flash_attention)
    assert why and "allocated" not in why


def test_an_s_by_s_buffer_is_caught_by_the_memory_bound(l02):
    from grader.problems import attention_naive

    for launch in (W.flash_plus_n2_buffer(l02["launch_flash"]), attention_naive.launch):
        with pytest.raises(CheckFailed, match=r"allocated 16\.5 KiB of device memory .* at most 8\.1 KiB"):
            check(launch, P.flash_attention, sizes=[P.Attn(1, 1, 65, 4)], quiet=True)
    assert "allocated" in caught(W.flash_plus_n2_buffer(l02["launch_flash"]), P.flash_attention)   # the graded sizes
    check(W.flash_plus_n2_buffer(l02["launch_flash"]), P.attention_naive, sizes=[P.Attn(1, 1, 65, 4)], quiet=True)


# ---------------------------------------------------------------- stand-ins of the C++ mistakes (simulator)
def _sim(problem, sizes):
    p = problem.variant(simulator=True, arrays="numba", sim_sizes=sizes, hidden_sim_sizes=())
    trust(p)
    return p


def test_fp16_accumulation_of_pv_is_caught_by_large_values():
    fa2 = _sim(P.fa2, [P.Attn(1, 2, 9, 8, causal=True), P.Attn(1, 1, 33, 8, kind="large_v"),
                       P.Attn(1, 4, 6, 8, Sk=11, Hkv=2), P.Attn(1, 1, 5, 8, Sk=0)])
    check(W.attention_standin(), fa2, quiet=True)                           # the stand-in is right
    assert caught(W.attention_standin(fp16_acc=True), fa2)
    assert P.Attn(1, 1, 1031, 128, kind="large_v") in P.fa2.sizes            # …and the GPU sizes hold the case


DECODE_SIM = [P.Decode((5, 17, 0, 9), 8, 2, 8), P.Decode((3, 12), 4, 4, 8)]
PAGED_SIM = [P.Decode((5, 17, 0, 9), 8, 2, 8, page=4), P.Decode((3, 12), 4, 1, 8, page=8)]


@pytest.mark.parametrize("mistake", ["interleaved", "no_lse", "past_end"])
def test_decode_mistakes_are_caught(mistake):
    decode = _sim(P.decode, DECODE_SIM)
    check(W.decode_standin(), decode, quiet=True)
    assert caught(W.decode_standin(**{mistake: True}), decode)


@pytest.mark.parametrize("mistake", ["ignore_table", "past_end", "no_lse"])
def test_paged_decode_mistakes_are_caught(mistake):
    paged = _sim(P.decode_paged, PAGED_SIM)
    check(W.decode_standin(paged=True), paged, quiet=True)
    assert caught(W.decode_standin(paged=True, **{mistake: True}), paged)


# ---------------------------------------------------------------- C++ lessons, compiled here
def _compile(source: str, name: str | None = None):
    return compile_cell(source, name)


def _rubric(notebook: str, module):
    _, rubric_cell, name = CPP[notebook]
    run_rubric(CH, notebook, rubric_cell, **{name: module})


@pytest.mark.parametrize("notebook", sorted(CPP))
def test_rubric_passes_for_the_reference_and_fails_for_the_stub_and_plain_copies(notebook):
    from grader.cuda.sass import RubricFailed

    cell, _, _ = CPP[notebook]
    reference = cell_source(solution(CH, notebook), cell)
    _rubric(notebook, _compile(reference))
    stub = cell_source(ROOT / "course" / CH / notebook, cell)
    assert "// YOUR CODE HERE" in stub and "BEGIN SOLUTION" not in stub
    with pytest.raises(RubricFailed):
        _rubric(notebook, _compile(stub))
    with pytest.raises(RubricFailed, match="LDSM|LDGSTS"):
        _rubric(notebook, _compile(W.without_ldmatrix_and_cp_async(reference)))


@pytest.mark.parametrize("notebook", sorted(CPP))
def test_cells_compile_for_ampere_too(notebook):
    """The problems need compute capability 8.0 (arch="sm_80"): the cells build for it, no spills."""
    from grader.cuda import compile_cuda
    from grader.cuda.magic import parse_magic_line

    first, _, body = cell_source(solution(CH, notebook), CPP[notebook][0]).partition("\n")
    args = parse_magic_line(first[len("%%cuda"):])
    module = compile_cuda(body, name=args["name"] + "_sm80", arch="sm_80", kernels=args["kernels"])
    for k in module.kernel_names:
        r = module[k].resources
        assert r and r["spill_stores"] == 0 and r["spill_loads"] == 0, (k, r)


@pytest.mark.parametrize("notebook", sorted(CPP))
def test_launch_shapes_come_from_the_types_and_agree_with_the_release(notebook):
    cell, _, _ = CPP[notebook]
    module = _compile(cell_source(solution(CH, notebook), cell))
    for k in module.kernel_names:
        shape = module.launch_shape(k)
        assert shape is not None and shape.threads == module.elf.max_threads(module.symbol(k)), k
        assert shape.smem_bytes <= 227 * 1024
    src, course = (cell_source(ROOT / f / CH / notebook, cell) for f in ("solutions", "course"))
    stubbed = re.sub(r"(?m)^([ \t]*)// BEGIN SOLUTION\n.*?// END SOLUTION[^\n]*", r"\1// YOUR CODE HERE", src, flags=re.S)
    assert stubbed == course
    launch = cell_source(ROOT / "solutions" / CH / notebook, "launch")
    assert not re.search(r"\(\s*\d+\s*,\s*\d+|smem|threads\s*=", launch), launch   # nothing restated


CPP_CASES = [(family, mistake) for family, (_, _, ms) in W.CPP_MISTAKES.items() for mistake in sorted(ms)]


def _variant_source(family: str, mistake: str) -> tuple[str, str]:
    notebook, cell, mistakes = W.CPP_MISTAKES[family]
    return notebook, W.cpp_variant(cell_source(solution(CH, notebook), cell), mistakes[mistake])


@pytest.mark.parametrize("family,mistake", CPP_CASES)
def test_cpp_mistakes_apply_to_the_cells_and_compile(family, mistake):
    notebook, source = _variant_source(family, mistake)
    module = _compile(source)
    assert set(module.kernel_names) == set(_compile(cell_source(solution(CH, notebook), CPP[notebook][0])).kernel_names)


# ---------------------------------------------------------------- 04.03's two steps
FA2_STEP1 = [("if (__any_sync(0xffffffffu, grow)) {", "if (true) {")]     # always rescale: no vote
V3_ONLY = ' -k "fa2<V3<128>>" -k "fa2<V3<64>>"'


def _fa2_v3(source: str, name: str):
    """The 04.03 cell built with just the two V3 instantiations (the rubrics read only those)."""
    first, _, body = source.partition("\n")
    return _compile(re.sub(r' -k "[^"]*"', "", first) + V3_ONLY + "\n" + body, name)


def test_the_lazy_rescale_step_is_graded_by_its_vote():
    """04.03's checkpoint kernel (step 1: a rescale on every tile) passes the SASS rubric and fails
    step 2's rubric (no VOTE.ANY); the reference passes both."""
    from grader.cuda.sass import RubricFailed

    nb = "03_fa2_tensor_cores.ipynb"
    reference = cell_source(solution(CH, nb), "v_fa2")
    step1 = _fa2_v3(W.cpp_variant(reference, FA2_STEP1), "fa_step1")
    for module in (_fa2_v3(reference, "fa_ref"), step1):
        run_rubric(CH, nb, "test_fa2_sass", fa=module)
    run_rubric(CH, nb, "test_fa2_lazy", fa=_fa2_v3(reference, "fa_ref"))
    with pytest.raises(RubricFailed, match="VOTE.ANY"):
        run_rubric(CH, nb, "test_fa2_lazy", fa=step1)


def test_the_checkpoint_moves_points_and_keeps_the_total():
    """04.03 keeps its 11 points: the checkpoint (2) and the lazy-rescale rubric (1) took one point
    each from the SASS rubric and the two V3 correctness cells."""
    import nbformat

    cells = {c.get("id"): c.metadata.get("nbgrader", {}) for c in
             nbformat.read(solution(CH, "03_fa2_tensor_cores.ipynb"), as_version=4).cells}
    points = {k: m["points"] for k, m in cells.items() if m.get("grade")}
    assert points == {"test_fa2_sass": 1, "test_fa2_checkpoint": 2, "test_fa2_lazy": 1, "test_fa2_visible": 1,
                      "test_fa2_hidden": 1, "speed_fa2": 3, "speed_fa2_causal": 2}
    assert sum(points.values()) == 11


@pytest.mark.parametrize("notebook", sorted(CPP))
def test_an_untouched_lesson_never_launches_its_stub(notebook):
    """The released cell (with `// YOUR CODE HERE`) bound to the lesson's launch functions: each is
    refused before any host work, and the check's verdict is one line, "not implemented yet"."""
    from grader.check import explain
    from grader.cuda.module import StubLaunch
    from grader.notebooks import run_cells

    cell, _, name = CPP[notebook]
    course = ROOT / "course" / CH / notebook
    ns = run_cells(course, ["setup", "launch"], {name: _compile(cell_source(course, cell), name=f"{name}_stub")})
    for launch, problem in LAUNCHES[notebook]:
        prob = getattr(P, problem)
        size = prob.sizes[0]
        inputs = prob.make_inputs(np.random.default_rng(0), size)
        outs = [np.zeros(shape, np.uint16) for shape, _ in prob.outputs(size, inputs).values()]
        with pytest.raises(StubLaunch) as refused:
            ns[launch](*inputs.values(), *outs)
        why = explain(refused.value)
        assert why.startswith(f"not implemented yet: the cell `%%cuda {name}_stub` still holds") and "\n" not in why


# ---------------------------------------------------------------- on a GPU
def _launches(notebook: str, module) -> dict:
    """The notebook's launch cell run with ``module`` bound to the cell's module name."""
    return run_cells(solution(CH, notebook), ["setup", "launch"], {CPP[notebook][2]: module})


LAUNCHES = {"03_fa2_tensor_cores.ipynb": [("launch_fa2", "fa2"), ("launch_eager", "fa2"), ("launch_v1", "fa2"),
                                          ("launch_v2", "fa2")],
            "04_decoding.ipynb": [("launch_decode", "decode"), ("launch_v1", "decode"), ("launch_v2", "decode"),
                                  ("launch_paged", "decode_paged")],
            "05_mla_decode.ipynb": [("launch_mla", "mla"), ("launch_mla32", "mla")]}


@pytest.mark.gpu
@pytest.mark.parametrize("notebook", sorted(CPP))
def test_cpp_references_pass_on_a_gpu(notebook):
    ns = _launches(notebook, _compile(cell_source(solution(CH, notebook), CPP[notebook][0])))
    for launch, problem in LAUNCHES[notebook]:
        check(ns[launch], getattr(P, problem), quiet=True)
        check(ns[launch], getattr(P, problem), hidden=True, quiet=True)


@pytest.mark.gpu
def test_the_checkpoint_kernel_earns_the_correctness_points_on_a_gpu():
    """04.03's step 1 (a rescale on every tile, no vote) is correct: the checkpoint and the V3 checks pass."""
    nb = "03_fa2_tensor_cores.ipynb"
    ns = _launches(nb, _compile(W.cpp_variant(cell_source(solution(CH, nb), "v_fa2"), FA2_STEP1), name="fa_step1"))
    for launch in ("launch_eager", "launch_fa2"):
        check(ns[launch], P.fa2, quiet=True)
        check(ns[launch], P.fa2, hidden=True, quiet=True)


@pytest.mark.gpu
@pytest.mark.parametrize("family,mistake", CPP_CASES)
def test_cpp_mistakes_are_caught_on_a_gpu(family, mistake):
    notebook, source = _variant_source(family, mistake)
    ns = _launches(notebook, _compile(source, name=f"wrong_{mistake}"))
    launch, problem = ("launch_paged", "decode_paged") if mistake == "page_ignored" else LAUNCHES[notebook][0]
    why = caught(ns[launch], getattr(P, problem))
    assert why, f"{family} {mistake}: not caught"
    print(f"{family} {mistake}: {why.splitlines()[0]} | {why.splitlines()[1][:160]}")


def test_the_judge_applies_the_memory_bound(tmp_path):
    """Through the judge (the learner's code in its sandbox): lesson 02's right kernel launched with
    an S × S scratch buffer loses the correctness cells, saying how much it allocated."""
    import nbformat

    from grader.autograde import grade_lesson
    from grader.judge.sandbox import choose

    nb = nbformat.read(solution(CH, NB2), as_version=4)
    cell = next(c for c in nb.cells if c.get("id") == "v1_flash")
    cell.source += ("\n\n_launch_flash_alone = launch_flash\n\n\n"
                    "def launch_flash(q, k, v, causal, o):\n"
                    "    B, H, S, _ = q.shape\n"
                    "    scratch = cuda.device_array((B, H, S, S), np.float32)\n"
                    "    _launch_flash_alone(q, k, v, causal, o)\n")
    path = tmp_path / NB2
    nbformat.write(nb, path)
    result, _ = grade_lesson(solution(CH, NB2), ROOT / "course" / CH / NB2, path, choose(), feedback=False)
    got = {v.grade_id: v for v in result.verdicts}
    for cell_id in ("test_flash_visible", "test_flash_hidden"):
        assert got[cell_id].score == 0 and "allocated" in got[cell_id].reason, got[cell_id]


# ---------------------------------------------------------------- the lessons as a learner reads them
LAB_LOG = re.compile(r"20\d\d-\d\d-\d\d|\bresults/|\bdev/|\brun ?\d+\b|_h100_|_h200_|\bsession\b", re.I)
TEX_OUTSIDE_MATH = re.compile(r"[\^_]\{|\\(?:frac|sqrt|max|sum|alpha|infty|mathrm|text|top)\b")


def _markdown(notebook: str) -> list:
    import nbformat

    return [c for c in nbformat.read(solution(CH, notebook), as_version=4).cells if c.cell_type == "markdown"]


def _prose(text: str) -> str:
    """Markdown with code blocks, code spans and math removed: what the markdown renderer sees as text."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", " ", text)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    return re.sub(r"\$[^$\n]+\$", " ", text)


ALL = sorted(p.name for p in (ROOT / "solutions" / CH).glob("*.ipynb"))


@pytest.mark.parametrize("notebook", ALL)
def test_a_lesson_teaches_and_links_its_lab_log_once(notebook):
    """The issue-32 shape: the lab log out (<= 10% of the prose words in cells that cite dates, results/,
    dev/ or runs, as /work/shared/tools/lesson_stats.py counts), linked once; a "What you will write"
    box; hints that open one at a time; try it yourself; takeaways; the glossary linked."""
    cells = _markdown(notebook)
    words = sum(len(c.source.split()) for c in cells)
    logged = sum(len(c.source.split()) for c in cells if LAB_LOG.search(c.source))
    assert logged <= 0.10 * words, (notebook, logged, words)
    text = "\n".join(c.source for c in cells)
    assert text.count("Behind these numbers: `results/ch04/NOTES.md`") == 1
    assert "What you will write" in text or "**Step 1, the checkpoint**" in text
    assert text.count("<details><summary>Hint ") >= 3 and text.count("<details>") == text.count("</details>")
    for heading in ("## Try it yourself", "## Takeaways", "(../GLOSSARY.md)"):
        assert heading in text, (notebook, heading)


@pytest.mark.parametrize("notebook", ALL)
def test_tex_renders(notebook):
    """No TeX outside $…$ / $$…$$ (JupyterLab shows it raw: 04.02's `^{(d+1)}`), $ signs paired, and no
    line starting with "+ " (a bullet in markdown)."""
    for c in _markdown(notebook):
        prose = _prose(c.source)
        assert not TEX_OUTSIDE_MATH.search(prose), (notebook, c.id, TEX_OUTSIDE_MATH.search(prose).group(0))
        assert "$" not in prose, (notebook, c.id)
        assert not re.search(r"(?m)^\s*\+ ", c.source), (notebook, c.id)


def test_the_first_hint_opens_with_the_checks_own_hint():
    """A failed check prints the problem's hint; the lesson's first hint starts with the same words."""
    first = {"01_naive_attention.ipynb": P.attention_naive, "02_flash_attention_cuda_cores.ipynb": P.flash_attention,
             "03_fa2_tensor_cores.ipynb": P.fa2, "04_decoding.ipynb": P.decode, "05_mla_decode.ipynb": P.mla}
    for notebook, problem in first.items():
        text = next(c.source for c in _markdown(notebook) if "<details><summary>Hint 1" in c.source)
        hint1 = " ".join(text.split("<details><summary>Hint 1")[1].split("</summary>", 1)[1].split())
        opening = " ".join(problem.hint.split(". ")[0].split())
        assert hint1.startswith(opening), (notebook, opening[:60])


def test_the_lessons_figures_exist_small_and_released():
    """Every figures/… a chapter-04 lesson shows is committed beside the solution and in the release, < 100 KB,
    and its script reproduces it."""
    import subprocess
    import sys

    for notebook in ALL:
        for c in _markdown(notebook):
            for rel in re.findall(r"\]\((figures/[^)]+)\)", c.source):
                src, released = ROOT / "solutions" / CH / rel, ROOT / "course" / CH / rel
                assert src.is_file() and released.is_file(), rel
                assert src.stat().st_size < 100_000 and src.read_bytes() == released.read_bytes(), rel
    before = (ROOT / "solutions" / CH / "figures" / "fa2_p_fragment.svg").read_bytes()
    subprocess.run([sys.executable, str(ROOT / "tools" / "figures" / "04_03_p_fragment.py")], check=True,
                   capture_output=True)
    assert (ROOT / "solutions" / CH / "figures" / "fa2_p_fragment.svg").read_bytes() == before
