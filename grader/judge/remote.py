"""The judge's end of the runner: start it in its sandbox, ask it things, never wait forever.

Every request has a deadline the learner's code cannot move; past it, or when the runner hangs up or
answers nonsense, the whole sandbox is killed and every later request fails at once with the
reason (:class:`RunnerGone`), so the rest of the notebook is still graded.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from ..errors import CheckFailed
from .protocol import ProtocolError, decode_value, encode_value, recv, send
from .sandbox import SCRATCH, Bounded, limit, memory_default, python_executable, sandbox_env

# Host-side limits (seconds, GiB), read when used: $GRADER_JUDGE_NOTEBOOK_S (running the notebook's
# cells, default 900), _REQUEST_S (one checked case or timing, 300), _WALL_S (the whole runner, 3 ×
# the notebook's), _MEMORY_GB (the sandbox's resident memory, half the machine's, at most 32).


class RunnerGone(CheckFailed):
    """The runner (the learner's code) is no longer answering; the message says why."""


class RemoteError(CheckFailed):
    """The learner's function raised; the message is its exception."""


class Remote:
    """One runner in one sandbox, for one notebook."""

    def __init__(self, plan, sandbox, scratch: Path, gpu: bool, env: dict | None = None):
        wall_s = limit("WALL_S", 3 * limit("NOTEBOOK_S", 900))
        memory_bytes = int(limit("MEMORY_GB", memory_default() / 2**30) * 2**30)
        (scratch / "plan.json").write_text(plan.to_json())
        extra = {"GRADER_RUNNER": "1", "GRADER_PRECOMPILED": f"{SCRATCH}/modules", "MPLBACKEND": "Agg", **(env or {})}
        cmd = sandbox.command([python_executable(), "-P", "-s", "-m", "grader.judge.runner", f"{SCRATCH}/plan.json"],
                              scratch, sandbox_env(extra), gpu=gpu)
        self.log_path = scratch / "runner.log"
        self.box = Bounded(cmd, wall_s=wall_s, memory_bytes=memory_bytes, stderr_path=self.log_path)
        self.dead: str | None = None

    # -- the exchange ------------------------------------------------------------------
    def request(self, header: dict, objects: dict | None = None, timeout: float | None = None,
                what: str = "the request") -> tuple[dict, dict]:
        timeout = timeout or limit("REQUEST_S", 300)
        if self.dead:
            raise RunnerGone(self.dead)
        result: dict = {}

        def exchange():
            try:
                send(self.box.proc.stdin, header, objects=objects)
                result["reply"] = recv(self.box.proc.stdout)
            except (ProtocolError, OSError, ValueError) as exc:
                result["error"] = exc

        worker = threading.Thread(target=exchange, daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            self._die(f"the notebook's code did not finish {what} within {timeout:g} s")
        elif "error" in result:
            self._die(self._why_gone(result["error"]))
        if self.dead:
            raise RunnerGone(self.dead)
        return result["reply"]

    def _why_gone(self, exc: Exception) -> str:
        time.sleep(0.2)                                  # let the watchdog record why it killed it
        if self.box.why:
            return f"the notebook's code was stopped: {self.box.why}"
        code = self.box.proc.poll()
        if code is not None:
            return f"the notebook's code ended its own process (exit status {code})"
        return f"the notebook's process sent an unreadable reply ({exc})"

    def _die(self, why: str) -> None:
        self.dead = self.dead or why
        self.box.kill(why)

    # -- requests ------------------------------------------------------------------------
    def hello(self, timeout: float | None = None) -> dict:
        """Wait for the notebook's cells to run; the errors they raised, by cell id."""
        head, _ = self.request({"op": "hello"}, timeout=timeout or limit("NOTEBOOK_S", 900),
                               what="running the notebook's cells")
        errors = head.get("errors", {})
        return {str(k): str(v)[:400] for k, v in errors.items()} if isinstance(errors, dict) else {}

    def resolve(self, names: list) -> dict:
        head, _ = self.request({"op": "resolve", "names": sorted(names)})
        kinds = head.get("kinds", {})
        return {n: kinds.get(n) for n in names} if isinstance(kinds, dict) else {}

    def call(self, name: str, args: tuple):
        head, _ = self.request({"op": "call", "name": name, "args": encode_value(list(args))},
                               what=f"a call of {name}")
        if "error" in head:
            raise RemoteError(f"{name}{_short(args)} raised {head['error']}")
        return decode_value(head.get("value"))

    def case(self, name: str, problem_ref: list, size, seed: int) -> tuple[dict, dict]:
        return self.request({"op": "case", "name": name, "problem": problem_ref},
                            objects={"case": (size, seed)}, what=f"a check of {name}")

    def time(self, name: str, problem_ref: list, size, seed: int, budget_s: float) -> tuple[dict, dict]:
        return self.checked({"op": "time", "name": name, "problem": problem_ref, "budget_s": budget_s},
                            objects={"case": (size, seed)}, what=f"the timed runs of {name}")

    def checked(self, header: dict, **kw) -> tuple[dict, dict]:
        """A request whose reply must not be an error (the runner's harness failed: say so)."""
        head, arrays = self.request(header, **kw)
        if "error" in head:
            raise CheckFailed(f"the runner could not {header['op']}: {str(head['error'])[:1000]}")
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

    def outputs(self) -> dict:
        _, arrays = self.checked({"op": "outputs"})
        return arrays

    def close(self) -> str:
        """Stop the runner; return the tail of its log (what the notebook printed)."""
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
    text = json.dumps(encode_value(list(args)))
    return "(" + (text[1:-1] if len(text) < 120 else text[1:117] + "…") + ")"
