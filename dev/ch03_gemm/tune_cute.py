"""Tuning sweep for lesson 03.05's CuTe bf16 GEMM against cuBLAS (bf16).

    python dev/ch03_gemm/tune_cute.py                  # on a GPU: compile, check, time; table + $OUT/tune_cute.json
    python dev/ch03_gemm/tune_cute.py --compile-only   # anywhere (the default without a GPU): regs, spills, SASS
    python dev/ch03_gemm/tune_cute.py --only lesson,t128x256   # substrings of variant names

Candidates are cute_variants.cu with one CUTE_TUNED(...) line appended (block tile, warp grid, BK,
stages, k-block register pipelining, shared-memory epilogue with 16-byte stores, min blocks per SM for
__launch_bounds__, A-stationary mma order, hoisted copy pointers with a bounds-test-free main loop),
compiled as cute_tuned<name>; the baseline row is the lesson's own kernel, cute_gemm<V2> of its %%cuda
cell (solutions/03_gemm/05_cute.ipynb, cell v_cute), and lesson 04's hand-written hgemm<V3> (cell
v_hgemm) is checked and timed beside them as the target. After the table, the SASS of each main loop
(one k tile) is counted by instruction class (HMMA, LDSM, LDGSTS, barriers, integer/address,
predicated, which HMMA operand is flagged for the register reuse cache). Every source is compiled
with grader.cuda.compile_cuda, in parallel worker processes (one CuTe build takes about a minute of
one core), so the main process then hits the cache. Each candidate's block size, dynamic shared
memory and tile are the ones its configuration type states, read from the cubin (the launch
contract); it is launched by grader.problems.gemm.tiled_launch, as the lesson's launch cell does.

On a GPU (gemm_harness.py) each is checked with grader.check's run_case + verdict on P.cute_bf16's
inputs at 4096³ and at the ragged 1000×1030×1010 (float64 reference, the course's bf16 tolerance,
poisoned outputs), then timed with CUDA events at 4096³ and 8192³: rounds of candidate, cuBLAS,
candidate, cuBLAS …, each round the median of a few launches, so each candidate's ratio is to the
cuBLAS timed next to it (cuBLAS drifts by about 10% over a run). That back-to-back timing is the
sweep's own, deliberately not the grader's (no L2 flush, no head start: it ranks kernels). At 4096³
the graded timing follows: grader.measure beside the problem's peer (cuBLAS bf16 on the same inputs),
as the speed cell times it. A candidate that fails to compile, launch or check keeps its row with the
reason. Torch is imported on the GPU path only.
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import gemm_harness as H   # first: puts the repository on sys.path and imports grader

import grader
from grader.cuda import compile_cuda, sass
from grader.problems import gemm as P

HERE = Path(__file__).resolve().parent
SIZES = (4096, 8192)
RAGGED = P.Shape(1000, 1030, 1010)
ROUNDS, PER_ROUND = 5, 3        # timing: 5 rounds of (3 launches of the candidate, 3 of cuBLAS)
BUDGET_S = 190.0                # stop timing new rows past this
SASS_WANT = H.SASS_WANT

KEYS = ("BM", "BN", "BK", "WARPS_M", "WARPS_N", "STAGES", "KPIPE", "EPI_SMEM", "MINB", "ROWA", "HOIST")
FLAGS = ("KPIPE", "EPI_SMEM", "ROWA", "HOIST")
# name: (BM, BN, BK, WARPS_M, WARPS_N, STAGES, KPIPE, EPI_SMEM, MINB, ROWA, HOIST)
# ROWA: mmas A-stationary (m outer, n serpentine), as lesson 04; cute::gemm's order for bf16 fragments is
# n outer, m inner. HOIST: copy sources advanced by a pointer add, main loop without the bounds test.
VARIANTS = {
    "t256x128_w4x2_k32_s4_kp_epi":           (256, 128, 32, 4, 2, 4, 1, 1, 1, 0, 0),   # best row of the last sweep
    "t128x256_w2x4_k32_s4_kp_epi":           (128, 256, 32, 2, 4, 4, 1, 1, 1, 0, 0),   # the lesson's kernel with cute::gemm's order
    "t128x256_w2x4_k32_s4_kp_epi_hoist":     (128, 256, 32, 2, 4, 4, 1, 1, 1, 0, 1),   # the lesson's kernel + hoisted copies
    "t128x256_w2x4_k32_s4_kp_epi_rowa_hoist": (128, 256, 32, 2, 4, 4, 1, 1, 1, 1, 1),
    "t256x128_w4x2_k32_s4_kp_epi_rowa_hoist": (256, 128, 32, 4, 2, 4, 1, 1, 1, 1, 1),
    "t128x256_w2x4_k32_s3_kp_epi_rowa_hoist": (128, 256, 32, 2, 4, 3, 1, 1, 1, 1, 1),
}


def config_str(cfg) -> str:
    BM, BN, BK, wm, wn, S, kp, epi, minb, rowa, hoist = cfg
    return (f"{BM}x{BN}x{BK} w{wm}x{wn}({BM // wm}x{BN // wn}) s{S}" + (" kp" if kp else "")
            + (" epi" if epi else "") + (f" lb{minb}" if minb > 1 else "") + (" rowA" if rowa else "")
            + (" hoist" if hoist else ""))


# SASS of the main loop: the backward branch whose body holds the most HMMAs (one k tile per iteration)
LOOP_CLASSES = (
    ("HMMA", ("HMMA",)), ("LDSM", ("LDSM",)), ("LDGSTS", ("LDGSTS",)),
    ("sync", ("BAR", "DEPBAR", "LDGDEPBAR")),
    ("int", ("IMAD", "IADD3", "IADD", "VIADD", "LEA", "SHF", "LOP3", "ISETP", "SEL", "MOV", "IMNMX",
             "VIMNMX", "PLOP3", "P2R", "R2P", "LDC", "S2R", "CS2R")),
    ("uniform", ()), ("LDL/STL", ("LDL", "STL")), ("other", ()),
)
LOOP_COLS = [c for c, _ in LOOP_CLASSES] + ["nop", "pred", "A.reuse", "B.reuse", "total"]


def loop_profile(instructions) -> dict:
    """Instruction counts of the HMMA loop body by class (one iteration = one k tile). "nop": ptxas'
    @!PT LDS padding; "pred": instructions under a predicate; A/B.reuse: HMMAs flagging that operand for
    the register reuse cache (A = 4 registers of m16k16, B = 2 of k16n8)."""
    ins = list(instructions)
    at = {x.offset: i for i, x in enumerate(ins)}
    best = None
    for j, x in enumerate(ins):
        m = re.search(r"0x([0-9a-f]+)\s*$", x.operands) if x.base == "BRA" else None
        if m and int(m.group(1), 16) < x.offset and int(m.group(1), 16) in at:
            body = ins[at[int(m.group(1), 16)]: j + 1]
            n = sum(y.base == "HMMA" for y in body)
            if n and (best is None or n > best[0]):
                best = (n, body)
    if best is None:
        return {}
    out = dict.fromkeys(LOOP_COLS, 0)
    for y in best[1]:
        out["total"] += 1
        if y.predicate == "@!PT":                 # never executes: issue-slot padding
            out["nop"] += 1
            continue
        if y.predicate and y.predicate != "@PT":
            out["pred"] += 1
        if y.base.startswith("U"):
            out["uniform"] += 1
        else:
            out[next((c for c, pre in LOOP_CLASSES if any(y.base.startswith(p) for p in pre)), "other")] += 1
        if y.base == "HMMA":
            ops = [o.strip() for o in y.operands.split(",")]
            out["A.reuse"] += ops[1].endswith(".reuse")
            out["B.reuse"] += ops[2].endswith(".reuse")
    return out

def variant_source(name, cfg) -> str:
    args = ", ".join(str(bool(v)).lower() if k in FLAGS else str(v) for k, v in zip(KEYS, cfg))
    return (HERE / "cute_variants.cu").read_text() + f"\nCUTE_TUNED({name}, {args})\n"


class Candidate(H.Candidate):
    def compile(self):
        ops = super().compile()
        if ops is None:
            return False
        if self.row["config"].startswith("("):           # a lesson's kernel: say its launch shape
            self.row["config"] = f"{self.tile[0]}x{self.tile[1]}x{self.tile[2]} {self.threads} thr {self.row['config']}"
        if self.row.get("spill_stores") or self.row.get("spill_loads"):
            self.row["errors"].append("spills")
        if ops:
            funcs = sass.parse_sass(sass.disassemble(self.module))
            self.row["loop"] = loop_profile(funcs[self.kernel.symbol])
            self.row["sass"]["STG.128"] = sum(n for op, n in ops.items() if op.startswith("STG") and op.endswith(".128"))
        return True


def lesson_candidate(notebook, cell_id, expr, name, note):
    """A lesson's kernel ``expr`` in its %%cuda cell, compiled as the notebook compiles it."""
    try:
        args, body = H.lesson_cell(notebook, cell_id)
        return Candidate(name, expr, body, f"({note})", kernels=args["kernels"], module_name=args["name"])
    except Exception as e:
        c = Candidate(name, expr, "", f"({note})")
        c.row["errors"].append(f"notebook: {e!r}")
        return c


