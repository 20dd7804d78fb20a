"""The runner: runs a submission's notebook inside the sandbox, once, and does what the judge asks of it.

    python -P -s -m grader.judge.runner /judge/plan.json      (started by grader.judge.remote, in a sandbox)

It executes the plan's cells (grader.judge.plan) top to bottom in an IPython shell, as Jupyter's
"Run All" would, keeping each cell's outputs (text, errors, figures) for the learner's feedback
notebook — so the one execution that grading needs also makes the feedback. Graded cells are not
run here (the judge runs them); ``%%cuda`` cells load the modules the judge compiled. A given cell
that raises is run again definition by definition (imports, functions, classes, assignments), so a
learner's broken demo cannot hide what later cells need; once the plan's time for cells is spent,
the remaining given cells run only for their definitions.

Then it answers requests on its private pipe until told to stop: resolve names, call a plain
function, run one checked case of a launch function, time one, and hand over the cells' outputs.
Before any learner code runs, the protocol moves to private file descriptors and ``print`` goes to
the captured outputs or the log, so output cannot corrupt it.

Everything here runs in the learner's process and may be changed by the learner's code: the judge
trusts none of it. It generates the inputs itself, compares every output with its own reference,
bounds every figure by its own clock (grader.judge.verbs) and validates every reply
(grader.judge.protocol, grader.judge.feedback).
"""
from __future__ import annotations

import ast
import io
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


# ---------------------------------------------------------------- a shell that keeps outputs
class Capture:
    """The outputs of the cell being run, in nbformat's shape (stream, display_data,
    execute_result, error), each text cut to MAX_TEXT and the cell's total to MAX_CELL bytes."""

    MAX_TEXT = 20_000
    MAX_CELL = 8 * 2**20

    def __init__(self):
        self.outputs: list | None = None
        self.size = 0

    def begin(self) -> list:
        self.outputs, self.size = [], 0
        return self.outputs

    def add(self, out: dict, size: int) -> None:
        if self.outputs is None or self.size + size > self.MAX_CELL:
            return
        self.size += size
        self.outputs.append(out)

    def text(self, name: str, s: str) -> None:
        if self.outputs is None or not s:
            return
        last = self.outputs[-1] if self.outputs else None
        if last and last["output_type"] == "stream" and last["name"] == name:
            if len(last["text"]) < self.MAX_TEXT:
                last["text"] += s[: self.MAX_TEXT - len(last["text"])]
            return
        self.add({"output_type": "stream", "name": name, "text": s[: self.MAX_TEXT]}, min(len(s), self.MAX_TEXT))


def make_shell(capture: Capture):
    """An IPython shell whose displays, results and tracebacks go to ``capture`` (figures inline)."""
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell

    def plain(data) -> dict:
        """A display's data as JSON can carry it: bytes (a PNG) base64-encoded, other values as text."""
        import base64

        out = {}
        for mime, v in (data or {}).items():
            if isinstance(v, bytes):
                v = base64.b64encode(v).decode()
            elif not isinstance(v, (str, dict, list)):
                v = str(v)
            out[str(mime)] = v
        return out

    def data_size(data) -> int:
        return sum(len(v) if isinstance(v, str) else 64 for v in data.values())

    class Publisher(DisplayPublisher):
        def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kw):
            data = plain(data)
            capture.add({"output_type": "display_data", "data": data, "metadata": {}}, data_size(data))

        def clear_output(self, wait=False):
            if capture.outputs is not None:
                capture.outputs.clear()
                capture.size = 0

    class Hook(DisplayHook):
        def write_output_prompt(self):
            pass

        def write_format_data(self, format_dict, md_dict=None):
            data = plain(format_dict)
            capture.add({"output_type": "execute_result", "data": data, "metadata": {}}, data_size(data))

    class Shell(InteractiveShell):
        def enable_gui(self, gui=None):
            pass

        def _showtraceback(self, etype, evalue, stb):
            capture.add({"output_type": "error", "ename": getattr(etype, "__name__", "Error"),
                         "evalue": str(evalue)[: Capture.MAX_TEXT], "traceback": [str(s)[: Capture.MAX_TEXT] for s in stb[:200]]},
                        sum(len(str(s)) for s in stb[:200]))

    if InteractiveShell.initialized():         # another shell in this process (a test calling the runner in-process)
        InteractiveShell.clear_instance()
    shell = Shell.instance(display_pub_class=Publisher, displayhook_class=Hook)
    try:
        shell.enable_matplotlib("inline")
    except Exception:                 # no matplotlib_inline: figures are simply not kept
        pass
    return shell


