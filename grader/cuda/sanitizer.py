"""``grader.cuda.sanitize``: one launch under NVIDIA's compute-sanitizer, from a notebook.

    rep = grader.cuda.sanitize(launch_tr, P.smem_transpose, (64, 64), tool="racecheck")

The launch runs in its own process (as grader.profile's does: the launch function, the problem and the
size pickled by value, a compiled cell as its cubin; ``python -m grader.profiling --once``), under
``compute-sanitizer --tool TOOL``: racecheck (shared-memory hazards between threads), synccheck (barriers
reached by some threads only, wrong masks), memcheck (reads and writes outside an allocation, misaligned
accesses, hardware exceptions), initcheck (global memory read before it was written). Its own process
also means a kernel that traps or hangs cannot take the notebook's CUDA context with it: ``tool=None``
runs the launch there with no tool at all, to see how a hang ends.

The report keeps the tool's text (``text``) and lists each finding with one sentence on what it means
and where to look. Without a GPU or without compute-sanitizer: one line saying so.
Standard library only (the runner needs the GPU stack).
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
NO_TOOL = ("compute-sanitizer was not found: it ships with the CUDA toolkit (/usr/local/cuda/bin/"
           "compute-sanitizer); put it on PATH or set $COMPUTE_SANITIZER.")
NO_GPU = "no GPU here: compute-sanitizer watches a kernel while it runs on a GPU."
ROOT = Path(__file__).resolve().parent.parent.parent

#: headline pattern -> what it means, in one sentence
MEANING = [
    (r"Race reported between Write access .* and Read access|Race reported between Read access .* and Write access",
     "a thread read shared memory that another thread writes (or the other way round) with no barrier ordering "
     "the two: put __syncthreads() (or the mbarrier wait that hands the data over) between the write and the read"),
    (r"Race reported between Write access .* and Write access",
     "two threads wrote the same shared-memory bytes with nothing ordering them: only one write should reach each "
     "element, or a barrier must separate them"),
    (r"Race reported",
     "a shared-memory hazard between threads that no barrier orders"),
    (r"Barrier error detected\. Divergent thread\(s\) in block",
     "__syncthreads() was reached by only some threads of the block (it sits inside a branch or a loop they leave "
     "early): every thread must reach every barrier"),
    (r"Barrier error detected\. Divergent thread\(s\) in warp",
     "a warp-wide barrier or collective (__syncwarp, *_sync) was reached by only some lanes of its mask"),
    (r"Barrier error detected",
     "a barrier was used in a way the hardware does not allow (synccheck's message says which)"),
    (r"Invalid __global__ (read|write)",
     "a thread read or wrote global memory outside every allocation: an index past the end (a missing bounds "
     "guard), or a pointer to the wrong buffer"),
    (r"Invalid __shared__ (read|write)",
     "a thread accessed shared memory past the block's allocation: the dynamic shared-memory size asked for at "
     "launch is smaller than what the kernel indexes"),
    (r"Invalid __local__",
     "a thread accessed its stack (local memory) out of bounds: an array indexed past its end"),
    (r"Misaligned",
     "an access not aligned to its size (a 16-byte load from an address that is not a multiple of 16)"),
    (r"Uninitialized __global__ memory read",
     "the kernel read global memory that nothing had written: an output read before it is written, or a scratch "
     "buffer never initialised"),
    (r"Warp Illegal Instruction|Illegal Instruction",
     "a warp executed an illegal instruction: a trap (course::mbar_wait_or_trap gave up on a wait that never "
     "completed) or a kernel built for another GPU"),
    (r"Program hit .*(launch failure|LAUNCH_FAILED|ILLEGAL)",
     "the launch failed on the GPU: the line above it says which kernel and which thread"),
]


def find_executable(name: str, env_var: str, extra_globs: tuple = ()) -> str | None:
    """A CUDA tool: ``$env_var``, ``name`` on PATH, the CUDA toolkit's (``bin/``, newest
    /usr/local/cuda-*), then ``extra_globs`` (newest first); None when there is none."""
    env = os.environ.get(env_var)
    if env and os.access(env, os.X_OK):
        return env
    found = shutil.which(name)
    if found:
        return found
    from .toolchain import cuda_home

    home = cuda_home()
    cands = ([str(home / "bin" / name)] if home else []) + [f"/usr/local/cuda/bin/{name}"]
    for pattern in (f"/usr/local/cuda-*/bin/{name}", *extra_globs):
        cands += sorted(glob.glob(pattern), reverse=True)
    return next((c for c in cands if os.access(c, os.X_OK)), None)


def find_sanitizer() -> str | None:
    """$COMPUTE_SANITIZER, compute-sanitizer on PATH, or the CUDA toolkit's."""
    return find_executable("compute-sanitizer", "COMPUTE_SANITIZER", ("/usr/local/cuda*/compute-sanitizer/compute-sanitizer",))


@dataclass
class Finding:
    headline: str                 # the tool's first line of the finding
    lines: list                   # the lines under it (where, which thread, which address)
    meaning: str                  # one sentence

    def __str__(self):
        where = next((ln for ln in self.lines if ln.startswith(("at ", "and "))), "")
        return f"{self.headline}" + (f"\n      {where}" if where else "") + f"\n      → {self.meaning}"


