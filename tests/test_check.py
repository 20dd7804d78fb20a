"""grader.check: right kernels pass, wrong ones fail with a reason a learner can act on."""
import numpy as np
import pytest

import grader
from grader.arrays import poisoned
from grader.check import CheckFailed
from grader.compare import compare, guard_violation
from grader.problems import elementwise as P
from tests.wrong import elementwise as W


def failure(launch, **kw) -> str:
    with pytest.raises(CheckFailed) as e:
        grader.check(launch, P.vector_add, quiet=True, **kw)
    return str(e.value)


def test_right_kernel_passes_visible_and_hidden(capsys):
    grader.check(W.launcher(W.add_right), P.vector_add)
    grader.check(W.launcher(W.add_right), P.vector_add, hidden=True)
    assert "vector add correct" in capsys.readouterr().out


def test_missing_bounds_guard_is_caught():
    msg = failure(W.launcher(W.add_no_guard), sizes=[1000])   # 1000 is not a multiple of 128
    assert "guard" in msg and "n=1000" in msg


def test_grid_rounded_down_leaves_the_tail_unwritten():
    msg = failure(W.launcher(W.add_right, round_up=False), sizes=[1000])
    assert "never written" in msg and "Round the block count up" in msg


def test_off_by_one_index_is_caught():
    msg = failure(W.launcher(W.add_off_by_one), sizes=[300])
    assert "at 0: got never written" in msg or "values are wrong" in msg


def test_nan_never_passes():
    msg = failure(W.launcher(W.add_nan), sizes=[257])
    assert "NaN or inf" in msg and "got nan" in msg


def test_half_written_output_is_caught():
    msg = failure(W.launcher(W.add_half), sizes=[512])
    assert "256 of 512 elements wrong" in msg


def test_untouched_output_is_caught():
    msg = failure(W.launch_nothing, sizes=[100])
    assert "no element was written" in msg


def test_wrong_dtype_result_is_refused():
    msg = failure(W.launch_returns_float64, sizes=[100])
    assert "returned a value" in msg


def test_low_precision_math_is_caught():
    # fp16 has 11 bits of mantissa: a float32 add done in fp16 is off by ~1e-3 relative
    msg = failure(W.launcher(W.add_in_fp16), sizes=[1000])
    assert "values are wrong" in msg


def test_modified_input_is_caught():
    msg = failure(W.launcher(W.add_into_input), sizes=[100])
    assert "input `a` was modified" in msg


def test_failure_names_the_seed_and_replays_with_it():
    msg = failure(W.launcher(W.add_half), sizes=[64])
    seed = int(msg.split("seed ")[1].split(")")[0])
    msg2 = failure(W.launcher(W.add_half), sizes=[64], seed=seed)
    assert msg.splitlines()[1:3] == msg2.splitlines()[1:3]   # same inputs, same mismatches


def test_each_call_draws_new_inputs():
    seen = []

    def spy(a, b, c):
        seen.append(a.copy_to_host()[0])
        W.launcher(W.add_right)(a, b, c)

    grader.check(spy, P.vector_add, sizes=[4, 4], quiet=True)
    assert seen[0] != seen[1]


def test_stub_says_not_implemented():
    def stub(a, b, c):
        raise NotImplementedError()

    assert "not implemented yet" in failure(stub, sizes=[10])


def test_write_past_the_end_is_caught_by_the_guard_zone():
    # On a GPU an out-of-bounds write does not fault; the poisoned guard zone after
    # every array catches it. Simulate such a write by writing into the padded buffer.
    flat = poisoned((10,), np.float32)
    flat[:10] = 1.0
    assert guard_violation("c", flat, 10, np.float32) is None
    flat[12] = 5.0
    msg = guard_violation("c", flat, 10, np.float32)
    assert "wrote past the end" in msg and "flat index 12" in msg


def test_compare_tolerances_and_poison():
    want = np.arange(5, dtype=np.float64)
    got = want.astype(np.float32)
    assert compare("c", got, want, 1e-6, 0) == []
    got[2] = poisoned((1,), np.float32)[0]
    lines = compare("c", got, want, 1e-6, 0)
    assert "at 2: got never written" in "\n".join(lines)
    inf = want.astype(np.float32)
    inf[1] = np.inf
    assert compare("c", inf, want, 1.0, 1e9)   # inf never passes, whatever the tolerance


def test_hung_kernel_is_stopped_with_a_clear_message():
    from grader import sim

    with sim.time_limit(2):
        msg = failure(W.launcher(W.add_forever), sizes=[64])
    assert "did not finish within 2 s" in msg
    grader.check(W.launcher(W.add_right), P.vector_add, sizes=[64], quiet=True)  # the simulator still works
