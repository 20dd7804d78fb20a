"""What the GEMM tuning sweeps (tests/gpu/tune_hgemm.py, tests/gpu/tune_cute.py) share on a GPU:
bf16 inputs uniform in [-1, 1], zero padding to a candidate's tile, the check against an fp32
product with the course's bf16 tolerance (NaN-prefilled C), and the grader-style timing.

A candidate is anything with ``.name``, ``.tile`` = (BM, BN, BK), ``.kernel`` (None when it did not
compile), ``.row`` (its report: "check", "correct", "errors") and ``.launch(a, b, c, M, N, K)`` taking
A and B already padded to the tile. Torch is imported by the functions, so the scripts still load
without a GPU (--compile-only).
"""
from __future__ import annotations

import re
import time
import traceback

from grader import cuda_cells
from grader.problems import gemm as P

SASS_WANT = ["HMMA.16816.F32.BF16", "LDSM.16.M88.4", "LDSM.16.MT88.4", "LDGSTS"]   # lesson 04's rubric
FLUSH_BYTES = 512 * 2**20      # as grader.bench: more than twice any L2
SLEEP_CYCLES = 100_000         # ~50 µs at H100/H200 clocks, as grader.bench's head start


def lesson04_cell() -> dict:
    """Lesson 04's graded %%cuda cell (v_hgemm) without its magic line, and its configuration from
    `using V3 = Config<BM, BN, BK, WARPS_M, WARPS_N, STAGES, SWIZZLE, EPI_SMEM>;`: a dict with body,
    BM, BN, BK, WM, WN, STAGES, EPI (bool) and SMEM (the dynamic shared memory its launch asks for)."""
    from ch03_cells import cell_source

    body = cell_source("04_mma_sync_pipeline.ipynb", "v_hgemm").split("\n", 1)[1]   # drop "%%cuda hg"
    m = re.search(r"using\s+V3\s*=\s*Config<([^>]*)>", body)
    if not m:
        raise ValueError("no `using V3 = Config<...>` in the v_hgemm cell")
    f = [x.strip() for x in m.group(1).split(",")]
    BM, BN, BK, WM, WN, S = (int(x) for x in f[:6])
    epi = f[7] == "true"
    pipe = S * (BM * BK + BK * BN) * 2
    return dict(body=body, BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, STAGES=S, EPI=epi,
                SMEM=max(pipe, BM * (BN + 8) * 2) if epi else pipe)


def compile_candidate(cand) -> dict | None:
    """Compile ``cand.source`` and record in ``cand.row`` its registers, spills, shared memory,
    threads and compile time, and the counts of the SASS the lessons' rubric wants (+ LDL/STL: a
    spill). Returns every opcode's count ({} without cuobjdump), or None if it did not compile."""
    t = time.time()
    try:
        cand.module = cuda_cells.compile_cuda(cand.source, name=cand.name)
        cand.kernel = cand.module[cand.kernel_name]
        res = cand.kernel.resources
        cand.row.update(regs=res.get("registers"), spill_stores=res.get("spill_stores"),
                        spill_loads=res.get("spill_loads"), stack=res.get("stack"), smem=cand.smem,
                        threads=cand.threads, compile_s=round(time.time() - t, 2),
                        from_cache=cand.module.from_cache)
    except Exception as e:
        cand.row["errors"].append(f"compile: {str(e).strip().splitlines()[0][:300] if str(e).strip() else repr(e)}")
        cand.row["compile_log"] = getattr(e, "log", "")[-2000:]
        return None
    try:
        from grader import sass

        ops = sass.opcodes(cand.module, cand.kernel.symbol, full=True)
    except Exception as e:                      # no cuobjdump: not fatal
        cand.row["sass"] = f"unavailable: {e!r}"[:200]
        return {}
    rep = {p: sum(n for op, n in ops.items() if op == p or op.startswith(p + ".")) for p in SASS_WANT}
    rep["LDL/STL"] = sum(n for op, n in ops.items() if op.split(".")[0] in ("LDL", "STL"))
    cand.row["sass"] = rep
    missing = [p for p in SASS_WANT if rep[p] == 0]
    if missing or rep["LDL/STL"]:
        cand.row["errors"].append(f"sass: missing {missing}, LDL/STL {rep['LDL/STL']}")
    return ops


