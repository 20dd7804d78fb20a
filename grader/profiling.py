"""profiling: ``grader.profile``, the handful of Nsight Compute figures that explain a kernel's speed, from a notebook.

    p = grader.profile(launch_tma, P.tma_transpose)          # the problem's bench size
    p = grader.profile(launch_wg, P.wgmma_gemm, Shape(4096, 4096, 4096), kernel="wgmma_gemm")

A launch function cannot be profiled in the process that made it: Nsight Compute (``ncu``) runs
the program it profiles. So the launch function, the problem and the size are pickled by value
(cloudpickle; a compiled cell travels as its cubin), and a small runner (``python -m grader.profiling
--run``) makes the problem's inputs (as the timed runs do), launches once to warm up, then once
between ``cuProfilerStart`` and ``cuProfilerStop`` — the launch ncu measures, with
``--profile-from-start off --clock-control none --target-processes all`` and one fixed set of
metrics (:data:`METRICS`). The report is read back as CSV (``--page raw --csv --print-units base``)
and shown as a few lines, one sentence each on how to read them, with a plot of where the warps
wait.

Where it cannot run it says why in one line and returns a :class:`Profile` that holds only the
reason: no GPU, no ncu, counters restricted to administrators (``ERR_NVGPUCTRPERM``).
:func:`recorded` reads a profile the course recorded on a GPU (``results/profiles/<lesson>.json``),
so a learner without one still sees a real one; :func:`find_the_bottleneck` is the lessons' cell:
the learner's own kernel where it can run, the reference's recording beside it either way.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .cuda.pickling import dumps   # a launch pickled by value, for the runner process
from .profile_report import (_STALL, METRICS, PERMISSION_HELP, STALLS, KernelProfile, Profile,  # noqa: F401
                             _unknown_metrics, diagnose, parse_details_csv, parse_raw_csv)

NO_NCU = ("Nsight Compute (ncu) was not found: it ships with the CUDA toolkit (/usr/local/cuda/bin/ncu) or as "
          "its own package (https://developer.nvidia.com/nsight-compute); put it on PATH or set $NCU.")
NO_GPU = "no GPU here: Nsight Compute profiles a kernel while it runs on a GPU."
ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- finding ncu
def find_ncu() -> str | None:
    """$NCU, ncu on PATH, the CUDA toolkit's (/usr/local/cuda*/bin), or Nsight Compute's own install
    (/opt/nvidia/nsight-compute/*/ncu), newest first; None when there is none."""
    from .cuda.sanitizer import find_executable

    return find_executable("ncu", "NCU", ("/opt/nvidia/nsight-compute/*/ncu",))


# ---------------------------------------------------------------- profiling
def profile(launch, problem, size=None, *, kernel: str | None = None, launch_count: int = 8, ncu: str | None = None,
            timeout: float = 300.0, show: bool = True) -> Profile:
    """Profile one launch of ``launch`` on ``problem``'s inputs at ``size`` (default: its bench size)
    under Nsight Compute, in a subprocess; show the summary (and its plot) when ``show``. ``kernel``:
    profile only kernels whose name contains it; ``launch_count``: at most this many kernels."""
    from . import backend

    size = problem.bench_size if size is None else size
    prof = _run(launch, problem, size, kernel=kernel, launch_count=launch_count, ncu=ncu, timeout=timeout,
                simulator=backend.SIMULATOR)
    if show:
        _show(prof)
    return prof


def _show(prof: Profile):
    print(prof)
    if prof.ok:
        fig = prof.plot()
        try:
            from IPython.display import display

            display(fig)
        except ImportError:
            pass


GRADING = ("not profiled while the notebook is graded (Nsight Compute replays the kernel many times); "
           "run this cell in your own lab for your kernel's profile")


def _run(launch, problem, size, *, kernel, launch_count, ncu, timeout, simulator) -> Profile:
    if simulator:
        return Profile(unavailable=NO_GPU)
    from .judged import in_judge

    if in_judge():                                    # the judge's runner: feedback, and grading time is dear
        return Profile(unavailable=GRADING)
    ncu = ncu or find_ncu()
    if ncu is None:
        return Profile(unavailable=NO_NCU)
    why = problem.unavailable(False, _cc())
    if why:
        return Profile(unavailable=why.replace("compiled and inspected only: ", ""))
    try:
        payload = dumps((launch, problem, size))
    except Exception as e:                                 # noqa: BLE001  (anything the pickler refuses)
        return Profile(unavailable=f"the launch function could not be sent to the profiler's process ({type(e).__name__}: "
                                   f"{str(e)[:200]}); profile a launch function defined in the notebook")
    metrics = list(METRICS)
    with tempfile.TemporaryDirectory(prefix="grader-profile-") as tmp:
        pkl, rep = Path(tmp) / "launch.pkl", Path(tmp) / "report"
        pkl.write_bytes(payload)
        for _ in range(2):                                 # once more without metrics this ncu does not know
            cmd = [ncu, "--target-processes", "all", "--clock-control", "none", "--profile-from-start", "off",
                   "--launch-count", str(launch_count), "--metrics", ",".join(metrics), "--export", str(rep), "--force-overwrite"]
            if kernel:
                cmd += ["--kernel-name", f"regex:{kernel}"]
            cmd += [sys.executable, "-m", "grader.profiling", "--run", str(pkl)]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT),
                                   env={**os.environ, "GRADER_FORCE_GPU": "1", "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")})
            except subprocess.TimeoutExpired:
                return Profile(unavailable=f"ncu did not finish within {timeout:.0f} s (a kernel that hangs, or ncu "
                                           "replaying a long kernel many times: pass a smaller size)")
            log = p.stdout + p.stderr
            bad = _unknown_metrics(log)
            if bad and len(bad) < len(metrics):
                metrics = [m for m in metrics if m not in bad]
                continue
            break
        rep_file = Path(str(rep) + ".ncu-rep")
        if not rep_file.exists():
            return Profile(unavailable=diagnose(log) or f"ncu wrote no report (exit {p.returncode}): {log.strip()[-300:]}",
                           command=cmd, log=log)
        raw = subprocess.run([ncu, "--import", str(rep_file), "--page", "raw", "--csv", "--print-units", "base"],
                             capture_output=True, text=True, timeout=120)
        kernels = parse_raw_csv(raw.stdout)
    if not kernels:
        return Profile(unavailable=diagnose(log) or "ncu measured no kernel", command=cmd, log=log)
    try:
        from . import device

        name = device.info().name
    except Exception:                                      # noqa: BLE001
        name = ""
    return Profile(kernels=kernels, source="measured now", device=name, command=cmd, log=log)


