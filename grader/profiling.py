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

import csv
import glob
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

#: Stall reasons Nsight Compute reports per issued instruction (Warp State Statistics), in its names.
STALLS = ("long_scoreboard", "barrier", "membar", "short_scoreboard", "wait", "mio_throttle", "lg_throttle",
          "math_pipe_throttle", "tex_throttle", "not_selected", "selected", "dispatch_stall", "drain", "imc_miss",
          "branch_resolving", "no_instruction", "sleeping", "misc", "gmma")
_STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"

#: The fixed metric set: what each figure of the summary is computed from.
METRICS = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum", "dram__bytes_write.sum", "dram__bytes.sum.per_second",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_gmma.sum",
    "smsp__inst_executed_op_shared_ld.sum", "smsp__inst_executed_op_shared_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "launch__registers_per_thread", "launch__block_size", "launch__grid_size",
    "launch__shared_mem_per_block_dynamic", "launch__shared_mem_per_block_static",
    "launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_blocks",
    "launch__occupancy_limit_warps", "sm__maximum_warps_per_active_cycle_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__waves_per_multiprocessor",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
) + tuple(_STALL.format(s) for s in STALLS)

#: How to enable the counters where they are restricted (NVIDIA's page on ERR_NVGPUCTRPERM).
PERMISSION_HELP = ("GPU performance counters are restricted to administrators on this machine (ERR_NVGPUCTRPERM). "
                   "Run as root or with CAP_SYS_ADMIN (a container: docker run --cap-add=SYS_ADMIN; driver R565+: "
                   "CAP_PERFMON), or let every user read them: `options nvidia NVreg_RestrictProfilingToAdminUsers=0` "
                   "in /etc/modprobe.d/, then reload the driver (reboot). "
                   "https://developer.nvidia.com/ERR_NVGPUCTRPERM")
NO_NCU = ("Nsight Compute (ncu) was not found: it ships with the CUDA toolkit (/usr/local/cuda/bin/ncu) or as "
          "its own package (https://developer.nvidia.com/nsight-compute); put it on PATH or set $NCU.")
NO_GPU = "no GPU here: Nsight Compute profiles a kernel while it runs on a GPU."
ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- finding ncu
def find_ncu() -> str | None:
    """$NCU, ncu on PATH, the CUDA toolkit's (/usr/local/cuda*/bin), or Nsight Compute's own install
    (/opt/nvidia/nsight-compute/*/ncu), newest first; None when there is none."""
    env = os.environ.get("NCU")
    if env and os.access(env, os.X_OK):
        return env
    on_path = shutil.which("ncu")
    if on_path:
        return on_path
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    cands = ([os.path.join(home, "bin", "ncu")] if home else []) + ["/usr/local/cuda/bin/ncu"]
    cands += sorted(glob.glob("/usr/local/cuda-*/bin/ncu"), reverse=True)
    cands += sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)
    return next((c for c in cands if os.access(c, os.X_OK)), None)