@dataclass
class SanitizerReport:
    """What :func:`sanitize` saw: ``findings``, the tool's ``summary`` line, the launch's own
    ``outcome`` line (finished, or the error it failed with), the whole ``text``; or ``unavailable``."""
    tool: str | None
    findings: list = field(default_factory=list)
    summary: str = ""
    outcome: str = ""
    text: str = ""
    unavailable: str | None = None
    returncode: int | None = None

    @property
    def clean(self) -> bool:
        return self.unavailable is None and not self.findings and "finished" in self.outcome

    def __str__(self):
        if self.unavailable:
            return f"not run: {self.unavailable}"
        head = f"compute-sanitizer --tool {self.tool}" if self.tool else "the launch, in its own process"
        lines = [f"{head}: {self.outcome or 'no outcome line (see .text)'}"]
        if self.summary:
            lines.append(f"  {self.summary}")
        for k, f in enumerate(self.findings[:8], 1):
            lines.append(f"  {k}. " + str(f).replace("\n", "\n  "))
        if len(self.findings) > 8:
            lines.append(f"  … {len(self.findings) - 8} more (.text has them all)")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


def parse(text: str) -> tuple[list, str]:
    """(findings, summary line) from compute-sanitizer's output: its lines start with '========= ';
    a finding is an unindented line (after the prefix) and the indented lines under it."""
    findings, summary, cur = [], "", None
    for raw in text.splitlines():
        if not raw.startswith("========="):
            continue
        body = raw[len("========="):]
        stripped = body.strip()
        if not stripped or stripped == "COMPUTE-SANITIZER":
            cur = None
            continue
        if re.match(r"(ERROR|RACECHECK|LEAK|SYNCCHECK|INITCHECK) SUMMARY", stripped):
            summary = stripped
            cur = None
            continue
        if re.match(r"(Saved host backtrace|Host Frame|Device Frame)", stripped):
            continue                                       # the host's call stack: not the kernel's story
        if body.startswith("     ") and cur is not None:
            cur.lines.append(stripped)
            continue
        headline = re.sub(r"^(Error|Warning): ", "", stripped)
        meaning = next((m for pat, m in MEANING if re.search(pat, stripped + " " + headline)), "")
        cur = Finding(headline, [], meaning or "see the tool's documentation for this message")
        findings.append(cur)
    # the racecheck 'and Read access …' continuation belongs to its race
    for f in findings:
        full = " ".join([f.headline] + f.lines)
        better = next((m for pat, m in MEANING if re.search(pat, full)), None)
        if better:
            f.meaning = better
    return findings, summary


def sanitize(launch, problem, size=None, tool: str | None = "racecheck", *, timeout: float = 180.0,
             show: bool = True, extra: tuple = ()) -> SanitizerReport:
    """Run one launch of ``launch`` on ``problem``'s inputs at ``size`` (default: its first visible
    size — sanitizers slow kernels down 10–100×) under ``compute-sanitizer --tool tool`` in its own
    process; ``tool=None``: no tool, just the launch in its own process. Prints the report when ``show``."""
    from .pickling import dumps
    from .toolchain import gpu_available

    if tool is not None and tool not in TOOLS:
        raise ValueError(f"tool must be one of {TOOLS} or None, not {tool!r}")
    size = problem.sizes[0] if size is None else size
    rep = _run(launch, problem, size, tool, timeout, not gpu_available(), dumps, extra)
    if show:
        print(rep)
    return rep


GRADING = "not run while the notebook is graded (a sanitizer slows a kernel 10–100×); run this cell in your own lab"


def _run(launch, problem, size, tool, timeout, simulator, dumps, extra=()) -> SanitizerReport:
    if simulator:
        return SanitizerReport(tool, unavailable=NO_GPU)
    from ..judged import in_judge

    if in_judge():                                    # the judge's runner: feedback, and grading time is dear
        return SanitizerReport(tool, unavailable=GRADING)
    exe = find_sanitizer() if tool else None
    if tool and exe is None:
        return SanitizerReport(tool, unavailable=NO_TOOL)
    try:
        payload = dumps((launch, problem, size))
    except Exception as e:                                    # noqa: BLE001
        return SanitizerReport(tool, unavailable=f"the launch function could not be sent to its own process "
                                                 f"({type(e).__name__}: {str(e)[:200]})")
    with tempfile.TemporaryDirectory(prefix="grader-sanitize-") as tmp:
        pkl = Path(tmp) / "launch.pkl"
        pkl.write_bytes(payload)
        cmd = [sys.executable, "-m", "grader.profiling", "--once", str(pkl)]
        if tool:
            # --report-api-errors no: the host libraries' own probing of the driver (cuGetProcAddress
            # answered "invalid value", seen on an H200 2026-11-28) is not the kernel's error
            cmd = [exe, "--tool", tool, "--report-api-errors", "no", "--print-limit", "50", *extra] + cmd
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT),
                               env={**os.environ, "GRADER_FORCE_GPU": "1", "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")})
        except subprocess.TimeoutExpired as e:
            text = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            return SanitizerReport(tool, outcome=f"did not finish within {timeout:.0f} s: a kernel that never ends "
                                                 "(its process was stopped; the notebook's GPU is untouched)", text=text)
    text = p.stdout + p.stderr
    findings, summary = parse(text)
    outcome = next((ln.split("grader: ", 1)[1] for ln in text.splitlines() if "grader: the launch" in ln),
                   f"the process ended with exit code {p.returncode}")
    return SanitizerReport(tool, findings=findings, summary=summary, outcome=outcome, text=text, returncode=p.returncode)


__all__ = ["sanitize", "SanitizerReport", "Finding", "parse", "find_sanitizer", "find_executable", "TOOLS", "MEANING"]
