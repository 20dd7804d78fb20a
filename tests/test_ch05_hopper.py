"""Chapter 05 (Hopper): lesson 01, TMA and the mbarrier.

On the CPU: the problem keeps only shapes TMA can describe and is ragged against the box; the
layout rules and the launch function's refusal; the tensor map's bytes stay 64-byte aligned; the
cell compiles for sm_90a, plain sm_90 and sm_100a without spills; the rubric passes for the
reference and fails for the released stub, for the same transpose moved by plain loads and stores,
and for the kernel without the async-proxy fence; every mistake of tests/wrong/ch05_hopper.py
applies and compiles; the launch shape comes from the type. Marked ``gpu``: the reference passes,
each mistake is caught (those that can hang in a process of their own, where the GPU timeout ends
them with a message), and so are maps encoded without the swizzle the kernel reads.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

import grader  # noqa: F401  (simulator first)
from grader.check import check
from grader.cuda import tma
from grader.cuda.launch import LaunchShape
from grader.notebooks import cell_source, run_cells
from grader.problems import hopper as P
from tests.cells import compile_cell, run_rubric
from tests.conftest import ROOT, solution
from tests.wrong import ch05_hopper as W
from tests.wrong import caught

CH, NB, CELL, RUBRIC, KERNEL = W.CHAPTER, W.NOTEBOOK, W.CELL, "test_tma_sass", "tma_transpose<Tp<8, 2>>"


def reference() -> str:
    return cell_source(solution(CH, NB), CELL)


def _compile(source: str, name: str | None = None):
    return compile_cell(source, name)


def _rubric(module):
    run_rubric(CH, NB, RUBRIC, tp=module)


# ---------------------------------------------------------------- the problem and TMA's rules
def test_sizes_are_what_tma_can_describe_and_ragged_against_the_box():
    sizes = P.tma_transpose.sizes + P.tma_transpose.hidden_sizes
    for m, n in sizes:
        for shape in ((m, n), (n, m)):                                   # a, then t
            assert not tma.layout_problems(shape, 4 * shape[1], 4, (32, 32), "128B"), shape
    assert any(m % 32 for m, _ in sizes) and any(n % 32 for _, n in sizes)
    assert any(m < 32 for m, _ in sizes) and any(n < 32 for _, n in sizes)   # smaller than one box
    assert any(m > 32 * 8 * 100 for m, _ in sizes)                            # many strips
    assert P.tma_transpose.arch == "sm_90" and not P.tma_transpose.simulator
    assert (P.tma_transpose.target, P.tma_transpose.floor) == (0.70, 0.35)
    assert P.tma_transpose.peer.label == "copy bandwidth"
    why = P.tma_transpose.unavailable(True, None)
    assert "compiled and inspected only" in why and "TMA" in why
    assert "compute capability 8.0" in P.tma_transpose.unavailable(False, (8, 0))


def test_layout_rules_say_what_is_wrong():
    assert "multiple of 16 B" in tma.layout_problems((1023, 517), 4 * 517, 4, (32, 32))[0]
    assert "at most 128 B" in tma.layout_problems((64, 64), 256, 4, (32, 64), "128B")[0]
    assert "1 … 256" in tma.layout_problems((64, 1024), 4096, 4, (32, 512), "none")[0]
    assert "address" in tma.layout_problems((64, 64), 256, 4, (32, 32), address=8)[0]
    assert tma.layout_problems((1, 5), 20, 4, (1, 4), "none") == []          # one row: no stride rule


def test_the_launch_refuses_shapes_tma_cannot_describe():
    kernel = SimpleNamespace(name=KERNEL, launch_shape=LaunchShape(128, 17408, 256, 32, 0, 2))
    launch = P.tma_transpose_launch(kernel)
    with pytest.raises(ValueError, match="multiples of 4"):
        launch(SimpleNamespace(shape=(1023, 516)), SimpleNamespace(shape=(516, 1023)))
    with pytest.raises(ValueError, match="TILE_M and TILE_N"):
        P.tma_transpose_launch(SimpleNamespace(name="k", launch_shape=None))


def test_a_tensor_map_keeps_its_bytes_64_byte_aligned():
    raw = bytes(range(128))
    m = tma.TensorMap(raw, shape=(4, 4), box=(4, 4), dtype="float32", swizzle="none")
    assert m.param_address() % 64 == 0 and bytes(m) == raw
    with pytest.raises(ValueError):
        tma.TensorMap(raw[:64], shape=(4, 4), box=(4, 4), dtype="float32", swizzle="none")


# ---------------------------------------------------------------- compiled here (no GPU)
def test_rubric_passes_for_the_reference_and_fails_for_the_stub_and_plain_loads():
    from grader.cuda.sass import RubricFailed

    _rubric(_compile(reference()))
    stub = cell_source(ROOT / "course" / CH / NB, CELL)
    assert stub.count("// YOUR CODE HERE") == 4 and "BEGIN SOLUTION" not in stub
    with pytest.raises(RubricFailed, match="not implemented yet"):
        _rubric(_compile(stub))
    with pytest.raises(RubricFailed) as plain:
        _rubric(_compile(W.PLAIN_LOADS, name="plain"))
    text = str(plain.value)
    assert "missing UTMALDG.2D" in text and "missing UTMASTG.2D" in text
    assert "forbidden LDG" in text and "forbidden STG" in text


def test_rubric_catches_the_missing_proxy_fence():
    from grader.cuda.sass import RubricFailed

    source = W.cpp_variant(reference(), W.TMA_MISTAKES["no_proxy_fence"])
    with pytest.raises(RubricFailed, match="UTMASTG.2D at .* follows STS at .* with no FENCE.VIEW.ASYNC.S"):
        _rubric(_compile(source, name="nofence"))


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a", "sm_100a"])
def test_the_cell_builds_for_every_gpu_with_tma(arch):
    """Plain TMA is sm_90 (no 'a' features): the cell builds for Hopper and Blackwell, no spills."""
    from grader.cuda import compile_cuda, sass
    from grader.cuda.magic import parse_magic_line

    first, _, body = reference().partition("\n")
    args = parse_magic_line(first[len("%%cuda"):])
    module = compile_cuda(body, name=f"tp_{arch}", arch=arch, kernels=args["kernels"])
    sass.require(module, KERNEL, present=["UTMALDG.2D", "UTMASTG.2D"], absent=["LDG", "STG", "LDL", "STL"],
                 no_spills=True)


def test_launch_shape_comes_from_the_type_and_agrees_with_the_release():
    module = _compile(reference())
    shape = module.launch_shape(KERNEL)
    assert (shape.threads, shape.tile_m, shape.tile_n, shape.stages) == (128, 256, 32, 2)
    assert shape.threads == module.elf.max_threads(module.symbol(KERNEL))
    assert shape.smem_bytes == 2 * 2 * 4096 + 1024
    src, course = (cell_source(ROOT / f / CH / NB, CELL) for f in ("solutions", "course"))
    stubbed = re.sub(r"(?m)^([ \t]*)// BEGIN SOLUTION\n.*?// END SOLUTION[^\n]*", r"\1// YOUR CODE HERE", src, flags=re.S)
    assert stubbed == course
    launch = cell_source(ROOT / "solutions" / CH / NB, "launch")
    assert not re.search(r"\(\s*\d+\s*,\s*\d+|smem|threads\s*=", launch), launch   # nothing restated


@pytest.mark.parametrize("mistake", sorted(W.TMA_MISTAKES))
def test_mistakes_apply_to_the_cell_and_compile(mistake):
    module = _compile(W.cpp_variant(reference(), W.TMA_MISTAKES[mistake]), name=f"wrong_{mistake}")
    assert module.kernel_names == _compile(reference()).kernel_names and KERNEL in module.kernel_names


# ---------------------------------------------------------------- on a GPU
def _launch(module, **kw):
    return P.tma_transpose_launch(module[KERNEL], **kw)


@pytest.mark.gpu
def test_reference_passes_on_a_gpu():
    ns = run_cells(solution(CH, NB), ["setup", "launch"], {"tp": _compile(reference())})
    check(ns["launch_tma"], P.tma_transpose, quiet=True)
    check(ns["launch_tma"], P.tma_transpose, hidden=True, quiet=True)


@pytest.mark.gpu
@pytest.mark.parametrize("mistake", sorted(set(W.TMA_MISTAKES) - W.HANGS))
def test_mistakes_are_caught_on_a_gpu(mistake):
    module = _compile(W.cpp_variant(reference(), W.TMA_MISTAKES[mistake]), name=f"wrong_{mistake}")
    why = caught(_launch(module), P.tma_transpose)
    print(f"{mistake}: {why.splitlines()[0] if why else 'NOT caught by the values'}")
    if mistake in W.RUBRIC_CATCHES:
        return                     # caught by the rubric on every machine; the values may not show it
    assert why, f"{mistake}: not caught"


@pytest.mark.gpu
def test_maps_without_the_swizzle_the_kernel_reads_are_caught_on_a_gpu():
    why = caught(_launch(_compile(reference()), swizzle="none"), P.tma_transpose)
    assert why and "wrong" in why
    print("swizzle none:", why.splitlines()[0])


@pytest.mark.gpu
@pytest.mark.parametrize("mistake", sorted(W.HANGS))
def test_mistakes_that_can_hang_are_caught_in_their_own_process(mistake):
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from grader.check import CheckFailed, check
        from grader.problems import hopper as P
        from tests.test_ch05_hopper import W, _compile, _launch, reference
        module = _compile(W.cpp_variant(reference(), W.TMA_MISTAKES[{mistake!r}]), name="hang")
        try:
            check(_launch(module), P.tma_transpose, sizes=[(64, 64)], quiet=True)
            print("RESULT: passed")
        except CheckFailed as e:
            print("RESULT:", str(e).replace(chr(10), " | "))
        sys.stdout.flush()
        os._exit(0)                  # the kernel still spins: leave without waiting for it
    """)
    env = {**os.environ, "GRADER_GPU_TIMEOUT": "5", "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT:")), r.stdout[-500:] + r.stderr[-1500:])
    print(mistake, line)
    assert "failed at shape" in line, line
    if mistake in W.MUST_TIME_OUT:
        assert "did not finish within 5 s" in line, line
