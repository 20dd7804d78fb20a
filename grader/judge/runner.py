"""The runner: runs a submission's code inside the sandbox and does what the judge asks of it.

    python -P -s -m grader.judge.runner PLAN.json      (started by grader.judge.remote, in a sandbox)

It runs the plan's cells (grader.judge.plan) in an IPython shell — answer cells whole, the release's
other cells only for their definitions, ``%%cuda`` cells from the modules the judge compiled — then
answers requests on its standard input and output until told to stop: resolve names, call a plain
function, run one checked case of a launch function, time one. Before any learner code runs, the
protocol moves to private file descriptors and ``print`` goes to a log, so output cannot corrupt it.

Everything here runs in the learner's process and may be changed by the learner's code: the judge
trusts none of it. It generates the inputs itself, compares every output with its own reference,
and bounds every figure by its own clock (grader.judge.verbs).
"""
from __future__ import annotations

import ast
import json
import os
import sys
import time
import traceback


def _private_streams():
    """The protocol's own copies of stdin/stdout; fd 0 then reads /dev/null and fd 1 writes the log."""
    rfd, wfd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    return os.fdopen(rfd, "rb", buffering=0), os.fdopen(wfd, "wb")


def _definitions(source: str) -> list:
    """The top-level imports, functions, classes and assignments of a (Python) cell, one by one."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        tree = ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return []
    keep = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)
    return [ast.Module(body=[n], type_ignores=[]) for n in tree.body if isinstance(n, keep)]


class Runner:
    def __init__(self, plan: dict):
        from IPython.core.interactiveshell import InteractiveShell

        import grader

        self.plan = plan
        self.shell = InteractiveShell.instance()
        grader.cuda.register_magic(self.shell)       # grader was imported before the shell existed
        self.errors: dict[str, str] = {}
        self.timed = None            # (launch, args, outputs) of the last "time" request

    # -- running the notebook -------------------------------------------------------
    def run_cells(self) -> None:
        """Answer and %%cuda cells whole (their errors are reported); the release's other cells only
        for their definitions (one that fails, e.g. for want of what a skipped demonstration would
        have made, is skipped silently: those cells are the course's, not the learner's)."""
        for cell in self.plan["run"]:
            if cell["mode"] == "given":
                for stmt in _definitions(cell["source"]):
                    try:
                        exec(compile(stmt, f"<{cell['id']}>", "exec"), self.shell.user_ns)
                    except Exception:      # e.g. a demonstration it needs was skipped: not the learner's
                        continue           # doing (a test that uses a broken answer says so itself)
                continue
            result = self.shell.run_cell(cell["source"], store_history=False, silent=False)
            err = result.error_before_exec or result.error_in_exec
            if err is not None:
                self.errors[cell["id"]] = f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}"

    @property
    def ns(self) -> dict:
        return self.shell.user_ns

    # -- requests -------------------------------------------------------------------
    def resolve(self, names: list) -> dict:
        from grader.cuda.module import CudaModule

        out = {}
        for name in names:
            if name not in self.ns:
                out[name] = "absent"
                continue
            value = self.ns[name]
            if isinstance(value, CudaModule):
                out[name] = "module"
            elif callable(value) and not isinstance(value, type):
                out[name] = "function"
            else:
                out[name] = "value"
        return out

    def call(self, name: str, args: list) -> dict:
        from grader.judge.protocol import decode_value, encode_value

        try:
            value = self.ns[name](*decode_value(args))
            return {"value": encode_value(value)}
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {exc}"[:2000]}

    @staticmethod
    def _problem(ref: list):
        import importlib

        module, attr = ref
        if not module.startswith("grader.problems."):
            raise ValueError(f"not a course problem: {module}")
        return getattr(importlib.import_module(module), attr)

    def case(self, head: dict) -> tuple[dict, dict]:
        import numpy as np

        import importlib

        check = importlib.import_module("grader.check")     # (grader.check is also the verb)

        problem, (size, seed) = self._problem(head["problem"]), head["objects"]["case"]
        try:
            check.refuse_if_context_lost()
            inputs = problem.make_inputs(np.random.default_rng(seed), size)
            obs = check.run_case(self.ns[head["name"]], problem, size, inputs)
        except Exception as exc:             # the learner's code broke the harness itself
            obs = check.Observation(error=check.explain(exc))
        head = {"error": obs.error, "launched": obs.launched, "returned": obs.returned,
                "inputs_changed": obs.inputs_changed, "scratch_bytes": obs.scratch_bytes}
        return head, {f"out:{k}": v for k, v in obs.outputs.items()}

    def time(self, head: dict) -> tuple[dict, dict]:
        """Time the launch as grader.speed does: outputs poisoned before each repetition, the L2
        flushed, events around the call. Returns the times and the last repetition's outputs."""
        from grader import timing
        from grader.speed import TimedCase

        problem, (size, seed) = self._problem(head["problem"]), head["objects"]["case"]
        launch = self.ns[head["name"]]
        case = TimedCase(problem, size, seed, repoisoned=True)
        times = timing.time_call(lambda: launch(*case.args), before_each=case.repoison,
                                 budget_s=float(head.get("budget_s", 3.0)))
        self.timed = (launch, case)
        return {"times": times}, self._outputs()

    def _outputs(self) -> dict:
        _, case = self.timed
        return {f"out:{k}": v for k, v in case.host_outputs().items()}

    def burst(self, head: dict) -> tuple[dict, dict]:
        """``prepare``: poison the outputs and wait; then ``reps`` launches back to back and wait
        (the judge's clock runs around this second request alone)."""
        import importlib

        check = importlib.import_module("grader.check")     # (grader.check is also the verb)

        launch, case = self.timed
        if head.get("prepare"):
            case.repoison()
        else:
            for _ in range(int(head["reps"])):
                launch(*case.args)
        check.wait_for_gpu()
        return {"done": True}, {}

    def serve(self, rfile, wfile) -> None:
        from grader.judge.protocol import recv, send

        while True:
            head, _ = recv(rfile, allow_pickle=True)
            op = head.get("op")
            try:
                if op == "exit":
                    send(wfile, {"ok": True})
                    return
                if op == "hello":
                    reply, arrays = {"errors": self.errors}, {}
                elif op == "resolve":
                    reply, arrays = {"kinds": self.resolve(head["names"])}, {}
                elif op == "call":
                    reply, arrays = self.call(head["name"], head["args"]), {}
                elif op == "case":
                    reply, arrays = self.case(head)
                elif op == "time":
                    reply, arrays = self.time(head)
                elif op == "burst":
                    reply, arrays = self.burst(head)
                elif op == "outputs":
                    reply, arrays = {"ok": True}, self._outputs()
                else:
                    reply, arrays = {"error": f"unknown request {op!r}"}, {}
            except Exception as exc:
                reply, arrays = {"error": f"{type(exc).__name__}: {exc}"[:2000],
                                 "trace": traceback.format_exc()[-2000:]}, {}
            send(wfile, reply, arrays)


def main() -> int:
    rfile, wfile = _private_streams()
    plan = json.loads(open(sys.argv[1]).read())
    t0 = time.monotonic()
    runner = Runner(plan)
    runner.run_cells()
    print(f"[runner] notebook ran in {time.monotonic() - t0:.1f} s; errors: {runner.errors}", file=sys.stderr)
    runner.serve(rfile, wfile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
