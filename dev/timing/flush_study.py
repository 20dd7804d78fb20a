"""Does the grader's L2 flush charge a timed kernel for write-back that is not its own?

grader.timing.flush_l2 *writes* a 512 MiB buffer before every repetition (then the judge re-poisons
the outputs): the timed kernel starts with the L2 full of dirty lines, and each line it brings in
first evicts one of them, which must go to DRAM while it streams. This script times every
memory-bound reference of the course beside its graded peer, in one process, under three flushes:

  write       the grader today: the 512 MiB write, then ``before_each`` (the outputs re-poisoned)
  clean       ``before_each`` first, then a read of a 512 MiB buffer (as grader.timing's proposed
              read flush does): the previous run's and the re-poison's dirty lines are written back
              during the flush, and the L2 holds only clean lines of an unrelated buffer
  read_first  the read in the write's place, before ``before_each`` (isolates the order: the
              re-poison's writes stay dirty in L2)

then ``write`` and ``clean`` again (the run-to-run noise). Where grader.timing has the read flush
(``timing.FLUSH``), ``write`` and ``clean`` are its own code (FLUSH "write" / "read"). The kernels are exactly the graded ones:
each solution notebook's cells up to its speed cell, run as the judge's runner runs them (``%%cuda``
cells compiled, the other cells for their definitions only), the problem, its bench size, inputs,
re-poisoning and peer from grader.problems; timing is grader.speed.timed (grader.timing's repeat,
EventTimer and median; only the flush differs, by replacing ``timing.time_call`` for the mode).
The last timed run's outputs are judged by grader.check.verdict. Each item is in try/except.

``--reads`` adds read ceilings at the decode lesson's byte count (``read_ceiling.cu``: 16-byte loads,
1-D bulk copies into an mbarrier ring), each run in a subprocess with a timeout, under both flushes.

    python dev/timing/flush_study.py --out DIR [--only decode,paged] [--reads]    (GPU)
"""
from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import grader  # noqa: E402,F401  (before numba: it picks the GPU or the simulator)
import importlib  # noqa: E402
from grader import peers, timing  # noqa: E402

speed = importlib.import_module("grader.speed")      # the module (``grader.speed`` is also the verb)

SOL = ROOT / "solutions"
#        key        notebook                                              speed cell        launch              problem
ITEMS = [("decode", "04_attention/04_decoding", "speed_decode", "launch_decode", "decode"),
         ("paged", "04_attention/04_decoding", "speed_paged", "launch_paged", "decode_paged"),
         ("mla", "04_attention/05_mla_decode", "speed_mla", "launch_mla", "mla"),
         ("tma_transpose", "05_hopper_blackwell/01_tma", "speed_tma", "launch_tma", "tma_transpose"),
         ("vector_add", "01_elementwise/01_threads_and_blocks", "speed_vector_add", "launch_vector_add", "vector_add"),
         ("saxpy", "01_elementwise/02_bandwidth_and_roofline", "speed_saxpy", "launch_saxpy", "saxpy"),
         ("transpose", "01_elementwise/03_coalescing_and_transpose", "speed_transpose", "launch_transpose", "transpose"),
         ("bias_gelu", "01_elementwise/04_vectors_half_precision_fusion", "speed_bias_gelu", "launch_bias_gelu",
          "bias_gelu"),
         ("sum", "02_reduce/02_warps", "speed_sum", "launch_sum", "total_sum"),
         ("softmax", "02_reduce/03_softmax", "speed_softmax", "launch_softmax", "softmax_bf16"),
         ("rmsnorm", "02_reduce/04_norms", "speed_rmsnorm", "launch_rmsnorm", "rmsnorm_bf16")]
READS_AFTER = "paged"                         # --reads runs after this item (the decode lesson's bytes)
VERDICT_BYTES = 700 * 2**20                   # the last timed run is judged for items up to this size
                                              # (the float64 references of the 1-1.6 GB ones take long)
