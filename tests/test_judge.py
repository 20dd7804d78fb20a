"""The judge's pieces on the CPU: the protocol's refusals, the runner's timing handlers, and the
judge's speed rules (its clock bounds a claimed time; a harness error is a failure, never a pass)."""
from __future__ import annotations

import io
import json
import pickle
import struct

import numpy as np
import pytest

import grader  # noqa: F401  (simulator first)
from grader.arrays import poisoned
from grader.errors import CheckFailed
from grader.judge import protocol
from grader.judge.verbs import CLOCK_SLACK, Judged
from grader.problems import elementwise as P
from tests.conftest import ROOT


# ---------------------------------------------------------------- protocol
def _frames(header: dict, *payloads: bytes) -> io.BytesIO:
    raw = json.dumps(header).encode()
    data = struct.pack("<Q", len(raw)) + raw + b"".join(struct.pack("<Q", len(p)) + p for p in payloads)
    return io.BytesIO(data)


def test_a_round_trip_keeps_arrays_and_values():
    buf = io.BytesIO()
    a = np.arange(6, dtype=np.uint16).reshape(2, 3)
    protocol.send(buf, {"op": "x", "v": protocol.encode_value([(1, 2), {"k": 3.5}])}, {"a": a}, objects={"size": (4, 5)})
    buf.seek(0)
    head, arrays = protocol.recv(buf, allow_pickle=True, limits=protocol.TRUSTED)
    assert np.array_equal(arrays["a"], a) and head["objects"] == {"size": (4, 5)}
    assert protocol.decode_value(head["v"]) == [(1, 2), {"k": 3.5}]


def test_the_judge_never_unpickles_or_trusts_what_the_runner_sends():
    evil = pickle.dumps({"x": 1})
    with pytest.raises(protocol.ProtocolError, match="pickled"):
        protocol.recv(_frames({"pickle": evil.hex()}))
    with pytest.raises(protocol.ProtocolError, match="dtype"):
        protocol.recv(_frames({"arrays": [{"name": "a", "dtype": "object", "shape": [1]}]}, b"x" * 8))
    with pytest.raises(protocol.ProtocolError, match="bytes for shape"):
        protocol.recv(_frames({"arrays": [{"name": "a", "dtype": "float32", "shape": [4]}]}, b"x" * 8),
                      limits=protocol.Limits(arrays=64))
    with pytest.raises(protocol.ProtocolError, match="over the limit"):
        protocol.recv(io.BytesIO(struct.pack("<Q", protocol.MAX_HEADER + 1)))
    with pytest.raises(protocol.ProtocolError, match="over the"):       # announced, refused before it is read
        protocol.recv(_frames({"arrays": [{"name": "a", "dtype": "float32", "shape": [2**30]}]}),
                      limits=protocol.Limits(arrays=2**20))
    with pytest.raises(protocol.ProtocolError, match="unknown encoded value"):
        protocol.decode_value({"__class__": "os.system"})


# ---------------------------------------------------------------- the runner's handlers
def test_the_runner_times_and_bursts_in_the_simulator():
    from grader.judge import plan as plans
    from grader.judge.runner import Runner

    nb = ROOT / "solutions" / "01_elementwise" / "01_threads_and_blocks.ipynb"
    release = ROOT / "course" / "01_elementwise" / "01_threads_and_blocks.ipynb"
    plan = json.loads(plans.build(nb, release, nb).to_json())
    runner = Runner(plan)
    runner.run_cells()
    assert not runner.errors
    ref = ["grader.problems.elementwise", "vector_add"]
    head, arrays = runner.time({"name": "launch_vector_add", "problem": ref, "objects": {"case": (1000, 7)}})
    assert head["times"] == []                                   # nothing is timed in the simulator
    for request in ({"prepare": True}, {"reps": 3}):
        reply, _ = runner.burst(request)
        assert reply == {"done": True}
    out = runner._outputs()["out:c"]
    inputs = P.vector_add.make_inputs(np.random.default_rng(7), 1000)
    assert np.allclose(out[:1000], inputs["a"] + inputs["b"])   # the back-to-back runs wrote the answer


# ---------------------------------------------------------------- the judge's speed rules
class FakeRemote:
    """A runner that answers as the learner's process might: right outputs, and any times."""

    def __init__(self, claimed_s: float, kernel_s: float, burst_error: bool = False):
        self.claimed_s, self.kernel_s, self.burst_error, self.seed = claimed_s, kernel_s, burst_error, None

    def _outputs(self, size, seed):
        inputs = P.vector_add.make_inputs(np.random.default_rng(seed), size)
        flat = poisoned((size,), np.float32)
        flat[:size] = inputs["a"] + inputs["b"]
        return {"out:c": flat}

    def case(self, name, ref, size, seed, expect_bytes):
        return {"launched": True}, self._outputs(size, seed)

    def time(self, name, ref, size, seed, budget_s, expect_bytes):
        self.size, self.seed = size, seed
        return {"times": [self.claimed_s] * 10}, self._outputs(size, seed)

    def burst(self, reps):
        if self.burst_error:
            raise CheckFailed("the runner could not burst: AttributeError")
        return reps * self.kernel_s

    def outputs(self, expect_bytes):
        return self._outputs(self.size, self.seed)


