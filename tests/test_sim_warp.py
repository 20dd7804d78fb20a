"""Warp intrinsics in Numba's CUDA simulator (grader.sim.warp).

Runs under the simulator: NUMBA_ENABLE_CUDASIM is set here, before numba is
imported, so the module works without a conftest.  Expected values are
computed by hand from the CUDA rules, not by calling the implementation.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import importlib.util  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda  # noqa: E402

from grader.sim import warp as sim_warp  # noqa: E402
from grader.sim.warp import WarpSyncError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FULL = 0xFFFFFFFF

pytestmark = pytest.mark.skipif(
    os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
    reason="needs the CUDA simulator (numba was imported without it)",
)


def _load_warp_kernels():
    path = ROOT / "dev" / "ch02_reduce" / "warp_kernels.py"
    spec = importlib.util.spec_from_file_location("warp_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


wk = _load_warp_kernels()
sim_warp.install()


def per_lane(n, f):
    """Array of f(i, lane, warp_base) for i in range(n)."""
    return np.array([f(i, i % 32, i - i % 32) for i in range(n)])


def bits(lanes):
    return sum(1 << lane for lane in lanes)


def int32(value):
    return np.int32(value - (1 << 32) if value >= 1 << 31 else value)


# ------------------------------------------------------------ installation


def test_install_is_idempotent_and_patches_the_fake_module():
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    assert sim_warp.install() is True
    assert sim_warp.install() is True
    for name in ("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync",
                 "ballot_sync", "all_sync", "any_sync", "eq_sync",
                 "match_any_sync", "match_all_sync", "activemask",
                 "lanemask_lt", "syncwarp"):
        assert callable(getattr(FakeCUDAModule, name))
    assert sim_warp.is_installed()


@pytest.mark.gpu   # without a GPU, grader always chooses the simulator
def test_install_is_a_noop_without_the_simulator():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = str(ROOT)
    code = "from grader.sim import warp as sim_warp; print(sim_warp.install())"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
    assert done.stderr == ""


# ------------------------------------------------------------ shuffles


def test_shfl_sync_reads_src_lane_modulo_32():
    out = wk.run_case("shfl_idx")["out"]
    x = np.arange(64) * 10 + 1
    src = (np.arange(64) * 7 + 3) % 40
    np.testing.assert_array_equal(out, per_lane(64, lambda i, l, b: x[b + src[i] % 32]))


def test_shfl_up_keeps_own_value_below_delta():
    out = wk.run_case("shfl_up")["out"]
    x = np.arange(64) * 0.5 + 1
    np.testing.assert_array_equal(out, per_lane(64, lambda i, l, b: x[i] if l < 3 else x[i - 3]))


def test_shfl_down_int64_keeps_high_bits_and_own_value_at_the_top():
    out = wk.run_case("shfl_down_int64")["out"]
    x = np.arange(64, dtype=np.int64) * (1 << 33) + 5
    np.testing.assert_array_equal(out, per_lane(64, lambda i, l, b: x[i] if l > 26 else x[i + 5]))
    assert out.dtype == np.int64


def test_shfl_xor():
    out = wk.run_case("shfl_xor_float64")["out"]
    x = np.arange(64.0) ** 2 - 0.25
    np.testing.assert_array_equal(out, per_lane(64, lambda i, l, b: x[b + (l ^ 6)]))


def test_xor_butterfly_all_reduce_gives_every_lane_the_warp_sum():
    out = wk.run_case("xor_allreduce")["out"]
    x = np.arange(96) % 13
    np.testing.assert_array_equal(out, per_lane(96, lambda i, l, b: x[b:b + 32].sum()))


def test_partial_masks_form_independent_groups():
    out = wk.run_case("partial_mask_broadcast")["out"]
    x = np.arange(64) * 3 + 7
    np.testing.assert_array_equal(out, per_lane(64, lambda i, l, b: x[b + l % 2]))


def test_mask_of_lower_half_leaves_upper_half_alone():
    out = wk.run_case("lower_half_xor")["out"]
    x = np.arange(32) + 100
    np.testing.assert_array_equal(out, per_lane(32, lambda i, l, b: x[l ^ 3] if l < 16 else x[i]))


def test_partial_last_warp_has_16_lanes():
    res = wk.run_case("partial_last_warp")
    x = np.arange(48) % 5
    np.testing.assert_array_equal(res["sums"], per_lane(48, lambda i, l, b: x[i - i % 16:i - i % 16 + 16].sum()))
    ballot0 = int32(bits(l for l in range(32) if x[l] > 0))
    ballot1 = int32(bits(l for l in range(16) if x[32 + l] > 0))
    np.testing.assert_array_equal(res["votes"], [ballot0] * 32 + [ballot1] * 16)


def test_warps_follow_linear_thread_id_in_2d_blocks():
    out = wk.run_case("two_d_block")["out"]
    expected = np.zeros((8, 8), np.int64)
    expected[4:] = 400  # linear id 32 is (x=0, y=4)
    np.testing.assert_array_equal(out, expected)


# -------------------------------------------------------------- width


@cuda.jit
def width_kernel(x, out, mode, operand, width):
    i = cuda.grid(1)
    if mode == 0:
        out[i] = cuda.shfl_sync(FULL, x[i], operand, width)
    elif mode == 1:
        out[i] = cuda.shfl_up_sync(FULL, x[i], operand, width=width)
    elif mode == 2:
        out[i] = cuda.shfl_down_sync(FULL, x[i], operand, width=width)
    else:
        out[i] = cuda.shfl_xor_sync(FULL, x[i], operand, width=width)


def cuda_c_width_rule(mode, i, lane, base, operand, width):
    """Source lane of CUDA C __shfl_*_sync(mask, var, operand, width)."""
    seg = lane - lane % width
    if mode == 0:
        return base + seg + operand % width
    if mode == 1:
        return i - operand if lane - seg >= operand else i
    if mode == 2:
        return i + operand if lane - seg + operand < width else i
    j = lane ^ operand
    return base + j if j < seg + width else i


@pytest.mark.parametrize("mode, operand, width", [
    (0, 3, 8), (0, 13, 8), (0, 31, 16),
    (1, 2, 8), (1, 5, 4),
    (2, 3, 16), (2, 1, 2),
    (3, 16, 16), (3, 5, 4), (3, 1, 8),
])
def test_width_follows_cuda_c_segments(mode, operand, width):
    x = np.arange(64, dtype=np.int32) * 3 + 1
    out = np.zeros(64, np.int32)
    width_kernel[1, 64](x, out, mode, operand, width)
    expected = per_lane(64, lambda i, l, b: x[cuda_c_width_rule(mode, i, l, b, operand, width)])
    np.testing.assert_array_equal(out, expected)


def test_width_must_be_a_power_of_two():
    x = np.zeros(32, np.int32)
    with pytest.raises(WarpSyncError, match="width must be a power of two"):
        width_kernel[1, 32](x, x.copy(), 2, 1, 12)


# -------------------------------------------------------------- votes


def test_votes_and_ballot_bit_order():
    res = wk.run_case("votes")
    pred = wk.vote_predicates()
    ballots = [int32(bits(l for l in range(32) if pred[32 * w + l])) for w in range(4)]
    assert ballots[0] == -1 and ballots[1] == 0 and ballots[2] == np.int32(-(1 << 31))
    assert ballots[3] == int32(0x49249249)  # lanes 0, 3, 6, ...
    np.testing.assert_array_equal(res["ballots"], np.repeat(ballots, 32))
    np.testing.assert_array_equal(res["alls"], np.repeat([1, 0, 0, 0], 32))
    np.testing.assert_array_equal(res["anys"], np.repeat([1, 0, 1, 1], 32))
    np.testing.assert_array_equal(res["eqs"], np.repeat([1, 1, 0, 0], 32))


def test_ballot_with_partial_mask_only_counts_the_mask():
    out = wk.run_case("ballot_partial_mask")["out"]
    expected = 0xFFFFF & ~bits([1, 5, 19])
    np.testing.assert_array_equal(out, [expected] * 20 + [-7] * 12)


def test_match_any_and_match_all():
    res = wk.run_case("match")
    residue_masks = [int32(bits(l for l in range(32) if l % 3 == r)) for r in range(3)]
    np.testing.assert_array_equal(res["any_masks"], [residue_masks[l % 3] for l in range(32)] + [-1] * 32)
    np.testing.assert_array_equal(res["all_masks"], [0] * 32 + [-1] * 32)
    np.testing.assert_array_equal(res["all_preds"], [0] * 32 + [1] * 32)


def test_activemask_and_lanemask_lt():
    res = wk.run_case("masks")
    np.testing.assert_array_equal(res["whole"], [FULL] * 32 + [0xFFFF] * 16)
    np.testing.assert_array_equal(res["branch"], per_lane(48, lambda i, l, b: 0x3FF if l < 10 else 0))
    np.testing.assert_array_equal(res["below"], per_lane(48, lambda i, l, b: (1 << l) - 1))
    assert res["below"].dtype == np.uint32


def test_syncwarp_orders_shared_memory_within_a_warp():
    out = wk.run_case("syncwarp_exchange")["out"]
    np.testing.assert_array_equal(out, (np.arange(64) ^ 1) * 11)


@cuda.jit
def bit_functions_kernel(out):
    b = cuda.ballot_sync(FULL, True)
    none = cuda.ballot_sync(FULL, cuda.threadIdx.x < 0)
    if cuda.threadIdx.x == 0:
        out[0] = cuda.popc(b)
        out[1] = cuda.ffs(b)
        out[2] = cuda.clz(b)
        out[3] = cuda.popc(none)


def test_popc_ffs_clz_see_ballot_as_32_bits():
    out = np.full(4, -9, np.int64)
    bit_functions_kernel[1, 32](out)
    np.testing.assert_array_equal(out, [32, 1, 0, 0])


# -------------------------------------------------------------- lessons


def test_block_reduction_with_shuffles_gives_the_right_sums():
    out = wk.run_case("block_sum")["out"]
    x = wk.block_sum_input()
    expected = [x[b * 256:(b + 1) * 256].sum() for b in range(4)]
    np.testing.assert_array_equal(out, expected)


def test_warp_softmax_matches_numpy():
    out = wk.run_case("warp_softmax")["out"]
    x = wk.softmax_input().astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@cuda.jit
def reduce_rounds_kernel(x, out):
    # shuffles, syncthreads and shared memory interleaved over several rounds
    s = cuda.shared.array(64, np.int64)
    t = cuda.threadIdx.x
    v = x[t]
    for _ in range(3):
        for offset in (16, 8, 4, 2, 1):
            v += cuda.shfl_xor_sync(FULL, v, offset)
        s[t] = v
        cuda.syncthreads()
        v = s[63 - t]
        cuda.syncthreads()
    out[t] = v


def test_shuffles_interleave_with_syncthreads():
    x = np.arange(64, dtype=np.int64)
    out = np.zeros(64, np.int64)
    reduce_rounds_kernel[2, 64](x, out)
    values = x.copy()
    for _ in range(3):
        warp_sums = values.reshape(2, 32).sum(axis=1)  # all-reduce in each warp
        values = np.repeat(warp_sums, 32)[::-1]  # s[t] -> v = s[63 - t]
    np.testing.assert_array_equal(out, values)


# -------------------------------------------------------------- wrong kernels


@cuda.jit
def reduce_with_mask_kernel(x, out, mask):
    i = cuda.grid(1)
    v = x[i]
    for offset in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(mask, v, offset)
    if i % 32 == 0:
        out[i // 32] = v


@cuda.jit
def reduce_with_width_kernel(x, out, width):
    i = cuda.grid(1)
    v = x[i]
    for offset in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(FULL, v, offset, width=width)
    if i % 32 == 0:
        out[i // 32] = v


def test_half_warp_mask_in_a_full_warp_reduction_is_caught():
    x = np.ones(32, np.int32)
    out = np.zeros(1, np.int32)
    with pytest.raises(WarpSyncError, match="does not include the calling lane|not in mask"):
        reduce_with_mask_kernel[1, 32](x, out, 0xFFFF)


def test_wrong_width_in_a_reduction_gives_a_wrong_sum():
    x = np.arange(64, dtype=np.int32)
    out = np.zeros(2, np.int32)
    reduce_with_width_kernel[1, 64](x, out, 32)
    np.testing.assert_array_equal(out, [x[:32].sum(), x[32:].sum()])
    reduce_with_width_kernel[1, 64](x, out, 16)
    assert out[0] != x[:32].sum()
    # offset 16 falls outside a 16-lane segment: each lane adds its own value
    np.testing.assert_array_equal(out, [2 * x[:16].sum(), 2 * x[32:48].sum()])


# -------------------------------------------------------------- errors


@cuda.jit
def early_exit_kernel(out):
    t = cuda.threadIdx.x
    if t == 7:
        return
    out[t] = cuda.shfl_down_sync(FULL, t, 1)


def test_lane_that_exits_is_reported():
    out = np.zeros(32, np.int64)
    with pytest.raises(WarpSyncError, match=r"lane 7 of warp 0 \(block \(0,0,0\)\) never "
                       r"reached shfl_down_sync with mask 0xffffffff: it exited"):
        early_exit_kernel[1, 32](out)


@cuda.jit
def syncthreads_partner_kernel(out):
    t = cuda.threadIdx.x
    v = t
    if t == 5:
        cuda.syncthreads()
    else:
        v = cuda.shfl_xor_sync(FULL, t, 1)
        cuda.syncthreads()
    out[t] = v


def test_lane_waiting_in_syncthreads_is_reported():
    out = np.zeros(64, np.int64)
    with pytest.raises(WarpSyncError, match="lane 5 of warp 0 .* it is waiting in syncthreads"):
        syncthreads_partner_kernel[1, 64](out)


@cuda.jit
def mismatched_kernel(out, kind):
    t = cuda.threadIdx.x
    if t == 3:
        if kind == 0:
            out[t] = cuda.ballot_sync(FULL, True)
        else:
            out[t] = cuda.shfl_down_sync(0xFF, t, 1)
    else:
        out[t] = cuda.shfl_down_sync(FULL, t, 1)


@pytest.mark.parametrize("kind", [0, 1])
def test_lanes_at_different_intrinsics_or_masks_are_reported(kind):
    # lane 3 calls ballot_sync (kind 0) or uses mask 0xff (kind 1)
    out = np.zeros(32, np.int64)
    with pytest.raises(WarpSyncError, match="never reached .*: it is waiting in") as caught:
        mismatched_kernel[1, 32](out, kind)
    assert "lane 3 " in str(caught.value)


@cuda.jit
def read_outside_mask_kernel(out):
    t = cuda.threadIdx.x
    if t < 2:
        out[t] = cuda.shfl_sync(0x3, t, 2)


def test_reading_a_lane_outside_the_mask_is_an_error():
    out = np.zeros(32, np.int64)
    with pytest.raises(WarpSyncError, match="reads lane 2, which is not in mask 0x00000003"):
        read_outside_mask_kernel[1, 32](out)


def test_reading_past_a_partial_warp_is_an_error():
    x = np.ones(48, np.int32)
    out = np.zeros(2, np.int32)
    with pytest.raises(WarpSyncError, match="does not exist .*16 lanes"):
        reduce_with_mask_kernel[1, 48](x, out, FULL)


@cuda.jit
def shuffle_value_kernel(x, out):
    t = cuda.threadIdx.x
    out[t] = cuda.shfl_sync(FULL, x[t], 0)


@pytest.mark.parametrize("dtype", [np.uint32, np.bool_, np.int16])
def test_shuffle_rejects_types_numba_rejects(dtype):
    x = np.zeros(32, dtype)
    with pytest.raises(TypeError, match="only int32, int64, float32 and float64"):
        shuffle_value_kernel[1, 32](x, x.copy())


def test_state_is_fresh_after_a_failed_launch():
    out = np.zeros(32, np.int64)
    with pytest.raises(WarpSyncError):
        early_exit_kernel[1, 32](out)
    x = np.arange(64, dtype=np.int32)
    sums = np.zeros(2, np.int32)
    reduce_with_mask_kernel[1, 64](x, sums, FULL)
    np.testing.assert_array_equal(sums, [x[:32].sum(), x[32:].sum()])


def test_warp_intrinsics_outside_a_kernel_raise():
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    fake = FakeCUDAModule((1, 1, 1), (1, 1, 1), 0)
    with pytest.raises(WarpSyncError, match="inside a simulated kernel"):
        fake.shfl_sync(FULL, 1, 0)


def test_block_manager_sleeps_while_its_threads_wait():
    # numba's manager polls its threads without sleeping and holds the GIL; every simulated
    # thread that woke then waited for the switch interval (launches took 3-48 s at random).
    import time

    import grader.sim

    grader.sim.install()

    @cuda.jit
    def one_slow_thread(out):
        if cuda.threadIdx.x == 0:
            time.sleep(0.5)
        cuda.syncthreads()
        out[cuda.threadIdx.x] = 1

    out = np.zeros(32, np.int32)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    one_slow_thread[1, 32](out)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    assert out.all() and wall >= 0.5
    assert cpu < 0.4 * wall, f"the launch used {cpu:.2f} s of CPU in {wall:.2f} s: a busy wait"