def _cc():
    from .cuda import toolchain

    return toolchain.compute_capability()


def recorded(lesson: str, root: Path | None = None) -> Profile:
    """The profile of a lesson's reference recorded on a GPU (``results/profiles/<lesson>.json``)."""
    path = (root or ROOT) / "results" / "profiles" / f"{lesson}.json"
    if not path.exists():
        return Profile(unavailable=f"no recorded profile for {lesson} ({path.relative_to(root or ROOT)} is missing)")
    d = json.loads(path.read_text())
    return Profile.from_json(d, source=f"recorded: {d.get('note', 'the reference')}")


def find_the_bottleneck(launch, problem, lesson: str, size=None, kernel: str | None = None) -> Profile:
    """The lessons' "find the bottleneck" cell: on a GPU with ncu and counters, the learner's own
    kernel profiled now; always, the reference's recorded profile beside it (results/profiles)."""
    mine = profile(launch, problem, size, kernel=kernel, show=False)
    ref = recorded(lesson)
    print("yours:", mine if not mine.ok else "")
    if mine.ok:
        _show(mine)
    print()
    print("the course's reference:", "" if ref.ok else ref)
    if ref.ok:
        _show(ref)
    return mine if mine.ok else ref


# ---------------------------------------------------------------- the runner (ncu's target)
def _runner(pkl: str, once: bool = False) -> int:
    """Launch once (``once``: under compute-sanitizer, grader.cuda.sanitize) or warm up and launch
    again between cuProfilerStart/Stop (under ncu). A launch that fails prints one line and exits 3."""
    import pickle

    launch, problem, size = pickle.loads(Path(pkl).read_bytes())
    from .speed import TimedCase
    from cuda.bindings import driver

    case = TimedCase(problem, size)
    try:
        launch(*case.args)                                 # warm-up: compiles, encodes maps, loads modules
        _sync()
    except Exception as e:                                 # noqa: BLE001
        from .check import explain

        print("grader: the launch failed: " + explain(e).splitlines()[0], flush=True)
        return 3
    if once:
        print("grader: the launch finished", flush=True)
        return 0
    driver.cuProfilerStart()
    launch(*case.args)
    _sync()
    driver.cuProfilerStop()
    print("grader.profile: runner done", flush=True)
    return 0


def _sync():
    from numba import cuda

    cuda.synchronize()
    if "torch" in sys.modules:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] in ("--run", "--once"):
        sys.exit(_runner(sys.argv[2], once=sys.argv[1] == "--once"))
    print("usage: python -m grader.profiling --run PAYLOAD.pkl   (grader.profile's runner, under ncu)")
    sys.exit(2)


__all__ = ["profile", "Profile", "KernelProfile", "recorded", "find_the_bottleneck", "find_ncu", "parse_raw_csv",
           "parse_details_csv", "METRICS", "STALLS", "PERMISSION_HELP", "dumps"]