ALSO_COPY = {"sum", "softmax", "rmsnorm"}       # their goals also name copy bandwidth: time the copy peer too
MODES = ("write", "clean", "read_first", "write", "clean")
BUDGET_S = 1.5
# assignments that would time or draw something (the judge's runner runs them; here they only cost time)
SKIP_ASSIGN = ("grader.measure", "grader.bench", "ladder", "grader.speed", "grader.check", "plt.", "subplots", "timed(")


# ---------------------------------------------------------------- the flushes
_read_buf = _sink = None


def _make_touch():
    from numba import cuda

    @cuda.jit
    def touch(buf, sink):          # one 4-byte load per thread; a store only for a value the buffer never holds
        i = cuda.grid(1)
        if i < buf.size and buf[i] == -1:
            sink[0] = 1
    return touch


_touch = timing._Lazy(_make_touch)


def read_flush() -> None:
    """Read a 512 MiB buffer (filled once with 0, 1, 2, ...: never -1): the L2 ends holding its clean lines."""
    global _read_buf, _sink
    from numba import cuda
    import numpy as np

    if _read_buf is None:
        _read_buf = cuda.device_array(timing.FLUSH_BYTES // 4, dtype=np.int32)
        _sink = cuda.device_array(1, dtype=np.int32)
        timing._fill[(_read_buf.size + 255) // 256, 256](_read_buf)
    _touch[(_read_buf.size + 255) // 256, 256](_read_buf, _sink)


ORIGINAL_TIME_CALL = timing.time_call


def time_call_mode(mode: str):
    """grader.timing.time_call with the flush of ``mode`` (the rest as grader.timing does it)."""
    if mode == "write":
        return ORIGINAL_TIME_CALL
    if hasattr(timing, "FLUSH"):
        timing.FLUSH = "write"             # read_first: only this module's read flush, in the write's place

    def time_call(fn, *, before_each=None, flush=True, budget_s=3.0, timer=None, warmup=3, min_reps=10):
        timer = timer or timing.EventTimer()

        def prepare():
            if mode == "clean":
                if before_each:
                    before_each()
                if flush:
                    read_flush()
            else:                          # read_first
                if flush:
                    read_flush()
                if before_each:
                    before_each()
        return timing.repeat(lambda: timer(fn), before_each=prepare, budget_s=budget_s, warmup=warmup,
                             min_reps=min_reps)
    return time_call


def set_mode(mode: str) -> None:
    if hasattr(timing, "FLUSH") and mode in ("write", "clean"):   # grader.timing with the read flush: its own
        timing.FLUSH = "write" if mode == "write" else "read"      # code for both ("write" keeps its old order)
        timing.time_call = ORIGINAL_TIME_CALL
    else:
        timing.time_call = time_call_mode(mode)
    peers._measured.clear()                     # peers are measured once per process: again per mode


# ---------------------------------------------------------------- the graded kernels
def load_notebook(nb: str, upto: str) -> dict:
    """The notebook's code cells before ``upto``, as the judge's runner runs a solution: ``%%cuda``
    cells compiled, the others for their top-level definitions (an assignment that times or draws is
    left out; one that fails is skipped, as the runner skips it)."""
    from grader.judge.runner import _definitions
    from grader.notebooks import code_cells, run_source

    ns: dict = {"__name__": "__lesson__"}
    path = SOL / f"{nb}.ipynb"
    for cell in code_cells(path):
        if cell.get("id") == upto:
            break
        if cell.source.startswith("%%"):
            run_source(cell.source, f"{path.name}:{cell.get('id')}", ns)
            continue
        for stmt in _definitions(cell.source):
            node = stmt.body[0]
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and any(s in ast.unparse(node) for s in SKIP_ASSIGN):
                continue
            try:
                exec(compile(stmt, f"<{cell.get('id')}>", "exec"), ns)
            except Exception:
                continue
    return ns


def figure(m) -> dict:
    return {"us": m.median_s * 1e6, "value": m.value, "unit": m.unit, "peer": m.peer_name, "peer_value": m.peer_value,
            "ratio": m.fraction, "runs": len(m.times_s), "spread": m.spread}


def study_item(key: str, nb: str, cell: str, launch_name: str, prob: str, loaded: dict) -> dict:
    from grader import arrays
    from grader.check import Observation, verdict

    t0 = time.time()
    if nb not in loaded:
        loaded.clear()                                           # one notebook's kernels at a time
        loaded[nb] = load_notebook(nb, cell)
    ns = loaded[nb]
    launch = ns[launch_name]
    problem = getattr(ns["P"], prob)                               # the notebook's own problems module
    size = problem.bench_size
    work = problem.work(size)
    case = speed.TimedCase(problem, size, 0, repoisoned=True)
    row = {"item": key, "problem": problem.name, "bytes": work.get("bytes"), "target": problem.target,
           "floor": problem.floor, "modes": []}
    for mode in MODES:
        set_mode(mode)
        m = speed.timed(lambda: launch(*case.args), label=problem.name, work=work, peer=problem.peer,
                        peer_inputs=case.dev_in, size=size, before_each=case.repoison, budget_s=BUDGET_S)
        f = {"mode": mode, **figure(m)}
        if key in ALSO_COPY:
            _, f["copy"] = peers.measure(peers.copy(), peers.inputs_for(case.dev_in, size, work), BUDGET_S)
        row["modes"].append(f)
        print(f"{key:14s} {mode:10s} {f['us']:9.1f} us {f['value']:8.1f} {f['unit']}  {100 * f['ratio']:6.1f}% of "
              f"{f['peer']} ({f['peer_value']:.1f})" + (f"  {100 * f['value'] / f['copy']:.1f}% of copy {f['copy']:.0f}"
                                                         if 'copy' in f else ""), flush=True)
    if (work.get("bytes") or 0) <= VERDICT_BYTES:
        spec = problem.outputs(size, case.inputs)
        obs = Observation(outputs={k: arrays.to_host(case.outs[k][0], dt) for k, (_, dt) in spec.items()},
                          launched=True)
        failures = verdict(problem, size, case.inputs, obs)
        row["verdict"] = "ok" if not failures else "WRONG: " + failures[0][:200]
    else:
        row["verdict"] = "not judged (size)"
    row["seconds"] = time.time() - t0
    print(f"{key:14s} last timed run: {row['verdict']} ({row['seconds']:.0f} s)", flush=True)
    return row


# ---------------------------------------------------------------- read ceilings (subprocess)
READS = [("read stream (peer, __ldcs x4)", None),
         ("ld.nc 256B x4", ("ld_stream4", 0, 0, 8)),
         ("ld.nc 256B x8", ("ld_stream8", 0, 0, 8)),
         ("bulk 16 KiB x 4 slots, 2 blocks/SM", ("bulk_stream", 16384, 4, 2)),
         ("bulk 32 KiB x 6 slots, 1 block/SM", ("bulk_stream", 32768, 6, 1)),
         ("bulk 8 KiB x 8 slots, 3 blocks/SM", ("bulk_stream", 8192, 8, 3))]


def reads_part(nbytes: int) -> list:
    import torch

    from grader.cuda.compiler import compile_cuda

    mod = compile_cuda((Path(__file__).with_name("read_ceiling.cu")).read_text(), name="read_ceiling")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    buf = torch.randint(0, 2**31 - 1, (nbytes // 4,), dtype=torch.int32, device="cuda")
    sink = torch.zeros(1, dtype=torch.int32, device="cuda")
    rows = []
    for mode in ("write", "clean", "write", "clean"):
        set_mode(mode)
        _, copy = peers.measure(peers.copy(), peers.PeerInputs(bytes=nbytes))
        for label, spec in READS:
            try:
                if spec is None:
                    _, gbs = peers.measure(peers.read_stream(), peers.PeerInputs(bytes=nbytes))
                else:
                    kname, chunk, stages, per_sm = spec
                    k = mod[kname]
                    if kname == "bulk_stream":
                        call = (lambda k=k, chunk=chunk, stages=stages, per_sm=per_sm:
                                k[sms * per_sm, 32, chunk * stages](buf, nbytes // chunk, chunk, stages, sink))
                        moved = (nbytes // chunk) * chunk
                    else:
                        call = lambda k=k, per_sm=per_sm: k[sms * per_sm, 256](buf, nbytes // 16, sink)
                        moved = nbytes // 16 * 16
                    times = timing.time_call(call, budget_s=BUDGET_S)
                    gbs = moved / sorted(times)[len(times) // 2] / 1e9
                rows.append({"mode": mode, "read": label, "GBps": gbs, "copy": copy, "pct": 100 * gbs / copy})
                print(f"{mode:6s} {label:38s} {gbs:7.0f} GB/s = {100 * gbs / copy:5.1f}% of copy ({copy:.0f})"
                      f" = {nbytes / gbs / 1e3:6.1f} us", flush=True)
            except Exception as exc:
                print(mode, label, "FAILED", str(exc)[:300], flush=True)
    return rows


def run_reads(out: Path) -> None:
    from grader.problems import attention

    nbytes = attention.decode.work(attention.decode.bench_size)["bytes"]
    try:
        subprocess.run([sys.executable, __file__, "--out", str(out), "--reads-only", str(nbytes)], timeout=90)
    except subprocess.TimeoutExpired:
        print("reads: timed out", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--only", default="")
    ap.add_argument("--reads", action="store_true")
    ap.add_argument("--reads-only", type=int, default=0, help=argparse.SUPPRESS)   # the subprocess
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.reads_only:
        rows = reads_part(args.reads_only)
        (args.out / "reads.json").write_text(json.dumps(rows, indent=1))
        return 0
    from grader import device

    info = {"device": device.info().name, "date": time.strftime("%Y-%m-%d %H:%M"), "modes": MODES}
    print(info, flush=True)
    rows = []
    only = set(filter(None, args.only.split(",")))
    loaded: dict = {}
    for item in ITEMS:
        if only and item[0] not in only:
            continue
        try:
            rows.append(study_item(*item, loaded))
        except Exception as exc:
            print(item[0], "FAILED:", "".join(traceback.format_exception_only(type(exc), exc))[:800], flush=True)
            rows.append({"item": item[0], "error": str(exc)[:800]})
        (args.out / "flush_study.json").write_text(json.dumps({**info, "rows": rows}, indent=1, default=float))
        if args.reads and item[0] == READS_AFTER:
            run_reads(args.out)
    print_table(rows)
    return 0


def print_table(rows: list) -> None:
    print("\n==== SUMMARY: ratio to the graded peer (mean of the two runs where there are two)")
    print(f"{'reference':<26} {'peer':<32} {'write':>7} {'clean':>7} {'clean-write':>11} {'read_first':>10} "
          f"{'target':>6} {'floor':>5}  µs write→clean")
    for r in rows:
        if "modes" not in r:
            print(f"{r['item']:<26} FAILED {r.get('error', '')[:80]}")
            continue
        by = {}
        for f in r["modes"]:
            by.setdefault(f["mode"], []).append(f)
        avg = {k: sum(x["ratio"] for x in v) / len(v) for k, v in by.items()}
        us = {k: sum(x["us"] for x in v) / len(v) for k, v in by.items()}
        print(f"{r['problem']:<26} {str(r['modes'][0]['peer'])[:32]:<32} {100 * avg['write']:6.1f}% {100 * avg['clean']:6.1f}% "
              f"{100 * (avg['clean'] - avg['write']):+10.1f}  {100 * avg['read_first']:9.1f}% {r['target']:6.2f} "
              f"{r['floor']:5.2f}  {us['write']:.1f}→{us['clean']:.1f} {r['verdict']}")


if __name__ == "__main__":
    sys.exit(main())
