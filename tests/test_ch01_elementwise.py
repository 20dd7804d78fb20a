"""Chapter 01 (elementwise): the lessons' kernels pass their checks, wrong kernels are caught.

Runs in Numba's CUDA simulator (forced, so a GPU machine tests the same thing). The right
kernels are loaded from the solution notebooks themselves (grader.notebooks), the wrong ones
live in tests/wrong/ch01_elementwise.py. A last test compiles the lessons' kernels for
sm_90 (PTX, no GPU needed) when NVVM is available.
"""
import os

os.environ.setdefault("GRADER_FORCE_SIM", "1")

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import grader  # noqa: E402
from grader import formats  # noqa: E402
from grader.check import CheckFailed  # noqa: E402
from grader.compare import compare  # noqa: E402
from grader.problems import elementwise as P  # noqa: E402
from grader.notebooks import definitions  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
os.chdir(ROOT)                          # the notebooks' relative paths
SOL = ROOT / "solutions" / "01_elementwise"
COURSE = ROOT / "course" / "01_elementwise"
NB = {"02": "02_bandwidth_and_roofline.ipynb", "03": "03_coalescing_and_transpose.ipynb",
      "04": "04_vectors_half_precision_fusion.ipynb"}
CELLS = {"02": ["l02_setup", "l02_v1", "l02_v2", "l02_saxpy"],
         "03": ["l03_setup", "l03_v1", "l03_make_transpose", "l03_v2", "l03_v3", "l03_choose"],
         "04": ["l04_setup", "l04_formats", "l04_activations", "l04_v1", "l04_v2", "l04_bias_act"]}

_loaded = {}


def lesson(key, folder=SOL):
    if (key, folder) not in _loaded:
        _loaded[key, folder] = definitions(str(folder / NB[key]), cells=CELLS[key])
    return _loaded[key, folder]


# ------------------------------------------------------------------ the lessons' kernels pass
GRADED = [("02", "launch_saxpy", "saxpy"), ("03", "launch_transpose", "transpose"),
          ("04", "launch_bias_gelu", "bias_gelu")]
VERSIONS = [("02", "launch_saxpy_v1", "saxpy", None), ("02", "launch_saxpy_v2", "saxpy", None),
            ("03", "launch_naive", "transpose", None), ("03", "launch_v2", "transpose", [(67, 45), (1, 40)]),
            ("03", "launch_v3", "transpose", [(67, 45), (40, 72)]),
            ("04", "launch_v1", "bias_gelu", [(1, 1), (37, 129)]), ("04", "launch_v2", "bias_gelu", [(16, 512)])]


@pytest.mark.parametrize("key,launch,problem", GRADED, ids=[g[2] for g in GRADED])
def test_graded_solution_passes_visible_and_hidden(key, launch, problem):
    ns = lesson(key)
    grader.check(ns[launch], getattr(P, problem), quiet=True)
    grader.check(ns[launch], getattr(P, problem), hidden=True, quiet=True)


@pytest.mark.parametrize("key,launch,problem,sizes", VERSIONS, ids=[v[1] for v in VERSIONS])
def test_lesson_versions_pass(key, launch, problem, sizes):
    grader.check(lesson(key)[launch], getattr(P, problem), sizes=sizes, quiet=True)


def test_silu_from_the_same_template():
    ns = lesson("04")
    grader.check(ns["make_bias_act"](ns["silu"]), P.bias_silu, sizes=[(3, 7), (16, 512)], quiet=True)


# ------------------------------------------------------------------ wrong kernels are caught
def _wrong():
    from tests.wrong import ch01_elementwise as W
    return W


WRONG = [
    # (wrong launch, problem, sizes (None: visible), text the failure must contain)
    ("saxpy_no_guard", "saxpy", None, "outside an array"),
    ("saxpy_no_tail", "saxpy", None, "never written"),
    ("saxpy_half", "saxpy", None, "never written"),
    ("transpose_square_only", "transpose", None, "failed at shape=1×100"),
    ("transpose_whole_tiles_only", "transpose", None, "outside an array"),
    ("transpose_no_barrier", "transpose", None, "SharedMemoryRace"),
    ("bias_gelu_fp16_math", "bias_gelu", None, "NaN or inf"),
    ("bias_gelu_bf16_math", "bias_gelu", None, "values are wrong"),
    ("bias_gelu_half_rows", "bias_gelu", [(16, 512)], "never written"),
]


