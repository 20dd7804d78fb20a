"""Where the decode lesson's last few % of copy bandwidth go, and the load paths that might win them.

Lesson 04.04's decode kernel (B=8, L=8192, 32/8 heads, d=128: 268.6 MB of K/V) runs ~103 µs on an
H100 through the judge, 86.8% of the copy peer (goal 90%); paged (pages of 16) 83.4% (goal 85%).
The variants (``decode_tma.cu``; the lesson's own cell as ``lesson``) change only how K and V reach
shared memory:

  part A (cp.async): the dev copy of the lesson's kernel; the same with each thread's write address
         carried by the loop (the control for the next ones); the L2::256B prefetch hint; an L2
         evict_first cache policy (with that address: ptxas 13.0 miscompiles the lesson's form, see
         decode_tma.cu); both; the lesson's own cell with evict_first, edited as a lesson would
         write it (``lesson_evict_first``). Then, for the fastest of part A:
         the lesson and it timed after a *clean* L2 flush (the same 512 MiB write, then a 512 MiB
         read: the L2 holds clean lines); a copy and a read stream of the kernel's own 268 MB; a
         %globaltimer timeline of one launch (block starts, main-loop ends, exits); 1, 3, 4 splits
         per SM and the combine kernel instead of the last-block merge; ``grader.measure`` itself.
  part B (--bulk; sm_90 bulk copies): one cp.async.bulk per 256-byte row into padded rows, an
         mbarrier per stage, with and without evict_first, 3 stages × 2 blocks and 6 stages × 1
         block per SM (measured 2026-11-24: 77-82% of copy, slower than the lesson).
  ncu:   Nsight Compute on single launches after the grader's own flush with --cache-control none
         (the L2 starts full of dirty lines, as when graded): DRAM bytes read and *written* (the
         flush's dirty lines written back while the kernel streams); then sections (SpeedOfLight,
         WarpStateStats, MemoryWorkloadAnalysis, Occupancy) of the lesson and the best, clean L2.

Every variant is checked (``grader.check``, visible and hidden sizes of both problems) before it is
timed; timing is the judge's: one ``TimedCase`` per problem (re-poisoned outputs), ``timing.time_call``
(L2 flushed by the 512 MiB write, the adaptive head start), the timed run's output judged by
``grader.check.verdict``; the copy peer (``problem.peer``) in the same process, before and after.
A variant that kills the CUDA context is recorded as failed and the part goes on in a new process.

    python dev/ch04_attention/decode_tma.py --out DIR [--budget 300] [--bulk]   # GPU: all of it
    python dev/ch04_attention/decode_tma.py --dry    # CPU: compile (NVRTC, and the local nvcc's ptxas,
                                                     # the device's version), SASS, the launch math
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

NB = ROOT / "solutions" / "04_attention" / "04_decoding.ipynb"
CU = Path(__file__).with_name("decode_tma.cu")
#            name        BN warps stages blocks/SM LOAD (EF 1, PF 2, BULK 4, TW 8)    what
PART_A = [("lesson", None, "the lesson's cell (reference)"),
          ("candidate", None, "--candidate: another cell of the lesson"),
          ("c0", "64, 4, 3, 2, 0", "cp.async, dev copy of the lesson"),
          ("c0t", "64, 4, 3, 2, 8", "cp.async, per-thread write address"),
          ("c_pf", "64, 4, 3, 2, 2", "cp.async + L2::256B prefetch"),
          ("c_ef", "64, 4, 3, 2, 9", "cp.async + L2 evict_first (per-thread address)"),
          ("c_efpf", "64, 4, 3, 2, 11", "cp.async + evict_first + 256B (per-thread address)"),
          ("lesson_ef", None, "the lesson's cell + evict_first, as a lesson would write it")]
# (evict_first with 2 stages is left out: ptxas 13.0 miscompiles it even with TW, as --dry shows)
PART_B = [("b0", "64, 4, 3, 2, 4", "bulk rows, 3 stages, 2 blocks/SM"),
          ("b_ef", "64, 4, 3, 2, 5", "bulk rows + evict_first"),
          ("b_ef_s6", "64, 4, 6, 1, 5", "bulk rows + evict_first, 6 stages, 1 block/SM")]
CONTROLS = ("lesson", "candidate", "c0", "c0t")       # not candidates for "the fastest"
VARIANTS = {n: (c, w) for n, c, w in PART_A + PART_B}
BUDGET_S = 1.5          # per timing (time_call stops earlier once the spread is under 2 %)


# ---------------------------------------------------------------- kernels
class Traced:
    """A ``decode_dev`` kernel as the grader's launch functions use it (name, launch_shape, launch),
    passing its extra last argument: ``trace`` (None, or a tensor of 3 int64 per block)."""

    def __init__(self, kernel):
        self.kernel, self.name, self.trace = kernel, kernel.name, None

    @property
    def launch_shape(self):
        return self.kernel.launch_shape

    def launch(self, grid, *args, stream=None):
        return self.kernel.launch(grid, *args, self.trace, stream=stream)


def kernel_names(cfg: str) -> list[str]:
    return [f"decode_dev<{a}<{d}, {cfg}>>" for a in ("DecX", "PagX") for d in (128, 64)]


# The lesson's cell with K/V read under an L2 evict_first policy, written as the lesson would write it:
# two helpers, the copies with the policy, and the loop carrying each thread's own write address
# (decode_tma.cu, TW: ptxas 13.0 miscompiles the policy with the lesson's stage-base form). Each edit
# must apply exactly once, so a change to the lesson's cell shows here.
_EF_HELPERS = r"""
// K and V are read once: their lines are the first L2 evicts (createpolicy, sm_80+), not the lines
// already in L2 (which, if dirty, would first be written back to DRAM).
__device__ __forceinline__ unsigned long long l2_evict_first() {
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ void cp_async_16z(unsigned saddr, const void* gmem, unsigned src_bytes,
                                             unsigned long long policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n"
               ::"r"(saddr), "l"(gmem), "r"(src_bytes), "l"(policy) : "memory");
}
"""
_EF_EDITS = [
    ("using namespace attn;", "using namespace attn;\n" + _EF_HELPERS),
    ("  auto load_kv = [&](unsigned stage, int j) {",
     "  const unsigned long long once = l2_evict_first();\n"
     "  auto load_kv = [&](unsigned so0, int j) {              // so0: this thread's chunk in the stage"),
    ("    for (int i = 0; i < BN / C::ROWS_PER_PASS; ++i) {\n      const int r = ld_r + i * C::ROWS_PER_PASS, tok = j * BN + r;\n"
     "      const unsigned so = stage + ld_soff + i * C::ROWS_PER_PASS * D * 2;",
     "    unsigned so = so0;\n"
     "    for (int i = 0; i < BN / C::ROWS_PER_PASS; ++i, so += C::ROWS_PER_PASS * D * 2) {\n"
     "      const int r = ld_r + i * C::ROWS_PER_PASS, tok = j * BN + r;"),
    ("        course::cp_async_16(so, kc + e);\n        course::cp_async_16(so + C::KV_BYTES, vc + e);",
     "        cp_async_16z(so, kc + e, 16u, once);\n        cp_async_16z(so + C::KV_BYTES, vc + e, 16u, once);"),
    ("        cp_async_16z(so, kc + e, ok ? 16u : 0u);\n        cp_async_16z(so + C::KV_BYTES, vc + e, ok ? 16u : 0u);",
     "        cp_async_16z(so, kc + e, ok ? 16u : 0u, once);\n        cp_async_16z(so + C::KV_BYTES, vc + e, ok ? 16u : 0u, once);"),
    ("load_kv(stage0 + s * C::STAGE_BYTES, s);", "load_kv(stage0 + s * C::STAGE_BYTES + ld_soff, s);"),
    ("  unsigned rd = stage0, wr = stage0 + (STAGES - 1) * C::STAGE_BYTES;",
     "  unsigned rd = stage0, wr = stage0 + (STAGES - 1) * C::STAGE_BYTES + ld_soff;   // this thread's chunk"),
    ("    wr = (wr + C::STAGE_BYTES == send) ? stage0 : wr + C::STAGE_BYTES;",
     "    wr = (wr + C::STAGE_BYTES == send + ld_soff) ? stage0 + ld_soff : wr + C::STAGE_BYTES;"),
]


def lesson_evict_first(src: str) -> str:
    for old, new in _EF_EDITS:
        if src.count(old) != 1:
            raise ValueError(f"the lesson's cell changed: {old[:60]!r} occurs {src.count(old)} times")
        src = src.replace(old, new)
    return src


CANDIDATE = os.environ.get("DECODE_CANDIDATE")    # set by --candidate


def build(names: list[str]) -> dict:
    """{variant: {"dec": [k128, k64], "paged": [k128, k64], "module": ..., "lesson": lesson module}}."""
    from grader.cuda import compile_cuda
    from grader.notebooks import cell_source, run_source

    ns: dict = {}
    run_source(cell_source(NB, "v_decode"), "v_decode", ns)
    lesson = ns["dec"]
    if "lesson_ef" in names:
        src = re.sub(r"^%%cuda \w+", "%%cuda lesson_ef", lesson_evict_first(cell_source(NB, "v_decode")))
        run_source(src, "lesson_ef", ns)
    if "candidate" in names:
        if CANDIDATE and Path(CANDIDATE).exists():
            src = re.sub(r"^%%cuda \w+", "%%cuda candidate", Path(CANDIDATE).read_text())
            run_source(src, "candidate", ns)
        else:
            names = [n for n in names if n != "candidate"]
    out = {}
    dev = [n for n in names if VARIANTS[n][0]]
    mod = None
    if dev:
        exprs = [k for n in dev for k in kernel_names(VARIANTS[n][0])]
        mod = compile_cuda(CU.read_text(), name="decode_tma", kernels=exprs)
    for n in names:
        cfg = VARIANTS[n][0]
        if cfg is None:
            m = ns[n] if n in ("candidate", "lesson_ef") else lesson
            out[n] = {"dec": [m["decode<Dec<128>>"], m["decode<Dec<64>>"]],
                      "paged": [m["decode<Paged<128>>"], m["decode<Paged<64>>"]], "module": m}
        else:
            ks = [Traced(mod[k]) for k in kernel_names(cfg)]
            out[n] = {"dec": ks[:2], "paged": ks[2:], "module": mod}
        out[n]["lesson"] = lesson
    return out


def launches(kern: dict, merge: str = "fused") -> dict:
    from grader.problems import attention as P

    comb = [kern["lesson"]["combine<Comb<128>>"], kern["lesson"]["combine<Comb<64>>"]] if merge == "kernel" else ()
    return {"decode": P.decode_launch(*kern["dec"], combine=comb, merge=merge),
            "paged": P.paged_decode_launch(*kern["paged"], combine=comb, merge=merge)}


def resources(kern: dict) -> dict:
    out = {}
    for which in ("dec", "paged"):
        k = kern[which][0]
        k = getattr(k, "kernel", k)
        r = k.resources
        out[which] = {"regs": r["registers"], "spills": r["spill_stores"] + r["spill_loads"],
                      "smem": k.launch_shape.smem_bytes}
    return out


# ---------------------------------------------------------------- GPU parts
class Bench:
    """One TimedCase per problem at its timed size, its reference, and the copy peer."""

    def __init__(self):
        from grader.problems import attention as P
        from grader.speed import TimedCase

        self.P = P
        self.problems = {"decode": P.decode, "paged": P.decode_paged}
        self.cases = {k: TimedCase(p, p.bench_size, 1, repoisoned=True) for k, p in self.problems.items()}
        self.want = {k: p.reference(**self.cases[k].inputs) for k, p in self.problems.items()}
        self.peer = {k: self.peer_now(k) for k in self.problems}

    def ctx(self, key: str):
        from grader import peers

        p = self.problems[key]
        return peers.inputs_for(self.cases[key].dev_in, p.bench_size, p.work(p.bench_size))

    def peer_now(self, key: str) -> float:
        from grader import peers

        # peers._figure, not peers.measure: measure keeps one figure per process, and the peer is
        # measured again at the end of the part to bracket the variants
        return peers._figure(self.problems[key].peer, self.ctx(key), 2.0)[1]

    def check(self, launch, key: str) -> None:
        import grader

        grader.check(launch, self.problems[key], quiet=True)
        grader.check(launch, self.problems[key], hidden=True, quiet=True)

    def time(self, launch, key: str, before_each=None) -> float:
        """Median seconds, as the judge times it; raises if the timed run's output is wrong."""
        import numpy as np

        from grader import arrays, timing
        from grader.check import Observation, verdict

        p, case = self.problems[key], self.cases[key]

        def prepare():
            if before_each:
                before_each()
            case.repoison()

        times = timing.time_call(lambda: launch(*case.args), before_each=prepare, budget_s=BUDGET_S)
        spec = p.outputs(p.bench_size, case.inputs)
        obs = Observation(outputs={k: arrays.to_host(case.outs[k][0], dt) for k, (_, dt) in spec.items()}, launched=True)
        failures = verdict(p, p.bench_size, case.inputs, obs, self.want[key])
        if failures:
            raise RuntimeError("the timed run's output is wrong: " + failures[0][:200])
        return float(np.median(times))

    def row(self, name: str, key: str, t: float, **extra) -> dict:
        p = self.problems[key]
        gbs = p.work(p.bench_size)["bytes"] / t / 1e9
        return {"variant": name, "problem": key, "us": t * 1e6, "GBps": gbs, "pct": 100 * gbs / self.peer[key], **extra}


