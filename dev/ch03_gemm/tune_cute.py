"""Tuning sweep for lesson 03.05's CuTe bf16 GEMM against cuBLAS (torch.matmul bf16).

    python tests/gpu/tune_cute.py                  # on a GPU: compile, check, time; table + $OUT/tune_cute.json
    python tests/gpu/tune_cute.py --compile-only   # anywhere (the default without a GPU): regs, spills, SASS
    python tests/gpu/tune_cute.py --only lesson,t128x256   # substrings of variant names

Candidates are tests/gpu/cute_variants.cu with one CUTE_TUNED(...) line appended (block tile, warp
grid, BK, stages, k-block register pipelining, shared-memory epilogue with 16-byte stores, min blocks
per SM for __launch_bounds__, A-stationary mma order, hoisted copy pointers with a bounds-test-free
main loop); the baseline row is the lesson's own %%cuda cell (solutions/03_gemm/05_cute.ipynb,
grade_id v_cute, kernel cute_gemm_bf16), and lesson 04's hand-written kernel (v_hgemm, hgemm_bf16) is
checked and timed beside them as the target. After the table, the SASS of each main loop (one k tile)
is counted by instruction class (HMMA, LDSM, LDGSTS, barriers, integer/address, predicated, which HMMA
operand is flagged for the register reuse cache). Every source is compiled
with grader.cuda_cells.compile_cuda, in parallel worker processes (one CuTe build takes about a
minute of one core), so the main process then hits the cache.

On a GPU each is checked against an fp32 product of the same bf16 inputs (TF32 off) with gemm.py's
bf16 tolerance at 4096³ and at the ragged 1000×1030×1010 (NaN-prefilled C, zero padding as in the
lesson's launch cell), then timed with CUDA events at 4096³ and 8192³: rounds of candidate, cuBLAS,
candidate, cuBLAS …, each round the median of a few launches, so each candidate's ratio is to the
cuBLAS timed next to it (cuBLAS drifts by about 10% over a run). A candidate that fails to compile,
launch or check keeps its row with the reason. Torch is imported on the GPU path only.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent))

import grader  # noqa: E402,F401  (before numba)
from grader import cuda_cells  # noqa: E402
from grader.problems import gemm as P  # noqa: E402

import gemm_harness as H  # noqa: E402

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


def smem_bytes(cfg) -> int:
    BM, BN, BK, _, _, S, _, EPI = cfg[:8]
    pipe = S * (BM * BK + BN * BK) * 2          # bf16 tiles of A and B per stage
    return max(pipe, BM * BN * 2) if EPI else pipe   # the epilogue reuses it for a (BM, BN) bf16 tile


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


def lesson_candidate():
    """The notebook's graded kernel, its tile and threads read from its CUTE_GEMM_KERNEL line."""
    from ch03_cells import cell_source

    body = cell_source("05_cute.ipynb", "v_cute").split("\n", 1)[1]          # drop "%%cuda cg"
    m = re.search(r"^CUTE_GEMM_KERNEL\(cute_gemm_bf16,([^)]*)\)", body, re.M)
    if m and len(m.group(1).split(",")) >= 8:   # new-style cell: CUTE_GEMM_KERNEL(name, BM, BN, BK, WM, WN, STAGES, SWIZZLE, EPI)
        v = [x.strip() for x in m.group(1).split(",")]
        BM, BN, BK, WM, WN, S = map(int, v[:6])
        epi = v[7] == "true"
        cfg = (BM, BN, BK, WM, WN, S, 1, int(epi), 1, 0, 0)
        return Candidate("lesson05_cute_gemm_bf16", "cute_gemm_bf16", config_str(cfg) + " (lesson)", body, cfg)
    cfg = (128, 128, 32, 2, 2, 4, 0, 0, 1, 0, 0)    # the older cell: 128×128×32, 4 warps, 4 stages
    return Candidate("lesson05_cute_gemm_bf16", "cute_gemm_bf16", config_str(cfg) + " (lesson)", body, cfg)


def hand_candidate():
    """Lesson 04's hand-written kernel (v_hgemm, hgemm_bf16): same arguments and padding, timed beside
    the CuTe rows as the target."""
    v = H.lesson04_cell()
    cfg = (v["BM"], v["BN"], v["BK"], v["WM"], v["WN"], v["STAGES"], 1, int(v["EPI"]), 1, 1, 0)
    return Candidate("lesson04_hgemm_bf16", "hgemm_bf16",
                     f"{v['BM']}x{v['BN']}x{v['BK']} w{v['WM']}x{v['WN']} s{v['STAGES']} (lesson 04, hand-written)",
                     v["body"], cfg, smem=v["SMEM"])


class Candidate:
    def __init__(self, name, kernel_name, config, source, cfg, smem=None):
        self.name, self.kernel_name, self.source, self.cfg = name, kernel_name, source, cfg
        self.threads, self.tile = 32 * cfg[3] * cfg[4], cfg[:3]
        self.smem = smem if smem is not None else smem_bytes(cfg)
        self.module = self.kernel = None
        self.row = {"variant": name, "config": config, "errors": []}

    def compile(self):
        ops = H.compile_candidate(self)
        if ops is None:
            return False
        if self.row.get("spill_stores") or self.row.get("spill_loads"):
            self.row["errors"].append("spills")
        if ops:
            from grader import sass

            self.row["loop"] = loop_profile(sass._functions(self.module)[self.kernel.symbol])
            self.row["sass"]["STG.128"] = sum(n for op, n in ops.items() if op.startswith("STG") and op.endswith(".128"))
        return True

    def launch(self, a, b, c, M, N, K=None):
        """a (Mp, Kp), b (Kp, Np) padded to the tile; c (M, N). (K: the padded Kp is what the kernel
        walks; the argument keeps the signature of tests/gpu/gemm_harness.py's candidates.)"""
        BM, BN, _ = self.tile
        tm, tn = a.shape[0] // BM, b.shape[1] // BN
        self.kernel[tm * tn, self.threads, self.smem](a, b, c, M, N, a.shape[1], a.shape[1], b.shape[1], tm, tn)