def candidates(only=None) -> list:
    out = [lesson_candidate("05_cute.ipynb", "v_cute", "cute_gemm<V2>", "lesson05 cute_gemm<V2>", "lesson 05: V2"),
           lesson_candidate("04_mma_sync_pipeline.ipynb", "v_hgemm", "hgemm<V3>", "lesson04 hgemm<V3>",
                            "lesson 04: V3, hand-written")]
    for name, cfg in VARIANTS.items():
        out.append(Candidate(name, f"cute_tuned<{name}>", variant_source(name, cfg), config_str(cfg)))
    if only:
        out = [c for c in out if any(s in c.name for s in only)]
    return out


def _warm_cache(job):
    # worker process: one build into the shared cache (the parent's compile_cuda then hits it)
    name, source, kernels = job
    t = time.time()
    try:
        compile_cuda(source, name=name, kernels=kernels)
        return name, round(time.time() - t, 1), None
    except Exception as e:
        return name, round(time.time() - t, 1), str(e)[:200]


def compile_all(cands):
    jobs = [(c.module_name, c.source, c.kernels) for c in cands if c.source]
    t = time.time()
    workers = max(1, min(len(jobs), os.cpu_count() or 1))
    try:
        import multiprocessing as mp

        with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as ex:
            for name, dt, err in ex.map(_warm_cache, jobs):
                print(f"compiled {name:32s} {dt:6.1f} s" + (f"  {err}" if err else ""), flush=True)
    except Exception as e:
        print(f"parallel compile failed ({e!r}); compiling serially", flush=True)
    for c in cands:
        if c.source:
            c.compile()
    print(f"compiling: {time.time() - t:.1f} s with {workers} workers", flush=True)