@pytest.fixture()
def fast_peer(monkeypatch):
    from grader import peers

    monkeypatch.setattr(peers, "measure", lambda peer, ctx, budget_s=3.0: ("copy bandwidth", 3000.0))
    monkeypatch.setattr(Judged, "_peer_inputs", lambda self, problem, size, inputs: None)
    small = P.vector_add.variant(bench_size=1 << 12, sizes=(1, 1000))
    monkeypatch.setattr(P, "vector_add", small)
    return small


def test_a_claim_faster_than_the_judges_clock_is_graded_at_the_clock(fast_peer, capsys):
    from grader.judge.remote import RemoteFunction

    judged = Judged(FakeRemote(claimed_s=1e-9, kernel_s=1e-3), simulator=False, cc=(9, 0))
    launch = RemoteFunction(judged.remote, "launch_vector_add")
    judged.speed(launch, fast_peer, points=1)
    out = capsys.readouterr().out
    assert "faster than the judge's clock allows" in out
    graded = 12 * 4096 / (1e-3 * (1 - CLOCK_SLACK)) / 1e9          # GB/s at the clock, less the slack
    assert f"{graded:,.0f}".replace(",", " ") in out


def test_an_honest_claim_is_not_clamped(fast_peer, capsys):
    from grader.judge.remote import RemoteFunction

    judged = Judged(FakeRemote(claimed_s=1.1e-3, kernel_s=1e-3), simulator=False, cc=(9, 0))
    judged.speed(RemoteFunction(judged.remote, "launch_vector_add"), fast_peer, points=1)
    assert "judge's clock" not in capsys.readouterr().out


def test_a_failing_harness_fails_the_cell(fast_peer):
    from grader.judge.remote import RemoteFunction

    judged = Judged(FakeRemote(claimed_s=1e-9, kernel_s=1e-3, burst_error=True), simulator=False, cc=(9, 0))
    with pytest.raises(CheckFailed, match="could not burst"):
        judged.speed(RemoteFunction(judged.remote, "launch_vector_add"), fast_peer, points=1)


def test_the_font_list_handed_to_runners_leaves_out_fonts_the_sandbox_cannot_see(tmp_path, monkeypatch):
    """The host's matplotlib font list goes in with the plan (a runner would otherwise scan the
    system's fonts in every sandbox); a font outside the folders the sandbox binds is dropped, and the
    runner copies the list into its own MPLCONFIGDIR."""
    import matplotlib

    from grader.judge import sandbox, startup

    cache = tmp_path / "cache"
    cache.mkdir()
    listed = {"_version": 1, "ttflist": [{"fname": "fonts/ttf/DejaVuSans.ttf"}, {"fname": "/usr/share/fonts/a.ttf"},
                                         {"fname": "/home/someone/.fonts/mine.ttf"}, {"fname": 7}],
              "afmlist": [{"fname": "/srv/private/b.afm"}]}
    (cache / "fontlist-v1.json").write_text(json.dumps(listed))
    monkeypatch.setattr(matplotlib, "get_cachedir", lambda: str(cache))
    monkeypatch.setattr(sandbox, "_system_roots", lambda: ["/usr", "/etc"])
    monkeypatch.setattr(sandbox, "_python_roots", lambda: ["/opt/python"])
    handed = sandbox.font_list.__wrapped__()
    kept = json.loads(handed["fontlist-v1.json"])
    assert [f["fname"] for f in kept["ttflist"]] == ["fonts/ttf/DejaVuSans.ttf", "/usr/share/fonts/a.ttf"]
    assert kept["afmlist"] == []

    inputs, mpl = tmp_path / "judge", tmp_path / "sandbox" / ".mpl"
    sandbox.write_input(inputs, "mpl/fontlist-v1.json", handed["fontlist-v1.json"])
    sandbox.write_input(inputs, "mpl/notes.txt", "not a font list")
    monkeypatch.setenv("MPLCONFIGDIR", str(mpl))
    startup.copy_font_list(str(inputs))
    assert sorted(p.name for p in mpl.iterdir()) == ["fontlist-v1.json"]
    assert json.loads((mpl / "fontlist-v1.json").read_text()) == kept


def test_a_grading_records_where_the_runner_started(tmp_path):
    """judge_seconds split the runner's start: the interpreter and imports before main, the grader
    and the shell, the wait for the judge's word (it measures the peers meanwhile), the notebook's
    cells (each a number of seconds the runner reported, bounded)."""
    from grader.judge.judge import grade
    from grader.judge.sandbox import choose

    src = ROOT / "solutions" / "01_elementwise" / "01_threads_and_blocks.ipynb"
    result = grade(src, ROOT / "course" / "01_elementwise" / "01_threads_and_blocks.ipynb", src, choose())
    phases = {k: result.timings[k] for k in ("start.imports", "start.setup", "start.waited", "start.cells")}
    whole = result.timings["start"] + result.timings["peers"]
    assert all(0 <= v < whole + 1 for v in phases.values()), phases
    assert phases["start.cells"] > 0
    assert all(v.score == v.max_score for v in result.verdicts if not v.grade_id.startswith("speed"))