def bf16_inputs(s, gen):
    import torch

    a = (torch.rand(s.M, s.K, device="cuda", generator=gen) * 2 - 1).to(torch.bfloat16)
    b = (torch.rand(s.K, s.N, device="cuda", generator=gen) * 2 - 1).to(torch.bfloat16)
    return a, b


def padded(x, rows, cols):
    import torch

    if tuple(x.shape) == (rows, cols):
        return x
    out = torch.zeros(rows, cols, device="cuda", dtype=x.dtype)
    out[: x.shape[0], : x.shape[1]] = x
    return out


def run_padded(cand, a, b, c):
    """C (M, N) = A · B through the candidate, A and B zero-padded to its tile first."""
    M, K = a.shape
    N = b.shape[1]
    BM, BN, BK = cand.tile
    cand.launch(padded(a, -(-M // BM) * BM, -(-K // BK) * BK), padded(b, -(-K // BK) * BK, -(-N // BN) * BN),
                c, M, N, K)


def check(cand, s, a, b, ref) -> tuple[int, float]:
    """(elements outside the bf16 tolerance, NaN counted; max error / max |ref|)."""
    import torch

    c = torch.full((s.M, s.N), float("nan"), device="cuda", dtype=torch.bfloat16)
    run_padded(cand, a, b, c)
    torch.cuda.synchronize()
    rtol, atol = P.bf16_output_tolerance(s)
    err = (c.float() - ref).abs()
    bad = int((~(err <= atol + rtol * ref.abs())).sum())
    return bad, float(err.max() / ref.abs().max())


def check_all(cands, shapes, gen, report, before=None) -> bool:
    """Check every compiled candidate at each shape; fills row["check"] and row["correct"].
    ``before(cand)`` runs first for each (e.g. an occupancy query). Returns False after a sticky
    CUDA error (report["fatal"] set: nothing more can run in this process)."""
    import torch

    checks = []
    for s in shapes:
        a, b = bf16_inputs(s, gen)
        checks.append((s, a, b, a.float() @ b.float()))
    ok = True
    for cand in cands:
        if cand.kernel is None:
            continue
        try:
            if before:
                before(cand)
            res = {}
            for s, a, b, ref in checks:
                bad, rel = check(cand, s, a, b, ref)
                res[str(s)] = {"bad": bad, "max_rel_err": rel}
            cand.row["check"] = res
            cand.row["correct"] = all(v["bad"] == 0 for v in res.values())
        except Exception as e:
            cand.row["correct"] = False
            cand.row["errors"].append(f"check: {e!r}"[:300])
            traceback.print_exc()
            try:
                torch.cuda.synchronize()
            except Exception:
                report["fatal"] = repr(e)
                ok = False
                break
        print(f"check {cand.name:40s} {cand.row.get('check')}", flush=True)
    del checks
    torch.cuda.empty_cache()
    return ok


_flush_buf = None


def timeit_cool(fn, ref, reps=12):
    """As the grader times (grader.bench): before each timed call the L2 is flushed, the GPU is
    given ~50 µs of sleep to cover the launch, and the host waits for the end; ``ref`` (cuBLAS) and
    ``fn`` alternate. Returns (t_fn, t_ref, median of t_ref / t_fn)."""
    import torch

    global _flush_buf
    if _flush_buf is None:
        _flush_buf = torch.empty(FLUSH_BYTES // 4, device="cuda", dtype=torch.int32)

    def one(f):
        _flush_buf.zero_()
        torch.cuda._sleep(SLEEP_CYCLES)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        f()
        e1.record()
        e1.synchronize()
        return e0.elapsed_time(e1) / 1e3

    for _ in range(2):
        one(ref)
        one(fn)
    tr, tf = [], []
    for _ in range(reps):
        tr.append(one(ref))
        tf.append(one(fn))
    med = lambda xs: sorted(xs)[len(xs) // 2]    # noqa: E731
    return med(tf), med(tr), med([r / f for r, f in zip(tr, tf)])