class _Stream(io.TextIOBase):
    def __init__(self, capture: Capture, name: str):
        self.capture, self.name = capture, name

    def write(self, s):
        self.capture.text(self.name, str(s))
        return len(s)

    def writable(self):
        return True

    def flush(self):
        pass


INPUTS_KEPT = 2 * 2**30      # bytes of inputs the runner keeps for repeated cases
GIVEN_SHARE = 0.25          # a given cell may take this share of the plan's time for cells …
GIVEN_MIN_S = 15.0          # … or this many seconds, whichever is more (within what is left)


class CellStopped(Exception):
    """A given cell ran past its share of the time for cells while the notebook was graded."""

    def _render_traceback_(self):
        return [f"CellStopped: {self}"]


class _stopped_after:
    """Within the block, SIGALRM raises :class:`CellStopped` after ``seconds`` and then every
    second until the block ends (0: no limit)."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def _raise(self, signum, frame):
        raise CellStopped(f"stopped after {self.seconds:.0f} s: a course cell may take that long while the "
                          "notebook is graded (your kernel may be slow or never return); its definitions were kept")

    def __enter__(self):
        import signal

        if self.seconds > 0:
            self.previous = signal.signal(signal.SIGALRM, self._raise)
            signal.setitimer(signal.ITIMER_REAL, self.seconds, 1.0)
        return self

    def __exit__(self, *exc):
        import signal

        if self.seconds > 0:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        return False


class Runner:
    def __init__(self, plan: dict):
        import grader
        from grader.cases import Cases

        self.plan = plan
        self.capture = Capture()
        self.shell = make_shell(self.capture)
        grader.cuda.register_magic(self.shell)       # grader was imported before the shell existed
        self.errors: dict[str, str] = {}
        self.outputs: dict[str, list] = {}           # cell id -> its outputs
        self.skipped: list[str] = []                 # given cells run only for their definitions (time spent)
        self.seconds: dict[str, float] = {}          # cell id -> seconds it ran (the judge records the slowest)
        self.timed = None            # (launch, case) of the last "time" request
        self.phases: dict[str, float] = {}           # seconds: the interpreter and imports, setup, cells
        self._cases = Cases(INPUTS_KEPT)     # the inputs of the cases the judge asked for (Runner.inputs)

    # -- running the notebook -------------------------------------------------------
    def await_start(self, rfile) -> None:
        """Wait for the judge's word to run the cells: it measures its peers on the GPU meanwhile, while
        this process imports and sets up (no learner code has run, none touches the GPU). The word
        carries the judge's peer figures, which the demonstrations beside them show."""
        from grader import peers
        from grader.judge.protocol import TRUSTED, recv

        head, _ = recv(rfile, limits=TRUSTED)
        if head.get("op") == "start":
            peers.seed(head.get("peers"))

    def run_cells(self) -> None:
        """Every cell of the plan in order, outputs kept. Answer and %%cuda cells always run whole
        (their errors are reported); given cells run whole while the plan's time for cells lasts,
        each stopped past its share of it (:data:`GIVEN_SHARE`; a learner's slow or hanging kernel in
        a demonstration), and only for their definitions after that or when they raise."""
        budget = float(self.plan.get("cells_s", 1e9))
        start = time.monotonic()
        for cell in self.plan["run"]:
            if cell["mode"] == "test" and not self.plan.get("run_tests"):
                continue
            left = budget - (time.monotonic() - start)
            if cell["mode"] == "given" and left <= 0:
                self.skipped.append(cell["id"])
                self._define(cell)
                continue
            outputs = self.capture.begin()
            began = time.monotonic()
            saved = sys.stdout, sys.stderr
            sys.stdout, sys.stderr = _Stream(self.capture, "stdout"), _Stream(self.capture, "stderr")
            limit = min(left, max(GIVEN_MIN_S, GIVEN_SHARE * budget)) if cell["mode"] == "given" else 0
            try:
                with _stopped_after(limit):
                    result = self.shell.run_cell(cell["source"], store_history=False, silent=False)
                err = result.error_before_exec or result.error_in_exec
            except CellStopped as exc:          # the alarm fired as the cell returned
                err = exc
            finally:
                sys.stdout, sys.stderr = saved
                self.capture.outputs = None
            self.outputs[cell["id"]] = outputs
            self.seconds[cell["id"]] = round(time.monotonic() - began, 3)
            if err is None:
                continue
            if cell["mode"] == "given":
                self._define(cell)
            else:
                first = str(err).splitlines()[0][:300] if str(err) else ""
                self.errors[cell["id"]] = f"{type(err).__name__}: {first}"

    def _define(self, cell: dict) -> None:
        """A given cell's definitions, one by one (one that fails, e.g. for want of what a skipped
        demonstration would have made, is skipped: those cells are the course's, not the learner's)."""
        for stmt in _definitions(cell["source"]):
            try:
                exec(compile(stmt, f"<{cell['id']}>", "exec"), self.shell.user_ns)
            except Exception:
                continue

    @property
    def ns(self) -> dict:
        return self.shell.user_ns

    def notebook(self) -> dict:
        """What the feedback notebook needs: each cell's outputs, the cells not run whole, and the
        records the notebook made (closing plots) when the judge asked for them."""
        records = []
        path = os.environ.get("GRADER_RECORD")
        if path and os.path.isfile(path):
            with open(path) as f:
                for line in f.read(4 * 2**20).splitlines()[:1000]:
                    try:
                        records.append(json.loads(line))
                    except ValueError:
                        continue
        return {"cells": [{"id": cid, "outputs": outs} for cid, outs in self.outputs.items()],
                "skipped": self.skipped, "records": records, "seconds": self.seconds, "phases": self.phases}

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
        except NotImplementedError as exc:       # an exercise not written yet: the one-line verdict
            from grader.check import explain

            return {"error": explain(exc)[:2000]}
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
        import importlib

        check = importlib.import_module("grader.check")     # (grader.check is also the verb)

        problem, (size, seed) = self._problem(head["problem"]), head["objects"]["case"]
        try:
            check.refuse_if_context_lost()
            inputs = self.inputs(problem, size, seed)
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
        case = TimedCase(problem, size, seed, repoisoned=True, inputs=self.inputs(problem, size, seed))
        times = timing.time_call(lambda: launch(*case.args), before_each=case.repoison,
                                 budget_s=float(head.get("budget_s", 3.0)))
        self.timed = (launch, case)
        return {"times": times}, self._outputs()

    def inputs(self, problem, size, seed: int) -> dict:
        """The problem's inputs for (size, seed), made once: the judge asks for the same case more
        than once (the speed cell checks the visible sizes again). At most INPUTS_KEPT bytes kept."""
        return self._cases.get(problem, size, seed, reference=False)[0]

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
            import gc

            gc.disable()            # a collection of this large process would be a pause the launch did not cause
            try:
                for _ in range(int(head["reps"])):
                    launch(*case.args)
            finally:
                gc.enable()
        check.wait_for_gpu()
        return {"done": True}, {}

    def serve(self, rfile, wfile) -> None:
        from grader.judge.protocol import TRUSTED, recv, send

        while True:
            head, _ = recv(rfile, allow_pickle=True, limits=TRUSTED)
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
                elif op == "notebook":
                    reply, arrays = self.notebook(), {}
                else:
                    reply, arrays = {"error": f"unknown request {op!r}"}, {}
            except Exception as exc:
                reply, arrays = {"error": f"{type(exc).__name__}: {exc}"[:2000],
                                 "trace": traceback.format_exc()[-2000:]}, {}
            try:
                send(wfile, reply, arrays)
            except TypeError as exc:                    # a value JSON cannot carry (a display's data)
                send(wfile, {"error": f"the reply could not be sent: {exc}"[:2000]})


def main() -> int:
    from grader.judge.startup import copy_font_list, print_profile, process_age_s, start_profile

    age = process_age_s()
    rfile, wfile = _private_streams()
    plan = json.loads(open(sys.argv[1]).read())
    copy_font_list(os.path.dirname(sys.argv[1]))
    profile = start_profile() if os.environ.get("GRADER_RUNNER_PROFILE") == "1" else None
    t0 = time.monotonic()
    runner = Runner(plan)
    t1 = time.monotonic()
    runner.await_start(rfile)
    t2 = time.monotonic()
    runner.run_cells()
    if profile:
        print_profile(profile)
    import gc

    gc.collect()
    gc.freeze()         # the notebook's objects: later collections (between timed launches) need not walk them
    runner.phases = {"imports": round(age, 3) if age is not None else -1.0, "setup": round(t1 - t0, 3),
                     "waited": round(t2 - t1, 3), "cells": round(time.monotonic() - t2, 3)}
    print(f"[runner] notebook ran in {time.monotonic() - t2:.1f} s; errors: {runner.errors}", file=sys.stderr)
    runner.serve(rfile, wfile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
