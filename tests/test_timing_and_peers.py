"""bench and score: stopping rules with a fake clock, points within nbgrader's rules."""
import json
import math

import pytest

import grader
from grader.timing import HEAD_START_MAX_US, HEAD_START_US, Measurement, head_start_us, repeat, spread
from grader.score import points_for, speed_points


class FakeClock:
    def __init__(self, times):
        self.times = iter(times)
        self.now = 0.0
        self.calls = 0

    def run_once(self):
        t = next(self.times)
        self.now += t
        self.calls += 1
        return t

    def clock(self):
        return self.now


def test_stops_once_the_spread_is_small():
    clock = FakeClock([1.0] * 100)
    times = repeat(clock.run_once, warmup=2, min_reps=10, now=clock.clock)
    assert len(times) == 10 and clock.calls == 12   # warm-up runs are not kept


def test_keeps_going_while_noisy_until_the_budget():
    noisy = [1.0, 2.0] * 500
    clock = FakeClock(noisy)
    times = repeat(clock.run_once, warmup=0, min_reps=10, budget_s=30.0, now=clock.clock)
    assert 15 <= len(times) <= 25 and spread(times) > 0.02


def test_max_reps_bounds_the_loop():
    clock = FakeClock([1.0, 3.0] * 100)
    times = repeat(clock.run_once, warmup=0, min_reps=5, max_reps=40, budget_s=1e9, now=clock.clock)
    assert len(times) == 40


def test_before_each_runs_outside_every_repetition():
    clock = FakeClock([1.0] * 30)
    calls = []
    repeat(clock.run_once, before_each=lambda: calls.append(clock.calls), warmup=1, min_reps=3,
           now=clock.clock)
    assert calls == [0, 1, 2, 3]


def test_head_start_covers_the_host_time_of_the_launch_function():
    assert head_start_us([]) == HEAD_START_US                      # before the first call
    assert head_start_us([5e-6] * 3) == HEAD_START_US               # one quick launch: the floor
    # a launch function that takes the host 120 µs (views, two launches): the GPU sleeps 260 µs
    assert head_start_us([2.0, 120e-6, 120e-6]) == pytest.approx(260.0)   # the compiling call is outvoted
    assert head_start_us([1e-4] * 4 + [3.0]) == pytest.approx(220.0)      # one slow call (GC) is outvoted
    assert head_start_us([3.0]) == HEAD_START_MAX_US                # bounded


def test_measurement_figures_and_text():
    m = Measurement("add", times_s=[1e-3] * 5, bytes=3 * 10**9, peer_name="copy bandwidth",
                    peer_value=4000.0, device="NVIDIA H200")
    assert m.value == pytest.approx(3000.0)
    assert m.fraction == pytest.approx(0.75)
    assert "3 000 GB/s = 75% of copy bandwidth (4 000 GB/s on NVIDIA H200)" in str(m)
    f = Measurement("mm", times_s=[2.0], flops=10**12)
    assert f.unit == "TFLOP/s" and f.value == pytest.approx(0.5)


@pytest.mark.parametrize("fraction,expected", [
    (0.0, 0.0), (0.10, 0.0), (0.30, 1.04), (0.485, 2.0), (0.50, 2.0), (0.9, 2.0), (math.nan, 0.0), (-1, 0.0), (math.inf, 0.0),   # an impossible figure earns nothing
])
def test_points_are_linear_between_floor_and_target_less_noise(fraction, expected):
    assert points_for(fraction, target=0.5, floor=0.1, points=2) == pytest.approx(expected)


def test_points_never_leave_the_range_nbgrader_accepts():
    for f in [x / 100 for x in range(-50, 300)] + [math.nan, math.inf, -math.inf]:
        p = points_for(f, target=0.9, floor=0.2, points=3)
        assert isinstance(p, float) and math.isfinite(p) and 0.0 <= p <= 3.0


def test_a_result_within_the_noise_of_the_target_keeps_full_points():
    from grader.score import NOISE

    for target in (0.5, 0.6, 0.9, 1.0):
        for k in range(-10, 11):                       # anywhere within ±NOISE of the target
            f = target * (1 + NOISE * k / 10)
            assert points_for(f, target=target, floor=0.1, points=1) == 1.0, (target, f)


def test_rerunning_moves_points_a_little_never_a_step():
    """Continuous rule: two runs a noise apart differ by at most the slope times the noise."""
    from grader.score import NOISE

    target, floor, pts = 0.6, 0.15, 1.0
    full = target * (1 - NOISE)
    for i in range(1, 400):
        f = i / 300
        for g in (f * (1 - NOISE), f * (1 + NOISE)):
            bound = pts * abs(g - f) / (full - floor) + 0.011    # + rounding to 0.01
            assert abs(points_for(g, target, floor, pts) - points_for(f, target, floor, pts)) <= bound