def candidates(only=None) -> list[Candidate]:
    out = []
    try:
        out.append(lesson_candidate())
    except Exception as e:
        c = Candidate("lesson05_cute_gemm_bf16", "cute_gemm_bf16", "lesson", "", (128, 128, 32, 2, 2, 4, 0, 0, 1, 0, 0))
        c.row["errors"].append(f"notebook: {e!r}")
        out.append(c)
    try:
        out.append(hand_candidate())
    except Exception as e:
        c = Candidate("lesson04_hgemm_bf16", "hgemm_bf16", "lesson 04", "", (128, 256, 32, 2, 4, 4, 1, 1, 1, 1, 0))
        c.row["errors"].append(f"notebook: {e!r}")
        out.append(c)
    for name, cfg in VARIANTS.items():
        out.append(Candidate(name, name, config_str(cfg), variant_source(name, cfg), cfg))
    if only:
        out = [c for c in out if any(s in c.name for s in only)]
    return out


def _warm_cache(job):
    # worker process: one build into the shared cache (the parent's compile_cuda then hits it)
    name, source = job
    t = time.time()
    try:
        cuda_cells.compile_cuda(source, name=name)
        return name, round(time.time() - t, 1), None
    except Exception as e:
        return name, round(time.time() - t, 1), str(e)[:200]


def compile_all(cands):
    jobs = [(c.name, c.source) for c in cands if c.source]
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

    torch.backends.cuda.matmul.allow_tf32 = False
    report["device"] = torch.cuda.get_device_name()
    print(f"device: {report['device']}", flush=True)
    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs = lambda s: H.bf16_inputs(s, gen)  # noqa: E731

    def median_time(fn, n):
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for e0, e1 in ev:
            e0.record()
            fn()
            e1.record()
        torch.cuda.synchronize()
        ts = sorted(e0.elapsed_time(e1) for e0, e1 in ev)
        return ts[len(ts) // 2] / 1e3

    if not H.check_all(cands, (P.Shape(4096, 4096, 4096), RAGGED), gen, report):
        return

    for n in SIZES:
        s = P.Shape(n, n, n)
        a, b = inputs(s)
        c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        peer_fn = lambda: torch.matmul(a, b, out=c)  # noqa: E731
        for _ in range(3):
            peer_fn()
        peers = []
        for cand in cands:
            if cand.kernel is None or report.get("fatal") or cand.row.get("correct") is False:
                continue
            if time.time() - t0 > BUDGET_S:
                cand.row["errors"].append(f"not timed at {n} (time budget)")
                continue
            try:
                fn = lambda: cand.launch(a, b, c, n, n)  # noqa: E731
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
                if n == SIZES[0]:      # and as the grader times it (L2 flushed, cool start)
                    t, t_ref, ratio = H.timeit_cool(fn, peer_fn)
                    cand.row["graded_frac_4096"] = ratio
                    print(f"  {cand.name:32s} graded timing: {f / t:7.1f} TFLOP/s, cuBLAS {f / t_ref:7.1f}: "
                          f"{100 * ratio:5.1f}%", flush=True)
            except Exception as e:
                cand.row["errors"].append(f"time {n}: {e!r}"[:300])
        report["peers"][str(n)] = peers
        print(f"{s}: cuBLAS bf16 beside the candidates: " + " ".join(f"{p:.0f}" for p in peers), flush=True)
        del a, b, c
        torch.cuda.empty_cache()


def print_table(cands, gpu):
    hdr = f"{'variant':30s} {'config':36s} {'regs':>4s} {'spill':>5s} {'smem':>6s}"
    if gpu:
        for n in SIZES:
            hdr += f" {'TF@' + str(n):>8s} {'%cuBLAS':>7s}"
        hdr += f" {'correct':>7s}"
    else:
        hdr += " " + " ".join(f"{h:>6s}" for h in ("HMMA", "LDSM", "LDSM.T", "LDGSTS", "STG128", "LDL/STL"))
    print("\n" + hdr + "  notes")
    print("-" * len(hdr))
    for c in cands:
        r = c.row
        sp = "-" if r.get("spill_stores") is None else f"{r['spill_stores']}/{r['spill_loads']}"
        line = f"{r['variant'][:30]:30s} {r['config'][:36]:36s} {str(r.get('regs', '-')):>4s} {sp:>5s} {c.smem:>6d}"
        if gpu:
            for n in SIZES:
                tf = r.get(f"tflops_{n}")
                line += f" {tf:8.1f} {100 * r[f'frac_{n}']:6.1f}%" if tf else f" {'-':>8s} {'-':>7s}"
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
    gpu = cuda_cells.gpu_available() and "--compile-only" not in sys.argv
    report = {"date": time.strftime("%Y-%m-%d"), "arch": cuda_cells.default_arch(), "peers": {}, "rows": []}
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
