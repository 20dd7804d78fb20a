"""The judge's end of the runner: start it in its sandbox, ask it things, never wait forever, trust nothing.

Every request has a deadline the learner's code cannot move (within the sandbox's whole time, which
the lesson's recorded time sets: grader.judge.bounds.lesson_time_s), and every reply is read under
the limits the request allows (grader.judge.protocol.Limits: how large a header, how many array
bytes — the judge knows the size of every output it expects). Past a deadline, or when the runner
hangs up, breaks a limit or answers something malformed, the whole sandbox is killed and every later
request fails at once with the reason (:class:`RunnerGone`), so the rest of the notebook is still
graded — as 0 with that reason, never as an exception that escapes.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from ..errors import CheckFailed
from .protocol import Limits, ProtocolError, decode_value, encode_value, field_of, recv, send
from .bounds import Bounded, Bounds, limit
from .sandbox import INPUTS, font_list, python_executable, sandbox_env, write_input

NOTEBOOK_LIMITS = Limits(header=48 * 2**20)       # the cells' outputs (figures as base64)
MALFORMED = "the runner's messages were malformed"


class RunnerGone(CheckFailed):
    """The runner (the learner's code) is no longer answering; the message says why."""


class RemoteError(CheckFailed):
    """The learner's function raised; the message is its exception."""


def runner_env(env: dict | None = None) -> dict:
    """The runner's own variables, then ``env`` (the scoreboard's --in-notebook sets GRADER_RUNNER=0 to
    time speed cells in the notebook); GRADER_IN_JUDGE=1 last, whatever ``env`` says: Nsight Compute and
    compute-sanitizer never run inside the judge (grader.judged.in_judge)."""
    return {"GRADER_RUNNER": "1", "GRADER_PRECOMPILED": f"{INPUTS}/modules", **(env or {}), "GRADER_IN_JUDGE": "1"}


class Remote:
    """One runner in one sandbox, for one notebook. ``inputs`` is a host folder the sandbox sees
    read-only (it holds modules/ already); the plan is written there."""

    def __init__(self, plan, sandbox, inputs: Path, gpu: bool, bounds: Bounds, env: dict | None = None):
        write_input(inputs, "plan.json", plan.to_json())
        for name, data in font_list().items():
            write_input(inputs, f"mpl/{name}", data)
        cmd = sandbox.command([python_executable(), "-P", "-s", "-m", "grader.judge.runner", f"{INPUTS}/plan.json"],
                              inputs, sandbox_env(runner_env(env)), bounds, gpu=gpu)
        self.box = Bounded(cmd, bounds)
        self.dead: str | None = None

    # -- the exchange ------------------------------------------------------------------
    def request(self, header: dict, objects: dict | None = None, timeout: float | None = None,
                what: str = "the request", limits: Limits = Limits(),
                limit_name: str = "the judge's limit for one request ($GRADER_JUDGE_REQUEST_S)") -> tuple[dict, dict]:
        if self.dead:
            raise RunnerGone(self.dead)
        timeout = min(timeout or limit("REQUEST_S", 300), self.box.remaining_s())
        result: dict = {}

        def exchange():
            try:
                send(self.box.proc.stdin, header, objects=objects)
                result["reply"] = recv(self.box.proc.stdout, limits=limits)
            except BaseException as exc:           # anything the runner's bytes provoke is the runner's fault
                result["error"] = exc

        worker = threading.Thread(target=exchange, daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            bounds = self.box.bounds
            why = f" ({bounds.time_why})" if bounds.time_why else ""
            if self.box.remaining_s() <= 0:
                self._die(f"the notebook's code did not finish {what} within its time limit of {bounds.wall_s:g} s{why}")
            elif "cells" in limit_name:
                self._die(f"the notebook's code did not finish {what} within {timeout:g} s, {limit_name}{why}")
            else:
                self._die(f"the notebook's code did not finish {what} within {timeout:g} s, {limit_name}")
        elif "error" in result:
            self._die(self._why_gone(result["error"]))
        elif "reply" not in result:
            self._die(MALFORMED)
        if self.dead:
            raise RunnerGone(self.dead)
        return result["reply"]

    def _why_gone(self, exc: BaseException) -> str:
        for _ in range(20):                              # a killed sandbox: let it end, then ask why
            if self.box.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.box.note_kernel_kill()
        if self.box.why:
            return f"the notebook's code was stopped: {self.box.why}"
        code = self.box.proc.poll()
        if code is not None:
            return f"the notebook's code ended its own process (exit status {code})"
        if isinstance(exc, ProtocolError):
            return f"{MALFORMED} ({str(exc)[:200]})"
        if isinstance(exc, OSError):
            return f"the notebook's process stopped answering ({type(exc).__name__})"
        return f"{MALFORMED} ({type(exc).__name__})"

    def _die(self, why: str) -> None:
        self.dead = self.dead or why
        self.box.kill(why)

    def malformed(self, what: str) -> RunnerGone:
        """A reply that parsed but is not what the request asks for: the runner is stopped."""
        self._die(f"{MALFORMED}: {what}")
        return RunnerGone(self.dead)

    # -- requests ------------------------------------------------------------------------
    def start(self, peers: list) -> None:
        """Tell the runner to run the notebook's cells, with the judge's peer figures (no reply: hello
        waits for the cells). A runner already gone is noted; hello then says why."""
        if self.dead:
            return
        try:
            send(self.box.proc.stdin, {"op": "start", "peers": peers})
        except (OSError, ValueError) as exc:
            self._die(self._why_gone(exc))

    def hello(self) -> dict:
        """Wait for the notebook's cells to run; the errors they raised, by cell id."""
        cells_s = self.box.bounds.cells_s or self.box.bounds.wall_s
        head, _ = self.request({"op": "hello"}, timeout=min(cells_s, self.box.remaining_s()),
                               what="running the notebook's cells", limit_name="its time limit for running cells")
        errors = head.get("errors", {})
        if not isinstance(errors, dict):
            raise self.malformed("the cells' errors")
        return {str(k)[:100]: str(v)[:400] for k, v in list(errors.items())[:200]}

    def resolve(self, names: list) -> dict:
        head, _ = self.request({"op": "resolve", "names": sorted(names)})
        kinds = head.get("kinds", {})
        if not isinstance(kinds, dict):
            raise self.malformed("the names it resolved")
        return {n: kinds.get(n) if isinstance(kinds.get(n), str) else None for n in names}

    def call(self, name: str, args: tuple):
        head, _ = self.request({"op": "call", "name": name, "args": encode_value(list(args))},
                               what=f"a call of {name}")
        if "error" in head:
            raise RemoteError(f"{name}{_short(args)} raised {field_of(head, 'error', str, '?', max_len=2000)}")
        try:
            return decode_value(head.get("value"))
        except ProtocolError as exc:
            raise self.malformed(str(exc)) from None

    def case(self, name: str, problem_ref: list, size, seed: int, expect_bytes: int) -> tuple[dict, dict]:
        return self.request({"op": "case", "name": name, "problem": problem_ref},
                            objects={"case": (size, seed)}, what=f"a check of {name}",
                            limits=Limits(arrays=expect_bytes))

    def time(self, name: str, problem_ref: list, size, seed: int, budget_s: float, expect_bytes: int) -> tuple[dict, dict]:
        return self.checked({"op": "time", "name": name, "problem": problem_ref, "budget_s": budget_s},
                            objects={"case": (size, seed)}, what=f"the timed runs of {name}",
                            limits=Limits(arrays=expect_bytes))

    def checked(self, header: dict, **kw) -> tuple[dict, dict]:
        """A request whose reply must not be an error (the runner's harness failed: say so)."""
        head, arrays = self.request(header, **kw)
        if "error" in head:
            raise CheckFailed(f"the runner could not {header['op']}: {field_of(head, 'error', str, '?', max_len=1000)}")
        return head, arrays

    def burst(self, reps: int) -> float:
        """Seconds of ``reps`` launches back to back, by the judge's clock (the round trip of an
        empty request taken off)."""
        self.checked({"op": "burst", "prepare": True})
        start = time.perf_counter()
        self.checked({"op": "burst", "reps": int(reps)}, what="the judge's timed runs")
        wall = time.perf_counter() - start
        return max(0.0, wall - self.round_trip())

    def round_trip(self) -> float:
        trips = []
        for _ in range(5):
            start = time.perf_counter()
            self.request({"op": "hello"}, timeout=30)
            trips.append(time.perf_counter() - start)
        return sorted(trips)[2]

    def outputs(self, expect_bytes: int) -> dict:
        _, arrays = self.checked({"op": "outputs"}, limits=Limits(arrays=expect_bytes))
        return arrays

    def notebook(self) -> dict | None:
        """The cells' outputs for the feedback notebook (validated by grader.judge.feedback), or None."""
        if self.dead:
            return None
        try:
            head, _ = self.request({"op": "notebook"}, timeout=60, what="handing over its outputs",
                                   limits=NOTEBOOK_LIMITS)
        except RunnerGone:
            return None
        return head

    def close(self) -> str:
        """Stop the runner; return the tail of its log (what the notebook printed outside its cells)."""
        if not self.dead:
            try:
                self.request({"op": "exit"}, timeout=10)
            except RunnerGone:
                pass
        self.box.close()
        return self.box.log_tail[-4000:]


class RemoteFunction:
    """A function the notebook defines, called in the runner; arguments and results are plain
    values (numbers, strings, tuples, lists, dicts of those)."""

    def __init__(self, remote: Remote, name: str):
        self.remote, self.name, self.__name__ = remote, name, name

    def __call__(self, *args):
        return self.remote.call(self.name, args)

    def __repr__(self):
        return f"<the notebook's {self.name}>"


class FailedModule:
    """A ``%%cuda`` cell that did not compile: using it says so."""

    def __init__(self, name: str, error: str):
        self.name, self.error = name, error

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise CheckFailed(f"the cell `%%cuda {self.name}` does not compile:\n{self.error}")


def _short(args: tuple) -> str:
    """The call's arguments as Python prints them (tuples as tuples), cut to a line."""
    text = ", ".join(repr(a) for a in args)
    return "(" + (text if len(text) < 120 else text[:116] + "…") + ")"