@pytest.mark.parametrize("name,problem,sizes,says", WRONG, ids=[w[0] for w in WRONG])
def test_wrong_kernel_is_caught(name, problem, sizes, says):
    with pytest.raises(CheckFailed) as err:
        grader.check(getattr(_wrong(), name), getattr(P, problem), sizes=sizes, quiet=True)
    assert says in str(err.value), str(err.value)


def test_missing_barrier_caught_every_time():
    # the simulator runs a block's threads as Python threads; fresh shared memory is NaN
    # (grader.sim), so reading before the writers ran fails however the threads interleave
    for _ in range(3):
        with pytest.raises(CheckFailed):
            grader.check(_wrong().transpose_no_barrier, P.transpose, sizes=[(40, 72)], quiet=True)


def test_fp16_math_fails_on_hidden_sizes_too():
    with pytest.raises(CheckFailed):
        grader.check(_wrong().bias_gelu_fp16_math, P.bias_gelu, hidden=True, quiet=True)


# ------------------------------------------------------------------ the stubs fail
@pytest.mark.skipif(not COURSE.exists(), reason="course/ not released")
@pytest.mark.parametrize("key,launch,problem", GRADED, ids=[g[2] for g in GRADED])
def test_released_stub_fails(key, launch, problem):
    ns = lesson(key, COURSE)
    with pytest.raises(CheckFailed, match="not implemented"):
        grader.check(ns[launch], getattr(P, problem), quiet=True)


# ------------------------------------------------------------------ bf16 in check.py
def test_bf16_round_trip_and_ties_to_even():
    vals = np.array([1.0, -2.0, 3.140625, 1e5, 0.0], dtype=np.float32)
    assert np.array_equal(formats.bf16_to_f32(formats.f32_to_bf16(vals)), [1.0, -2.0, 3.140625, 99840.0, 0.0])
    # 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties to even -> 1.0; just above rounds up
    assert formats.f32_to_bf16(np.float32(1 + 2**-8)) == 0x3F80
    assert formats.f32_to_bf16(np.float32(1 + 2**-8 + 2**-20)) == 0x3F81
    assert formats.f32_to_bf16(np.float32(1 + 3 * 2**-8)) == 0x3F82          # odd below: round up to even


def test_bf16_output_unwritten_is_reported():
    got = np.full(4, formats.BF16.poison, dtype=np.uint16)
    got[:2] = formats.f32_to_bf16(np.array([1.0, 2.0], np.float32))
    lines = compare("y", got, np.array([1.0, 2.0, 3.0, 4.0]), *formats.BF16.tolerance, dtype=formats.BF16)
    assert "2 of 4" in lines[0] and "never written" in "\n".join(lines)
    assert compare("y", got[:2], np.array([1.0, 2.0]), *formats.BF16.tolerance, dtype=formats.BF16) == []


def test_bf16_output_is_poisoned_with_its_own_nan():
    # uint16's own poison would be 0 (= bf16 +0.0, a plausible value); an Encoded output uses a NaN
    from grader.arrays import is_poison, output
    flat, view = output((2, 3), formats.BF16)
    host = flat.copy_to_host()
    assert host.dtype == np.uint16 and view.shape == (2, 3)
    assert is_poison(host, formats.BF16).all() and np.isnan(formats.bf16_to_f32(host)).all()


# ------------------------------------------------------------------ compiles for a GPU
def test_kernels_compile_for_sm90():
    script = ROOT / "dev" / "ch01_elementwise" / "compile.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GRADER_FORCE_SIM", None)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    r = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    if r.returncode == 77:
        pytest.skip(r.stdout.strip() or "no NVVM to compile with")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


# ------------------------------------------------------------------ the lessons' first hint is the check's hint
HINTED = [("01_threads_and_blocks.ipynb", "vector_add"), (NB["02"], "saxpy"), (NB["03"], "transpose"),
          (NB["04"], "bias_gelu")]


@pytest.mark.parametrize("notebook,problem", HINTED, ids=[h[1] for h in HINTED])
def test_first_hint_says_what_the_failing_check_says(notebook, problem):
    """A failing check prints the problem's hint; the lesson's first <details> hint opens with the same words."""
    from tests.hints import first_hints

    hint = " ".join(getattr(P, problem).hint.split())
    assert any(hint in h for h in first_hints(SOL / notebook)), hint