class ContextLost(Exception):
    """The CUDA context is dead (an illegal instruction or address): nothing more runs in this process."""


def context_alive() -> bool:
    import torch

    try:
        torch.cuda.synchronize()
        return torch.ones(1, device="cuda").sum().item() == 1.0
    except Exception:
        return False


def run_variant(bench: Bench, name: str, kern: dict, rows: list, tag: str = "", merge: str = "fused") -> None:
    """Check (visible and hidden sizes) then time on both problems; ContextLost if the GPU died."""
    ls = launches(kern, merge)
    for key in ("decode", "paged"):
        label = name + tag
        try:
            bench.check(ls[key], key)
            t = bench.time(ls[key], key)
            r = bench.row(label, key, t)
            rows.append(r)
            print(f"{label:22s} {key:6s} {r['us']:7.1f} us {r['GBps']:6.0f} GB/s {r['pct']:5.1f}% of copy", flush=True)
        except Exception as exc:
            first = str(exc).strip().splitlines()
            rows.append({"variant": label, "problem": key, "error": " ".join(first[:2])[:300]})
            print(f"{label:22s} {key:6s} FAILED: {str(exc)[:700]}", flush=True)
            if not context_alive():
                raise ContextLost(label) from None


def trace_once(bench: Bench, kern: dict, key: str) -> dict:
    """One launch after the grader's flush with %globaltimer stamps: the launch's timeline."""
    import torch

    from grader import timing

    ls = launches(kern)
    case = bench.cases[key]
    buf = torch.zeros(3 * 4096, dtype=torch.int64, device="cuda")
    which = "paged" if key == "paged" else "dec"
    for k in kern[which]:
        k.trace = buf
    try:
        timing.flush_l2()
        torch.cuda.synchronize()
        ls[key](*case.args)
        torch.cuda.synchronize()
    finally:
        for k in kern[which]:
            k.trace = None
    t = buf.view(-1, 3).cpu().numpy()
    t = t[t[:, 0] > 0].astype("float64")
    t0 = t[:, 0].min()
    t = (t - t0) / 1e3                     # µs from the first block's start
    loop = t[:, 1] - t[:, 0]
    return {"blocks": int(len(t)), "last_start": t[:, 0].max(), "first_end": t[:, 2].min(),
            "last_loop_end": t[:, 1].max(), "last_end": t[:, 2].max(), "loop_median": float(sorted(loop)[len(loop) // 2]),
            "loop_min": loop.min(), "loop_max": loop.max(),
            "inkernel_GBps": bench.problems[key].work(bench.problems[key].bench_size)["bytes"] / (t[:, 1].max() * 1e3)}


def part(names: list[str], extras: bool, out_json: Path | None, prior: list[Path]) -> None:
    """Check and time ``names`` (then, with ``extras``, the studies of the fastest, which may come
    from ``prior``: the JSON of earlier processes of this part). Exit code 3 if a variant killed
    the CUDA context: the JSON then names it ("crashed") and the driver goes on without it."""
    import torch

    result = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "rows": [], "info": {}}

    def save():                                # after every step: a part cut off by its timeout keeps its rows
        if out_json:
            out_json.write_text(json.dumps(result, indent=1, default=float))

    from grader.cuda import toolchain

    result["nvrtc"] = toolchain.nvrtc_version()
    print(result["device"], time.strftime("%Y-%m-%d %H:%M"), "compiler:", result["nvrtc"], flush=True)
    kerns = build(names)
    result["resources"] = res = {n: resources(k) for n, k in kerns.items()}
    for n, r in res.items():
        print(f"{n:10s} regs dec/paged {r['dec']['regs']}/{r['paged']['regs']}, spills {r['dec']['spills']}/"
              f"{r['paged']['spills']}, smem {r['dec']['smem']} B: {VARIANTS[n][1]}", flush=True)
    bench = Bench()
    result["peer"] = bench.peer
    print("copy peer: decode %.0f GB/s, paged %.0f GB/s" % (bench.peer["decode"], bench.peer["paged"]), flush=True)
    save()
    try:
        for n in names:
            if n in kerns:
                run_variant(bench, n, kerns[n], result["rows"])
                save()
        if extras:
            earlier = [r for f in prior if f.exists() for r in json.loads(f.read_text())["rows"]]
            extra_rows(bench, kerns, earlier + result["rows"], result, save)
    except ContextLost as lost:
        result["crashed"] = str(lost).split(" ")[0]
        save()
        print(f"the CUDA context is lost ({lost}): this process stops here", flush=True)
        os._exit(3)
    result["peer_after"] = {k: bench.peer_now(k) for k in bench.problems}
    print("copy peer after: decode %.0f GB/s, paged %.0f GB/s" % (result["peer_after"]["decode"],
                                                                   result["peer_after"]["paged"]), flush=True)
    save()


def fastest(rows: list, key: str, among) -> str | None:
    ok = [r for r in rows if r["problem"] == key and "us" in r and r["variant"] in among]
    return min(ok, key=lambda r: r["us"])["variant"] if ok else None


def extra_rows(bench: Bench, kerns: dict, all_rows: list, result: dict, save) -> None:
    """The studies of the fastest variant so far (``all_rows``: this process's and earlier ones')."""
    import torch

    import grader
    from grader import peers
    from grader.problems import attention_launch as AL

    rows, info = result["rows"], result["info"]
    cands = [n for n in VARIANTS if n not in CONTROLS]
    best = {k: fastest(all_rows, k, cands) for k in ("decode", "paged")}
    info["best_A"] = best
    top = best["decode"] or best["paged"]
    if top is None:
        return
    kerns.update(build([n for n in ("lesson", "c0", top) if n not in kerns]))
    print(f"--- extras: the lesson and {top} (fastest of part A on decode; on paged: {best['paged']})", flush=True)
    clean = torch.empty(2**27, dtype=torch.int32, device="cuda")          # 512 MiB to read after the flush
    clean.fill_(1)
    for n in [m for m in ("candidate", "lesson", top) if m in kerns]:
        ls = launches(kerns[n])
        for key in ("decode", "paged"):
            try:
                t = bench.time(ls[key], key, before_each=lambda: clean.sum())
                r = bench.row(n + " clean-L2", key, t)
                rows.append(r)
                print(f"{r['variant']:22s} {key:6s} {r['us']:7.1f} us {r['pct']:5.1f}% of copy (clean L2 flush)", flush=True)
            except Exception as exc:
                print(n, key, "clean timing failed:", exc, flush=True)
    save()
    # what a copy and a read stream of the kernel's own bytes reach, after the same flush
    for key in ("decode", "paged"):
        ctx = bench.ctx(key)
        for label, peer in (("copy of the same bytes", peers.Peer("torch copy_", _same_copy)),
                            ("read stream of the same bytes", peers.read_stream())):
            try:
                name, gbs = peers._figure(peer, ctx, 1.5)
                info[f"{key}: {label}"] = gbs
                print(f"{key:6s} {label}: {gbs:.0f} GB/s = {100 * gbs / bench.peer[key]:.1f}% of the copy peer", flush=True)
            except Exception as exc:
                print(key, label, "failed:", exc, flush=True)
    for n in ("c0", top):
        if n not in kerns or VARIANTS[n][0] is None:
            continue
        for key in ("decode", "paged"):
            try:
                tr = trace_once(bench, kerns[n], key)
                info[f"trace {n} {key}"] = tr
                print(f"trace {n:8s} {key:6s} " + ", ".join(f"{k} {v:.1f}" for k, v in tr.items()), flush=True)
            except Exception as exc:
                print("trace", n, key, "failed:", exc, flush=True)
    save()
    real = AL.split_chunk
    for per_sm in (1, 3, 4):
        AL.split_chunk = lambda u, c, t, per_sm=per_sm: real(u, c, t, per_sm=per_sm)
        try:
            run_variant(bench, top, kerns[top], rows, tag=f" {per_sm}/SM")
        finally:
            AL.split_chunk = real
        save()
    run_variant(bench, top, kerns[top], rows, tag=" combine", merge="kernel")
    save()

    for n in [m for m in ("candidate", "lesson", top) if m in kerns]:
        for key in ("decode", "paged"):
            m = grader.measure(launches(kerns[n])[key], bench.problems[key], f"{n} (grader.measure)")
            info[f"measure {n} {key}"] = {"us": m.median_s * 1e6, "pct": 100 * m.fraction, "peer": m.peer_value}
            print(m, flush=True)
            save()


def _same_copy(ctx):
    """A device-to-device copy of the candidate's own byte count (half read, half written)."""
    import torch

    n = max(1, (ctx.bytes or 2) // 8)
    src = torch.ones(n, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def ncu_launch(names: list[str]) -> None:
    """One launch per (variant, problem), each after the grader's flush: what ncu profiles."""
    import torch

    from grader import timing
    from grader.problems import attention as P
    from grader.speed import TimedCase

    kerns = build(names)
    cases = {"decode": TimedCase(P.decode, P.decode.bench_size, 2),
             "paged": TimedCase(P.decode_paged, P.decode_paged.bench_size, 2)}
    order = []
    for n in kerns:
        ls = launches(kerns[n])
        for key in ("decode", "paged"):
            timing.flush_l2()
            torch.cuda.synchronize()
            ls[key](*cases[key].args)
            torch.cuda.synchronize()
            order.append(f"{n}/{key}")
    print("NCU ORDER " + " ".join(order), flush=True)


# ---------------------------------------------------------------- driver
def pack(work: Path, out: Path) -> None:
    """Everything so far into OUT/decode_tma.tgz (the device tool returns at most 8 files)."""
    subprocess.run(["tar", "czf", str(out / "decode_tma.tgz"), "-C", str(work), "."])


def sh(cmd: list[str], log: Path, timeout: float) -> int:
    print(f"$ {' '.join(cmd)}   (timeout {timeout:.0f} s)", flush=True)
    if timeout < 10:
        print("skipped: no time left", flush=True)
        return -1
    with open(log, "w") as f:
        try:
            return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, cwd=ROOT).returncode
        except subprocess.TimeoutExpired:
            f.write(f"\nTIMEOUT after {timeout:.0f} s\n")
            return 124


def _csv_rows(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    lines = path.read_text(errors="replace").splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    return list(csv.reader(lines[start:])) if start is not None else []


def parse_ncu_long(path: Path) -> list[tuple[str, dict]]:
    """[(kernel, {metric: value})] in profiling order, from ncu --csv --print-units base (one row per metric)."""
    rows = _csv_rows(path)
    if not rows:
        return []
    head, out = rows[0], {}
    for r in rows[1:]:
        rec = dict(zip(head, r))
        try:
            out.setdefault(int(rec["ID"]), (rec["Kernel Name"], {}))[1][rec["Metric Name"]] = \
                float(rec["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            pass
    return [out[i] for i in sorted(out)]


def parse_ncu_raw(path: Path) -> list[dict]:
    """[{metric: value}] in profiling order, from ncu --import --page raw --csv (one row per kernel)."""
    rows = _csv_rows(path)
    if len(rows) < 3:
        return []
    head = rows[0]
    return [dict(zip(head, r)) for r in rows[2:]]          # rows[1]: the units


NCU_RAW = re.compile(r"gpu__time_duration.sum|dram__bytes_(read|write).sum$|dram__throughput.avg.pct_of_peak_sustained_elapsed|"
                     r"smsp__average_warps_issue_stalled_(long_scoreboard|barrier|short_scoreboard|wait|membar|"
                     r"lg_throttle|mio_throttle|no_instruction|math_pipe_throttle|selected|not_selected|dispatch_stall|"
                     r"sleeping|drain)_per_issue_active.ratio|smsp__issue_active.avg.pct_of_peak_sustained_active|"
                     r"sm__warps_active.avg.pct_of_peak_sustained_active|lts__t_sector_hit_rate.pct$")


def run_part(me: list, names: list[str], tag: str, work: Path, limit: float, left, extras: bool = False) -> list:
    """The part's processes: a variant that kills the CUDA context ends its process; the next one goes
    on with the variants not yet done. Returns the JSON results of each process."""
    results, files, remaining, k, t_end = [], [], list(names), 0, time.time() + limit
    while remaining:
        jf, log = work / f"part{tag}{k}.json", work / f"part{tag}{k}.log"
        cmd = me + ["--part", ",".join(remaining), "--json", str(jf)]
        if extras:
            cmd += ["--extras"] + (["--prior", ",".join(map(str, files))] if files else [])
        rc = sh(cmd, log, min(t_end - time.time(), left()))
        print(log.read_text()[-5000:] if log.exists() else f"{log.name}: none", flush=True)
        if not jf.exists():
            break
        res = json.loads(jf.read_text())
        results.append(res)
        files.append(jf)
        done = {r["variant"].split(" ")[0] for r in res["rows"]} | {res.get("crashed")}
        remaining = [n for n in remaining if n not in done]
        if rc != 3:
            break
        k += 1
    return results


def driver(out: Path, budget: float, bulk: bool) -> None:
    start = time.time()
    left = lambda reserve=5: budget - (time.time() - start) - reserve  # noqa: E731
    me = [sys.executable, str(Path(__file__).relative_to(ROOT))]
    work = Path("/tmp/decode_tma")
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    names = [n for n, _, _ in PART_A if n != "candidate" or CANDIDATE]
    results = run_part(me, names, "A", work, min(170, left(90)), lambda: left(90), extras=True)
    pack(work, out)
    if bulk:
        results += run_part(me, [n for n, _, _ in PART_B], "B", work, min(50, left(70)), lambda: left(70))
        pack(work, out)
    rows = [r for res in results for r in res["rows"]]
    best = {k: fastest(rows, k, [n for n in VARIANTS if n not in CONTROLS]) for k in ("decode", "paged")}
    have = {r["variant"] for r in rows if "us" in r}        # checked and timed
    # the controls first: a variant that kills the context ends the ncu run
    prof = list(dict.fromkeys([n for n in ("lesson", "candidate", "c0", "c0t") if n in have or n == "lesson"]
                              + [b for b in best.values() if b] + [n for n in ("c_ef", "lesson_ef", "b0", "b_ef") if n in have]))
    metrics = "gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"
    sh(["ncu", "--cache-control", "none", "--clock-control", "none", "-k", "regex:decode", "--metrics", metrics,
        "--csv", "--print-units", "base", "--log-file", str(work / "ncu_dirty.csv")] + me + ["--ncu-launch", ",".join(prof)],
       work / "ncu_dirty.log", min(45, left(25)))
    pack(work, out)
    two = list(dict.fromkeys(["lesson"] + [b for b in best.values() if b]))
    rep = work / "ncu_clean"
    sh(["ncu", "--clock-control", "none", "-k", "regex:decode", "--section", "SpeedOfLight", "--section", "WarpStateStats",
        "--section", "MemoryWorkloadAnalysis", "--section", "Occupancy", "--metrics", "dram__bytes_read.sum,dram__bytes_write.sum",
        "-f", "-o", str(rep)] + me + ["--ncu-launch", ",".join(two)], work / "ncu_clean.log", left(8))
    if Path(str(rep) + ".ncu-rep").exists():
        for page, name, extra in (("details", "ncu_clean.txt", []), ("raw", "ncu_clean_raw.csv", ["--csv", "--print-units", "base"])):
            with open(work / name, "w") as f:
                try:
                    subprocess.run(["ncu", "--import", str(rep) + ".ncu-rep", "--page", page] + extra, stdout=f,
                                   stderr=subprocess.STDOUT, timeout=max(5, left(1)))
                except subprocess.TimeoutExpired:
                    f.write("TIMEOUT\n")
    try:
        summary(results, work)
    finally:
        pack(work, out)


def _order(log: Path) -> list[str]:
    m = re.search(r"NCU ORDER (.*)", log.read_text()) if log.exists() else None
    return m.group(1).split() if m else []


def summary(results: list, work: Path) -> None:
    print("\n==== SUMMARY (the judge's timing: L2 flushed by a 512 MiB write; % of the copy peer of the same process)")
    for res in results:
        pa = res.get("peer_after", {})
        print(f"{res['device']} {res['date']}: copy peer decode {res.get('peer', {}).get('decode', 0):.0f} -> "
              f"{pa.get('decode', 0):.0f}, paged {res.get('peer', {}).get('paged', 0):.0f} -> {pa.get('paged', 0):.0f} GB/s")
    print(f"{'variant':22s} {'decode µs':>9s} {'%copy':>6s}   {'paged µs':>9s} {'%copy':>6s}   what")
    by: dict = {}
    for res in results:
        for r in res["rows"]:
            by.setdefault(r["variant"], {})[r["problem"]] = r
    for v, d in by.items():
        cells = []
        for key in ("decode", "paged"):
            r = d.get(key, {})
            cells.append(f"{r['us']:9.1f} {r['pct']:6.1f}" if "us" in r else f"{r.get('error', '-')[:16]:>16s}")
        print(f"{v:22s} {cells[0]}   {cells[1]}   {VARIANTS.get(v.split(' ')[0], ('', ''))[1]}")
    for res in results:
        for k, v in res.get("info", {}).items():
            print(f"{k}: " + (", ".join(f"{a} {b:.1f}" if isinstance(b, float) else f"{a} {b}" for a, b in v.items())
                              if isinstance(v, dict) else str(v)))
    dirty, order = parse_ncu_long(work / "ncu_dirty.csv"), _order(work / "ncu_dirty.log")
    if dirty:
        print("\nncu, one launch each after the grader's flush (--cache-control none: the L2 starts full of dirty lines)")
        print(f"{'launch':20s} {'µs':>7s} {'DRAM read MB':>12s} {'written MB':>10s} {'DRAM %peak':>10s}  kernel")
        for i, (kname, m) in enumerate(dirty):
            who = order[i] if i < len(order) else "?"
            print(f"{who:20s} {m.get('gpu__time_duration.sum', 0) / 1e3:7.1f} {m.get('dram__bytes_read.sum', 0) / 1e6:12.1f} "
                  f"{m.get('dram__bytes_write.sum', 0) / 1e6:10.1f} "
                  f"{m.get('dram__throughput.avg.pct_of_peak_sustained_elapsed', 0):10.1f}  {kname[:60]}")
    raw, order = parse_ncu_raw(work / "ncu_clean_raw.csv"), _order(work / "ncu_clean.log")
    if raw:
        print("\nncu sections, ncu's own cache flush (clean L2):")
        for i, m in enumerate(raw):
            print(f"  {order[i] if i < len(order) else i}: " + ", ".join(
                f"{k.replace('smsp__average_warps_issue_stalled_', 'stall ').replace('_per_issue_active.ratio', '')} {v}"
                for k, v in m.items() if NCU_RAW.search(k)))


# ---------------------------------------------------------------- CPU dry run
_SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*)\s+([^;]*);")


def unwritten_uniform_reads(sass: str) -> dict:
    """{function: sorted uniform registers that an LDGSTS or UBLKCP reads (its address or its cache-policy
    descriptor) and no instruction of the function writes}, from ``cuobjdump -sass`` text. The check that
    catches ptxas 13.0's dropped cache policy (decode_tma.cu, TW)."""
    out = {}
    for fn in re.split(r"\n\s*Function : ", sass)[1:]:
        written, bad = set(), set()
        for line in fn.splitlines():
            m = _SASS_LINE.match(line)
            if not m:
                continue
            op, args = m.groups()
            dst = re.match(r"(UR\d+)\b", args)
            if dst and op.startswith(("U", "S2UR", "R2UR")):
                written.add(dst.group(1))
                if ".64" in op or op.startswith("UIMAD.WIDE"):
                    written.add(f"UR{int(dst.group(1)[2:]) + 1}")
            if op.startswith(("LDGSTS", "UBLKCP")):
                bad |= {r for r in re.findall(r"desc\[(UR\d+)\]", args) + re.findall(r"\+(UR\d+)", args)
                        if r not in written}
        if bad:
            out[fn.split("\n")[0].strip()] = sorted(bad)
    return out


def ptxas_sass(source: str, exprs: list[str], name: str) -> tuple[str, str]:
    """(SASS, nvcc's version) of ``source`` assembled by the local nvcc for sm_90a, the kernels ``exprs``
    instantiated; ("", why) without nvcc or cuobjdump. NVRTC here may be newer than the device's."""
    import tempfile

    from grader.cuda import toolchain

    nvcc, dump = toolchain.tool_path("nvcc"), toolchain.tool_path("cuobjdump")
    if not nvcc or not dump:
        return "", "no nvcc or cuobjdump here"
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    with tempfile.TemporaryDirectory() as d:
        cu, cubin = Path(d) / f"{name}.cu", Path(d) / f"{name}.cubin"
        cu.write_text("#define GPU_COURSE_CELL 1\n" + source + "\n__attribute__((used)) static const void* const "
                      "course_instances_[] = {" + ", ".join(f"(const void*)&{e}" for e in exprs) + "};\n")
        inc = [f"-I{p}" for p in toolchain.include_dirs()]
        r = subprocess.run([nvcc, "-cubin", "-gencode=arch=compute_90a,code=sm_90a", "-std=c++17", *inc, "-o", str(cubin),
                            str(cu)], capture_output=True, text=True)
        if r.returncode:
            return "", f"nvcc failed: {r.stderr[-400:]}"
        sass = subprocess.run([dump, "-sass", str(cubin)], capture_output=True, text=True, env=toolchain.tool_env()).stdout
    return sass, version


def ptxas_check() -> bool:
    """The lesson's cell, the candidate and every dev variant through the local nvcc's ptxas: no
    LDGSTS / UBLKCP may read a uniform register that nothing writes."""
    from grader.cuda.magic import parse_magic_line
    from grader.notebooks import cell_source

    cells = [("lesson", cell_source(NB, "v_decode")), ("lesson_ef", lesson_evict_first(cell_source(NB, "v_decode")))]
    if CANDIDATE and Path(CANDIDATE).exists():
        cells.append(("candidate", Path(CANDIDATE).read_text()))
    jobs = []
    for n, src in cells:
        first, _, body = src.partition("\n")
        jobs.append((n, body, parse_magic_line(first[len("%%cuda"):])["kernels"]))
    jobs.append(("decode_tma.cu", CU.read_text(),
                 [k for n, c, _ in PART_A + PART_B if c for k in kernel_names(c)]))
    ok = True
    for n, body, exprs in jobs:
        sass, version = ptxas_sass(body, exprs, n.replace(".", "_"))
        if not sass:
            print(f"ptxas check of {n}: skipped ({version})")
            continue
        bad = unwritten_uniform_reads(sass)
        ok &= not bad
        print(f"ptxas check of {n} ({version}, {len(exprs)} kernels): "
              + ("every LDGSTS/UBLKCP reads written uniform registers" if not bad else f"UNWRITTEN {bad}"))
    return ok


class _Rec:
    """A kernel stand-in for the dry run: records each launch's grid and argument count."""

    def __init__(self, k):
        self.real = getattr(k, "kernel", k)
        self.extra = int(k is not self.real)          # Traced adds `trace`
        self.name, self.launch_shape, self.calls = self.real.name, self.real.launch_shape, []

    def launch(self, grid, *args, stream=None):
        """(grid, bytes the arguments take as the launch passes them, the kernel's parameter bytes)."""
        import struct

        n = 0
        for a in list(args) + [None] * self.extra:
            size = 4 if isinstance(a, (int, float)) else 8        # scalars 32-bit, the rest pointers
            n = -(-n // size) * size + size
        raw = self.real.module.elf.kernel_attributes(self.real.symbol).get(0x19)    # EIATTR_CBANK_PARAM_SIZE
        self.calls.append((grid, n, struct.unpack("<H", raw[:2])[0] if raw else None))


def dry() -> None:
    """Compile every variant for sm_90a here; registers, spills, shared memory, SASS; the grader's
    launch math (split_chunk, grid, argument count) at both timed shapes with 132 SMs."""
    import types

    import numpy as np

    from grader.problems import attention as P
    from grader.problems import attention_launch as AL

    kerns = build([n for n, _, _ in PART_A + PART_B])
    AL.sm_count = lambda device=0: 132
    sys.modules.setdefault("torch", types.SimpleNamespace(       # the launch functions' scratch, on the host
        empty=lambda shape, dtype=None, device=None: np.zeros(shape, np.float32),
        zeros=lambda n, dtype=None, device=None: np.zeros(n, np.int32), float32=np.float32, int32=np.int32))

    class T(np.ndarray):
        device = types.SimpleNamespace(index=0)

    def arr(shape):
        return np.lib.stride_tricks.as_strided(np.zeros(1, np.int16), shape, (0,) * len(shape)).view(T)

    ok = True
    for n, kern in kerns.items():
        r = resources(kern)
        cfg = VARIANTS[n][0]
        sass = [getattr(kern[w][0], "kernel", kern[w][0]).sass() for w in ("dec", "paged")]
        want = ["UBLKCP", "SYNCS.PHASECHK"] if cfg and int(cfg.split(",")[-1]) & 4 else ["LDGSTS"]
        missing = [w for w in want for s in sass if w not in s]
        local = any(re.search(r"\b(LDL|STL)\b", s) for s in sass)
        shape = kern["dec"][0].launch_shape
        minb = int(cfg.split(",")[3]) if cfg else 2
        fits = (minb * (shape.smem_bytes + 1024) <= 228 * 1024
                and max(r["dec"]["regs"], r["paged"]["regs"]) * shape.threads * minb <= 65536)
        calls = []
        for key, prob in (("decode", P.decode), ("paged", P.decode_paged)):
            recs = [_Rec(k) for k in kern["paged" if key == "paged" else "dec"]]
            s = prob.bench_size
            B, cap = len(s.lens), max(s.lens)
            q, lens = arr((B, s.Hq, s.d)), np.full(B, cap, np.int32)
            if key == "decode":
                kc = arr((B, s.Hkv, cap, s.d))
                P.decode_launch(*recs)(q, kc, kc, lens, q)
            else:
                kp = arr((B * cap // s.page, s.page, s.Hkv, s.d))
                P.paged_decode_launch(*recs)(q, kp, kp, np.zeros((B, cap // s.page), np.int32), lens, q)
            calls += [c for rec in recs for c in rec.calls]
        args_ok = bool(calls) and all(na == npar for _, na, npar in calls)
        grid_ok = [c[0] for c in calls] == [(4, 8, 8), (4, 8, 8)]
        good = not missing and not local and fits and args_ok and grid_ok and r["dec"]["spills"] == r["paged"]["spills"] == 0
        ok &= good
        print(f"{n:8s} regs {r['dec']['regs']}/{r['paged']['regs']} spills {r['dec']['spills']}/{r['paged']['spills']} "
              f"smem {shape.smem_bytes} B, {minb}/SM fits: {fits}; SASS has {want}: {not missing}; local memory: {local}; "
              f"grids {[c[0] for c in calls]}, args {[c[1:] for c in calls]}: {'ok' if good else 'PROBLEM'}")
    ok &= ptxas_check()
    print("dry run:", "every variant builds, fits and launches as planned" if ok else "PROBLEMS above")
    sys.exit(0 if ok else 1)


def main() -> None:
    global CANDIDATE
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ROOT / "results" / "ch04")))
    ap.add_argument("--budget", type=float, default=300, help="seconds for the whole run (the driver)")
    ap.add_argument("--bulk", action="store_true", help="also part B, the bulk-copy variants")
    ap.add_argument("--candidate", type=Path, help="a %%%%cuda cell of the lesson to check and time beside it")
    ap.add_argument("--part", help="(internal) check and time these variants in this process")
    ap.add_argument("--extras", action="store_true", help="(internal, with --part) the studies of the fastest")
    ap.add_argument("--prior", default="", help="(internal, with --part) JSON of earlier processes of the part")
    ap.add_argument("--json", type=Path, help="(internal, with --part) where the part writes its results")
    ap.add_argument("--ncu-launch", help="(internal) one launch per variant and problem, for ncu")
    ap.add_argument("--dry", action="store_true", help="CPU: compile, SASS, the launch math")
    a = ap.parse_args()
    if a.candidate:
        os.environ["DECODE_CANDIDATE"] = CANDIDATE = str(a.candidate.resolve())   # the parts and ncu runs inherit it
    if a.dry:
        return dry()
    import grader  # noqa: F401

    from grader.cuda import toolchain

    if not toolchain.gpu_available():
        print("decode_tma.py needs a CUDA GPU (--dry: the CPU checks)")
        sys.exit(2)
    if a.ncu_launch:
        return ncu_launch(a.ncu_launch.split(","))
    if a.part:
        try:
            return part(a.part.split(","), a.extras, a.json, [Path(f) for f in a.prior.split(",") if f])
        except Exception:
            traceback.print_exc()
            sys.exit(1)
    driver(a.out, a.budget, a.bulk)


if __name__ == "__main__":
    main()
