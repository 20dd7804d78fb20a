"""What grader.profile shows (:mod:`grader.profiling`): Nsight Compute's CSV read back (``--page raw`` and
the details page), one kernel's figures with a sentence each on how to read them, a profile's plot, its
JSON for recorded profiles. Standard library; matplotlib for the plot."""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

#: How to enable the counters where they are restricted (NVIDIA's page on ERR_NVGPUCTRPERM).
PERMISSION_HELP = ("GPU performance counters are restricted to administrators on this machine (ERR_NVGPUCTRPERM). "
                   "Run as root or with CAP_SYS_ADMIN (a container: docker run --cap-add=SYS_ADMIN; driver R565+: "
                   "CAP_PERFMON), or let every user read them: `options nvidia NVreg_RestrictProfilingToAdminUsers=0` "
                   "in /etc/modprobe.d/, then reload the driver (reboot). "
                   "https://developer.nvidia.com/ERR_NVGPUCTRPERM")
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
        named = self.device and self.device not in self.source           # a recording's note names it already
        head = f"Nsight Compute, {self.source}" + (f", {self.device}" if named else "")
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


__all__ = ["PERMISSION_HELP", "KernelProfile", "Profile", "parse_raw_csv", "parse_details_csv", "diagnose", "METRICS", "STALLS"]