# ----------------------------------------------------------------------------------------- GPU part
def gpu_main(cands, report, t0):
    import torch

    report["device"] = grader.device.info().name
    print(f"device: {report['device']}", flush=True)

    def median_time(fn, n):
        # the sweep's own timing, back to back (no L2 flush, no head start): the grader never does this
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for e0, e1 in ev:
            e0.record()
            fn()
            e1.record()
        torch.cuda.synchronize()
        ts = sorted(e0.elapsed_time(e1) for e0, e1 in ev)
        return ts[len(ts) // 2] / 1e3

    if not H.check_all(cands, (P.Shape(4096, 4096, 4096), RAGGED), report, problem=P.cute_bf16):
        return

    for n in SIZES:
        s = P.Shape(n, n, n)
        ops = H.operands(s, P.cute_bf16)           # the problem's A and B (seed 0) on the device
        peer_fn = H.cublas(ops)                    # grader.peers.matmul("bf16")'s call on them
        for _ in range(3):
            peer_fn()
        peers, padded = [], {}
        for cand in cands:
            if cand.kernel is None or report.get("fatal") or cand.row.get("correct") is False:
                continue
            if time.time() - t0 > BUDGET_S:
                cand.row["errors"].append(f"not timed at {n} (time budget)")
                continue
            try:
                launch = cand.launch_fn()
                whole = all(n % t == 0 for t in cand.tile)      # else A, B, C padded once, outside the timing
                if not whole and cand.tile not in padded:
                    padded[cand.tile] = H.operands(s, P.cute_bf16, tile=cand.tile)
                o = ops if whole else padded[cand.tile]
                fn = lambda: launch(o["a"], o["b"], o["c"])  # noqa: E731
                fn()
                torch.cuda.synchronize()
                ratios, mine, theirs = [], [], []
                for _ in range(ROUNDS):          # candidate and cuBLAS alternate: drift cancels in the ratio
                    tc = median_time(fn, PER_ROUND)
                    tp = median_time(peer_fn, PER_ROUND)
                    mine.append(tc), theirs.append(tp), ratios.append(tp / tc)
                ratios.sort()
                f = P.flops(s) / 1e12
                cand.row[f"tflops_{n}"] = f / sorted(mine)[len(mine) // 2]
                cand.row[f"cublas_{n}"] = f / sorted(theirs)[len(theirs) // 2]
                cand.row[f"frac_{n}"] = ratios[len(ratios) // 2]
                cand.row[f"frac_spread_{n}"] = ratios[-1] - ratios[0]
                peers.append(cand.row[f"cublas_{n}"])
                if n == SIZES[0]:      # and as the grader times it (grader.measure: L2 flushed, head start)
                    m = H.graded(launch, s, cand.name, problem=P.cute_bf16)
                    cand.row.update(graded_frac_4096=m.fraction, graded_tflops_4096=m.value,
                                    graded_cublas_4096=m.peer_value, graded_spread_4096=m.spread)
                    print(f"  {cand.name:32s} graded timing: {m.value:7.1f} TFLOP/s, {m.peer_name} "
                          f"{m.peer_value:7.1f}: {100 * m.fraction:5.1f}%", flush=True)
            except Exception as e:
                traceback.print_exc()
                cand.row["errors"].append(f"time {n}: {e!r}"[:300])
        report["peers"][str(n)] = peers
        print(f"{s}: cuBLAS bf16 beside the candidates: " + " ".join(f"{p:.0f}" for p in peers), flush=True)
        del ops, padded, peer_fn
        torch.cuda.empty_cache()


def print_table(cands, gpu):
    hdr = f"{'variant':30s} {'config':36s} {'regs':>4s} {'spill':>5s} {'smem':>6s}"
    if gpu:
        for n in SIZES:
            hdr += f" {'TF@' + str(n):>8s} {'%cuBLAS':>7s}"
        hdr += f" {'graded':>7s} {'correct':>7s}"
    else:
        hdr += " " + " ".join(f"{h:>6s}" for h in ("HMMA", "LDSM", "LDSM.T", "LDGSTS", "STG128", "LDL/STL"))
    print("\n" + hdr + "  notes")
    print("-" * len(hdr))
    for c in cands:
        r = c.row
        sp = "-" if r.get("spill_stores") is None else f"{r['spill_stores']}/{r['spill_loads']}"
        line = (f"{r['variant'][:30]:30s} {r['config'][:36]:36s} {str(r.get('regs', '-')):>4s} {sp:>5s} "
                f"{str(r.get('smem', '-')):>6s}")
        if gpu:
            for n in SIZES:
                tf = r.get(f"tflops_{n}")
                line += f" {tf:8.1f} {100 * r[f'frac_{n}']:6.1f}%" if tf else f" {'-':>8s} {'-':>7s}"
            g = r.get("graded_frac_4096")
            line += f" {100 * g:6.1f}%" if g is not None and g == g else f" {'-':>7s}"
            line += f" {str(r.get('correct', '-')):>7s}"
        else:
            sv = r.get("sass")
            if isinstance(sv, dict):
                line += " " + " ".join(f"{sv[p]:6d}" for p in SASS_WANT + ["STG.128", "LDL/STL"])
        print(line + ("  " + "; ".join(r["errors"]) if r["errors"] else ""))


def print_loop_table(cands):
    rows = [c for c in cands if c.row.get("loop")]
    if not rows:
        return
    print("\nSASS of the main loop, one iteration (one k tile; BK = 32: 64 HMMA per warp):")
    hdr = f"{'variant':40s} " + " ".join(f"{h:>7s}" for h in LOOP_COLS)
    print(hdr)
    print("-" * len(hdr))
    for c in rows:
        print(f"{c.name[:40]:40s} " + " ".join(f"{c.row['loop'][h]:7d}" for h in LOOP_COLS))


def main():
    t0 = time.time()
    only = None
    if "--only" in sys.argv:
        only = sys.argv[sys.argv.index("--only") + 1].split(",")
    gpu = grader.cuda.gpu_available() and "--compile-only" not in sys.argv
    print(grader.mode(), "| arch", grader.cuda.default_arch(), "| gpu" if gpu else "| compile only", flush=True)
    report = {"date": time.strftime("%Y-%m-%d"), "arch": grader.cuda.default_arch(), "peers": {}, "rows": []}
    cands = candidates(only)
    compile_all(cands)
    if gpu:
        try:
            gpu_main(cands, report, t0)
        except Exception as e:
            report["fatal"] = repr(e)
            traceback.print_exc()
    report["rows"] = [c.row for c in cands]
    print_table(cands, gpu)
    print_loop_table(cands)
    report["total_s"] = round(time.time() - t0, 1)
    print(f"total {report['total_s']} s")
    out = os.environ.get("OUT")
    if out:
        p = Path(out, "tune_cute.json")
        p.write_text(json.dumps(report, indent=1, default=float))
        print("wrote", p)


if __name__ == "__main__":
    main()