def test_without_a_gpu_speed_scores_zero_and_says_so(capsys):
    assert grader.SIMULATOR
    m = grader.bench(lambda: None, label="add", bytes=12)
    assert not m.measured
    assert speed_points(m, target=0.5, floor=0.1, points=1) == 0.0
    assert "speed not graded: no GPU" in capsys.readouterr().out


# --- peers: measured once per size, on the candidate's own inputs, by the same bench
def _fake_timing(monkeypatch, seconds=1e-3):
    from grader import timing as bench

    calls = []
    monkeypatch.setattr(bench, "time_call", lambda fn, **kw: calls.append(fn) or [seconds] * 10)
    return calls


def test_a_peer_is_measured_once_per_size(monkeypatch):
    from grader import peers

    calls = _fake_timing(monkeypatch)
    prepared = []
    peer = peers.Peer("fake", lambda ctx: prepared.append(ctx.size) or (lambda: None), needs_torch=False)
    monkeypatch.setattr(peers, "_measured", {})
    assert peers.measure(peer, peers.PeerInputs(size=(64, 64), flops=2e12)) == ("fake", 2000.0)   # TFLOP/s
    peers.measure(peer, peers.PeerInputs(size=(64, 64), flops=2e12))                             # cached
    assert peers.measure(peer, peers.PeerInputs(size=(8, 8), bytes=3e9)) == ("fake", 3000.0)      # GB/s
    assert prepared == [(64, 64), (8, 8)] and len(calls) == 2


def test_the_judge_prepares_a_peers_inputs_once_per_process(monkeypatch):
    """The pre-warm skips a problem's benchmark inputs when its peer is measured already (a class of
    submissions graded in one judge process), and still measures it the first time."""
    from grader import peers
    from grader.judge import judge
    from grader.problems import elementwise as P

    _fake_timing(monkeypatch)
    monkeypatch.setattr(peers, "_measured", {})
    monkeypatch.setattr("grader.cuda.toolchain.compute_capability", lambda: (9, 0))
    monkeypatch.setattr("grader.arrays.device_args", lambda inputs, arrays: dict(inputs))
    made, prepared = [], []
    peer = peers.Peer("fake copy", lambda ctx: prepared.append(ctx.size) or (lambda: None), needs_torch=False)
    real = P.vector_add.make_inputs
    problem = P.vector_add.variant(peer=peer, make_inputs=lambda rng, size: made.append(size) or real(rng, size))
    size = problem.bench_size
    assert not peers.measured(peer, size, problem.work(size))
    judge._prewarm_peer(problem)
    assert peers.measured(peer, size, problem.work(size))
    judge._prewarm_peer(problem)
    assert made == [size] and prepared == [size]


def test_best_names_the_faster_peer(monkeypatch):
    from grader import peers
    from grader import timing as bench

    monkeypatch.setattr(peers, "_measured", {})
    speeds = {"slow": 2e-3, "fast": 1e-3}
    monkeypatch.setattr(bench, "time_call", lambda fn, **kw: [fn()] * 10)
    both = peers.best("ceiling", *(peers.Peer(n, lambda ctx, t=t: (lambda: t), needs_torch=False)
                                   for n, t in speeds.items()))
    assert peers.measure(both, peers.PeerInputs(bytes=1e9)) == ("ceiling (fast)", 1000.0)


def test_measure_gives_the_peer_the_candidates_inputs_at_the_timed_size(monkeypatch):
    """A peer runs on the problem's own device inputs, at the size the candidate is timed at."""
    import importlib

    from grader import peers
    from grader.problems import elementwise as P

    speed = importlib.import_module("grader.speed")      # (grader.speed is also the verb's name)
    _fake_timing(monkeypatch)
    monkeypatch.setattr(peers, "_measured", {})
    monkeypatch.setattr(speed, "SIMULATOR", False)
    monkeypatch.setattr(speed, "not_here", lambda problem: None)
    monkeypatch.setattr(speed, "_device_name", lambda: "fake GPU")
    seen = []
    peer = peers.Peer("fake copy", lambda ctx: seen.append(ctx) or (lambda: None), needs_torch=False)
    m = speed.measure(lambda a, b, c: None, P.vector_add, "v1", size=1000, peer=peer)
    (ctx,) = seen
    assert ctx.size == 1000 and sorted(ctx.arrays) == ["a", "b"] and ctx.bytes == 3 * 4 * 1000
    assert m.peer_name == "fake copy" and m.device == "fake GPU" and math.isclose(m.fraction, 1.0)