# ---------------------------------------------------------------- what a profile holds
@dataclass
class KernelProfile:
    """One profiled kernel launch: its name and ``metrics`` {ncu metric name: (value, unit)}."""
    name: str
    metrics: dict = field(default_factory=dict)

    def get(self, metric: str, default=None):
        v = self.metrics.get(metric)
        return default if v is None else v[0]

    # -- the figures that explain speed ----------------------------------------------------
    @property
    def duration_us(self):
        ns = self.get("gpu__time_duration.sum")
        return None if ns is None else ns / 1e3

    @property
    def dram_gbs(self):
        b = self.get("dram__bytes.sum.per_second")
        if b is not None:
            return b / 1e9
        rd, wr, ns = self.get("dram__bytes_read.sum"), self.get("dram__bytes_write.sum"), self.get("gpu__time_duration.sum")
        return (rd + wr) / ns if None not in (rd, wr, ns) and ns else None

    @property
    def stalls(self) -> list[tuple[str, float]]:
        """(reason, cycles a warp waits per instruction it issues), largest first."""
        out = [(s, self.get(_STALL.format(s))) for s in STALLS]
        return sorted([(s, v) for s, v in out if v], key=lambda x: -x[1])

    @property
    def shared_wavefronts_per_request(self):
        """(loads, stores): shared-memory wavefronts per warp-wide instruction (1: conflict-free for
        4-byte accesses; n: an n-way bank conflict on average)."""
        out = []
        for op in ("ld", "st"):
            n = self.get(f"smsp__inst_executed_op_shared_{op}.sum")
            w = self.get(f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum")
            out.append(w / n if n and w is not None else None)
        return tuple(out)

    def lines(self) -> list[str]:
        """The summary: one figure a line, each with how to read it."""
        g = self.get
        out = [f"{self.name}"]
        if self.duration_us is not None:
            out.append(f"  time               {self.duration_us:10.1f} µs   the kernel alone, clocks as they run (no locking)")
        dram = g("dram__throughput.avg.pct_of_peak_sustained_elapsed")
        if dram is not None:
            gbs = self.dram_gbs
            out.append(f"  DRAM bandwidth     {dram:9.1f} % of peak" + (f" ({gbs:,.0f} GB/s)" if gbs else "")
                       + "   near 80–90%: memory-bound, the bytes are the floor")
        tensor = g("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active")
        if tensor is not None:
            out.append(f"  tensor pipe        {tensor:9.1f} % of peak   the tensor cores' busy cycles (mma.sync and "
                       "wgmma alike): a GEMM's figure of merit")
        sm = g("sm__throughput.avg.pct_of_peak_sustained_elapsed")
        mem = g("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
        if sm is not None and mem is not None:
            out.append(f"  SM / memory busy  {sm:6.1f} % / {mem:.1f} %   both low: latency-bound (too little in flight), "
                       "not throughput-bound")
        ld, st = self.shared_wavefronts_per_request
        conflicts = (g("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum") or 0) + \
            (g("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum") or 0)
        if ld is not None or st is not None:
            f = lambda x: "—" if x is None else f"{x:.2f}"  # noqa: E731
            out.append(f"  shared memory      {f(ld)} / {f(st)} wavefronts per load / store   1.00 is conflict-free "
                       f"for 4-byte lanes; {conflicts:,.0f} bank-conflict wavefronts in all")
        regs = g("launch__registers_per_thread")
        if regs is not None:
            theo, ach = g("sm__maximum_warps_per_active_cycle_pct"), g("sm__warps_active.avg.pct_of_peak_sustained_active")
            limits = {k: g(f"launch__occupancy_limit_{k}") for k in ("registers", "shared_mem", "blocks", "warps")}
            limits = {k: v for k, v in limits.items() if v is not None}
            lim = min(limits, key=limits.get) if limits else None
            out.append(f"  registers          {regs:9.0f} / thread" +
                       (f"; occupancy {ach:.0f}% achieved of {theo:.0f}% possible" if None not in (theo, ach) else "") +
                       (f" (limit: {lim.replace('_', ' ')}, {limits[lim]:.0f} blocks/SM)" if lim else "") +
                       "   fewer warps are fine if each keeps many loads in flight")
        top = self.stalls[:3]
        if top:
            out.append("  warps wait on      " + ", ".join(f"{s.replace('_', ' ')} {v:.1f}" for s, v in top) +
                       "   cycles per issued instruction: " + _STALL_MEANING.get(top[0][0], ""))
        return out


_STALL_MEANING = {
    "long_scoreboard": "long scoreboard = waiting for global (or local) memory loads",
    "barrier": "barrier = waiting at __syncthreads / bar.sync for the other warps",
    "membar": "membar = waiting for a memory fence",
    "short_scoreboard": "short scoreboard = waiting for shared memory or a special function (MUFU)",
    "wait": "wait = fixed-latency dependences (back-to-back arithmetic)",
    "mio_throttle": "MIO throttle = the shared-memory / special-instruction queue is full",
    "lg_throttle": "LG throttle = the global-memory instruction queue is full (many small loads)",
    "math_pipe_throttle": "math pipe throttle = a math pipe is saturated (good, if it is the one you want)",
    "not_selected": "not selected = other warps were issued: enough parallelism",
    "selected": "selected = issuing (not a stall)",
    "dispatch_stall": "dispatch stall = the dispatcher could not issue",
    "gmma": "gmma = waiting for wgmma results (wgmma.wait_group)",
    "sleeping": "sleeping = nanosleep or a suspended mbarrier wait",
    "no_instruction": "no instruction = instruction-cache misses or branch targets",
    "branch_resolving": "branch resolving = waiting for a branch target",
}


@dataclass
class Profile:
    """What :func:`profile` found: ``kernels`` (each a :class:`KernelProfile`), or ``unavailable``
    (one line: why nothing was measured). ``source``: "ncu" (this run) or where a recording came from."""
    kernels: list = field(default_factory=list)
    unavailable: str | None = None
    source: str = "ncu"
    device: str = ""
    command: list = field(default_factory=list)
    log: str = ""

    @property
    def ok(self) -> bool:
        return self.unavailable is None and bool(self.kernels)

    def __str__(self):
        if self.unavailable:
            return f"not profiled: {self.unavailable}"
        head = f"Nsight Compute, {self.source}" + (f", {self.device}" if self.device else "")
        return "\n".join([head] + [ln for k in self.kernels for ln in k.lines()])

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))

    def to_json(self) -> dict:
        return {"source": self.source, "device": self.device, "command": self.command,
                "kernels": [{"name": k.name, "metrics": {m: list(v) for m, v in k.metrics.items()}} for k in self.kernels]}

    @classmethod
    def from_json(cls, d: dict, source: str | None = None) -> "Profile":
        return cls(kernels=[KernelProfile(k["name"], {m: tuple(v) for m, v in k["metrics"].items()}) for k in d["kernels"]],
                   source=source or d.get("source", "recorded"), device=d.get("device", ""), command=d.get("command", []))

    def save(self, path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1))
        return path

    def plot(self, ax=None, title: str | None = None):
        """Where the warps wait (cycles per issued instruction, by reason) and the speed-of-light
        bars (DRAM, tensor pipe, SM), kernel by kernel. None when nothing was measured."""
        if not self.ok:
            return None
        from .plot import subplots

        n = len(self.kernels)
        fig, axes = subplots(n, 2, figsize=(10, 2.2 + 1.2 * n), squeeze=False, gridspec_kw={"width_ratios": [1.6, 1]})
        for k, (a1, a2) in zip(self.kernels, axes):
            stalls = k.stalls[:6][::-1]
            a1.barh([s.replace("_", " ") for s, _ in stalls], [v for _, v in stalls], color="#4c72b0")
            a1.set_xlabel("cycles waited per issued instruction")
            a1.set_title(f"{_short(k.name)}: why warps wait", fontsize=9)
            sol = [("DRAM", k.get("dram__throughput.avg.pct_of_peak_sustained_elapsed")),
                   ("tensor pipe", k.get("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active")),
                   ("SM", k.get("sm__throughput.avg.pct_of_peak_sustained_elapsed")),
                   ("occupancy", k.get("sm__warps_active.avg.pct_of_peak_sustained_active"))]
            sol = [(a, v) for a, v in sol if v is not None][::-1]
            a2.barh([a for a, _ in sol], [v for _, v in sol], color="#dd8452")
            a2.set_xlim(0, 100)
            a2.set_xlabel("% of peak")
            a2.set_title("speed of light", fontsize=9)
        fig.suptitle(title or f"Nsight Compute ({self.source})", fontsize=10)
        fig.tight_layout()
        return fig