# --- the L2 flush: a read of a buffer larger than the L2, after whatever a repetition prepares
def _flush_order(monkeypatch, mode):
    from grader import timing

    order = []
    monkeypatch.setattr(timing, "SIMULATOR", False)
    monkeypatch.setattr(timing, "FLUSH", mode)
    monkeypatch.setattr(timing, "flush_l2", lambda: order.append("flush"))
    timing.time_call(lambda: order.append("call"), before_each=lambda: order.append("poison"),
                     timer=lambda fn: fn() or 1e-3, warmup=1, min_reps=2)
    return order[:6]


def test_the_read_flush_comes_after_before_each(monkeypatch):
    # re-poisoned outputs are written back by the flush, not by the timed kernel's misses
    assert _flush_order(monkeypatch, "read") == ["poison", "flush", "call"] * 2
    assert _flush_order(monkeypatch, "write") == ["flush", "poison", "call"] * 2     # the method before


def _each_thread(kernel, *args, n):
    """Run a Numba kernel's Python body once per thread index 0..n-1 (cuda.grid(1) = the index)."""
    import types

    fn = kernel.py_func
    for i in range(n):
        fake = types.SimpleNamespace(grid=lambda dim, i=i: i)
        cells = tuple(types.CellType(fake if name == "cuda" else c.cell_contents)
                      for name, c in zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, None, cells)(*args)


def test_the_flush_kernel_reads_the_buffer_and_writes_nothing_there():
    import numpy as np

    from grader import timing

    touch, fill = timing._make_touch(), timing._make_fill()
    buf = np.arange(300, dtype=np.int32)
    sink = np.zeros(1, dtype=np.int32)
    _each_thread(touch, buf, sink, n=320)
    assert (buf == np.arange(300)).all() and sink[0] == 0      # nothing written
    buf[277] = -1
    _each_thread(touch, buf, sink, n=320)
    assert sink[0] == 1                                        # every element is loaded
    _each_thread(fill, buf, n=320)
    assert buf[277] == 277                                     # the write flush, for contrast


def test_the_flush_kernel_compiles_to_loads_only():
    """The PTX of the read flush (Numba for sm_90): global loads and one store (the sink's), where the
    write flush has stores and no loads."""
    import os
    import subprocess
    import sys

    code = ("import sys\n"
            "from numba import cuda\n"
            "try:\n    from numba.cuda.cudadrv import nvvm; nvvm.NVVM()\n"
            "except Exception as e:\n    print(e); sys.exit(77)\n"
            "from numba import types\n"
            "from grader import timing\n"
            "arr = types.int32[::1]\n"
            "for name, make, sig in (('touch', timing._make_touch, (arr, arr)), ('fill', timing._make_fill, (arr,))):\n"
            "    ptx, _ = cuda.compile_ptx(make().py_func, sig, cc=(9, 0))\n"
            "    print(name, ptx.count('ld.global'), ptx.count('st.global'))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "GRADER_FORCE_SIM")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    if r.returncode == 77:
        pytest.skip("no NVVM to compile with: " + r.stdout.strip())
    assert r.returncode == 0, r.stderr[-2000:]
    counts = {line.split()[0]: tuple(map(int, line.split()[1:])) for line in r.stdout.splitlines() if line[:4] in ("touc", "fill")}
    loads, stores = counts["touch"]
    assert loads >= 1 and stores == 1
    assert counts["fill"][0] == 0 and counts["fill"][1] >= 1


def test_the_judges_peer_figures_reach_the_runner_as_plain_values_and_are_used_there(monkeypatch):
    """The judge exports the peers it measured and sends them with its word to run the cells; the
    runner seeds them, so a demonstration beside the same peer at the same size shows that figure
    without measuring it. Malformed rows are skipped."""
    import io

    from grader import peers
    from grader.judge import protocol
    from grader.judge.runner import Runner

    monkeypatch.setattr(peers, "_measured", {})
    copy = peers.copy()
    peers._measured[peers._key(copy, (1024,), 8192, None)] = ("copy bandwidth (cudaMemcpy)", 4250.0)
    rows = json.loads(json.dumps(peers.exported()))
    monkeypatch.setattr(peers, "_measured", {})
    bad = [["copy bandwidth", "(1,)", True, None, "x", 1.0], ["copy bandwidth", "(2,)", 1, None, "x", float("nan")],
           ["copy bandwidth", "(3,)", 1, None, "x", -1.0], ["too", "short"], "not a row"]
    word = io.BytesIO()
    protocol.send(word, {"op": "start", "peers": rows + bad})      # remote.Remote.start
    word.seek(0)
    Runner.await_start(None, word)                                  # the runner, before its first cell
    assert len(peers._measured) == 1
    monkeypatch.setattr(peers, "_figure", lambda *a, **k: pytest.fail("a seeded peer was measured again"))
    ctx = peers.PeerInputs({}, (1024,), 8192, None)
    assert peers.measure(copy, ctx) == ("copy bandwidth (cudaMemcpy)", 4250.0)
    assert not peers.measured(copy, (2048,), {"bytes": 8192})