def _short(name: str) -> str:
    name = name.replace("void ", "")
    return name[: name.index("(")] if "(" in name else name


# ---------------------------------------------------------------- reading ncu's CSV
def parse_raw_csv(text: str) -> list[KernelProfile]:
    """Kernels from ``ncu --import R --page raw --csv --print-units base``: a header row of metric
    names, a row of units, then one row per profiled kernel ("Kernel Name" column). Values with
    thousands separators are read; "n/a" and empty cells are left out."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(lines[start:]))
    if len(rows) < 2:
        return []
    head, units = rows[0], rows[1]
    body = rows[2:] if not any(_number(u) is not None for u in units if u) else rows[1:]
    if body is rows[1:]:
        units = [""] * len(head)
    out = []
    for r in body:
        if len(r) < len(head):
            continue
        rec = dict(zip(head, r))
        name = rec.get("Kernel Name", "?")
        metrics = {}
        for h, u, v in zip(head, units, r):
            x = _number(v)
            if x is not None and ("__" in h):
                metrics[h] = (x, u)
        out.append(KernelProfile(name, metrics))
    return out


def parse_details_csv(text: str) -> list[KernelProfile]:
    """Kernels from ``ncu --csv`` (the details page, one row per metric: "ID", …, "Kernel Name", …,
    "Metric Name", "Metric Unit", "Metric Value"), keyed by metric name as ncu prints it (section
    figures under their display names: "Duration", "DRAM Throughput", …)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(lines[start:]))
    head = rows[0]
    byid: dict = {}
    for r in rows[1:]:
        rec = dict(zip(head, r))
        if not rec.get("Metric Name"):
            continue
        x = _number(rec.get("Metric Value", ""))
        if x is None:
            continue
        k = byid.setdefault(rec["ID"], KernelProfile(rec.get("Kernel Name", "?")))
        k.metrics[rec["Metric Name"]] = (x, rec.get("Metric Unit", ""))
    return [byid[i] for i in sorted(byid, key=int)]


def _number(s: str):
    try:
        return float(str(s).replace(",", ""))
    except ValueError:
        return None


def diagnose(log: str) -> str | None:
    """The one line to show for an ncu run that measured nothing (None: no known cause)."""
    if "ERR_NVGPUCTRPERM" in log:
        return PERMISSION_HELP
    if "No kernels were profiled" in log:
        return ("ncu profiled no kernel: the launch ran none inside the profiled range, or the kernel filter "
                "(kernel=...) matched none of the kernels it ran")
    if "Failed to find metric" in log or "Failed to find metrics" in log:
        return "this ncu does not know some of the metrics asked for (an older Nsight Compute): " + \
            next((ln.strip() for ln in log.splitlines() if "Failed to find metric" in ln), "")
    for ln in log.splitlines():
        if "==ERROR==" in ln:
            return "ncu failed: " + ln.split("==ERROR==", 1)[1].strip()
    return None


def _unknown_metrics(log: str) -> set:
    bad = set()
    for ln in log.splitlines():
        if "Failed to find metric" in ln:
            bad |= {m for m in METRICS if m in ln or m.split(".")[0] in ln}
    return bad


# ---------------------------------------------------------------- pickling a launch by value
def _reducer(obj):
    from .cuda.module import CudaKernel, CudaModule

    if isinstance(obj, CudaModule):
        from .cuda.compiler import module_meta

        meta = module_meta(obj.name, obj.source, obj.arch, obj.log, obj.compiler, obj.options, obj.symbol_mapping,
                           obj.compile_seconds)
        return (_rebuild_module, (bytes(obj.cubin), meta))
    if isinstance(obj, CudaKernel):
        return (_rebuild_kernel, (obj.module, obj.name))
    from .cuda.tma import TensorMap

    if isinstance(obj, TensorMap):       # a launch function's cache of maps: stale in another process
        return (_rebuild_tensormap, (bytes(obj), obj.shape, obj.box, obj.dtype.str, obj.swizzle))
    return NotImplemented


def _rebuild_tensormap(raw, shape, box, dtype, swizzle):
    from .cuda.tma import TensorMap

    return TensorMap(raw, shape=shape, box=box, dtype=dtype, swizzle=swizzle)


def _rebuild_module(cubin, meta):
    from .cuda.compiler import load_module

    return load_module(cubin, meta)


def _rebuild_kernel(module, name):
    return module[name]


def dumps(obj) -> bytes:
    """``obj`` pickled by value (functions, closures, compiled cells), for the runner process."""
    try:
        import cloudpickle
    except ImportError:                                    # numba vendors a copy
        from numba import cloudpickle

    buf = io.BytesIO()
    p = cloudpickle.CloudPickler(buf, protocol=4)
    base = p.reducer_override

    def override(o):
        r = _reducer(o)
        return base(o) if r is NotImplemented else r
    p.reducer_override = override
    p.dump(obj)
    return buf.getvalue()


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


def _run(launch, problem, size, *, kernel, launch_count, ncu, timeout, simulator) -> Profile:
    if simulator:
        return Profile(unavailable=NO_GPU)
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
                                   env={**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")})
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
