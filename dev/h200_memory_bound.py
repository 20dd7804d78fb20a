"""Issue 35: the three memory-bound references that meet their goals on an H100 and miss them on an
H200 (04.04's paged decode, 05.01's TMA transpose, 02.04's RMSNorm), each beside variants, in one
process on one GPU.

    python dev/h200_memory_bound.py [--only decode,tma,rms] [--budget 0.5]
    python dev/h200_memory_bound.py --dry-run        # CPU: builds every variant (see below)

Every kernel is the lesson's own cell, loaded from its solution notebook (grader.notebooks); a
variant is that cell with a small rewrite applied at run time (``swap``: each rewrite must apply
exactly once, or the script stops), or another instantiation of the cell's own configuration type.
Each variant that computes the problem is checked first (``grader.check`` at the problem's visible
sizes); ``diagnostic`` rows are wrong or off-problem on purpose (named below) and are timed only.
Timing is the course's (``grader.speed.timed`` on a ``grader.speed.TimedCase``: events around the
launch, the L2 flushed by a read before each repetition, the median), beside the problem's peer
measured in the same process on the same inputs. The lesson's launch cell as committed (with its
device rule) is one row of each part. The table is printed last; with $OUT set, everything goes to
$OUT/h200_memory_bound.json (rewritten after each row).

What each part asks (results/*/NOTES.md, "Why it lost on the H200", has the napkin numbers):

* **decode** (04.04 paged, pages of 16, B 8 × L 8192, 32/8 heads): is it the page-table lookups
  (``table ignored`` on an in-order table), the random order of the pages (the lesson's kernel on an
  in-order table), the 256-byte rows 2 KiB apart that one (sequence, KV head) reads from a page (the
  same bytes with Hkv = 1: each page one head's 4 KiB; and ``KVB`` = 2, 4, 8 adjacent KV heads per
  block: 512 B, 1 KiB, 4 KiB runs), the page size (64), or the blocks and stages (``DecConfig``
  instantiations; blocks per SM of the split, ``per_sm``)? The contiguous cache (93% of copy on the
  H200) and the read ceiling of as many bytes are the yardsticks. The lesson's launch cell picks
  ``PagedKV4`` on an H200 (``grader.device.bandwidth_per_sm``), ``Paged`` on an H100.
* **tma** (05.01, 8192² fp32): strips and ring depth (``Tp<TILES, STAGES>``), blocks per SM (a
  ``__launch_bounds__`` minimum: the kernel is register-limited to 10), and the order in which the
  blocks walk the matrix (``strips per group``: 1 is the lesson's row-major grid, 32 walks each box
  column's strips together, so the stores of t fill whole rows while they are in the L2).
* **rms** (02.04 v3, 32768 × 4096 bf16): threads × words per row, launch bounds and fastmath, the
  weight row loaded with x (before the block reduction, so its latency overlaps), and two
  diagnostics that remove the block reduction or the weight (what each costs; y is then wrong).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:          # run as a script: import the repository's grader
    sys.path.insert(0, str(ROOT))

import grader  # noqa: E402  (before numba: it picks the GPU or the simulator)
from grader import peers  # noqa: E402
from grader.notebooks import cell_source, run_cells, run_source  # noqa: E402
from grader.problems import attention as PA  # noqa: E402
from grader.problems import hopper as PH  # noqa: E402
from grader.problems import reduce as PR  # noqa: E402
from grader.speed import TimedCase, timed  # noqa: E402
from tests.wrong.ch04_attention import CPP_MISTAKES  # noqa: E402

NB_DECODE = ROOT / "solutions" / "04_attention" / "04_decoding.ipynb"
NB_TMA = ROOT / "solutions" / "05_hopper_blackwell" / "01_tma.ipynb"
NB_NORM = ROOT / "solutions" / "02_reduce" / "04_norms.ipynb"


def swap(src: str, old: str, new: str, where: str) -> str:
    """``src`` with the one occurrence of ``old`` replaced (ValueError if it is not there exactly once)."""
    if src.count(old) != 1:
        raise ValueError(f"{where}: the rewrite no longer applies ({old[:70]!r} occurs {src.count(old)} times)")
    return src.replace(old, new)


def swap_re(src: str, pattern: str, repl: str, where: str) -> str:
    out, n = re.subn(pattern, repl, src, flags=re.M)
    if n != 1:
        raise ValueError(f"{where}: the rewrite no longer applies ({pattern!r} matched {n} times)")
    return out


def kernel_line(src: str, name: str, kernels: list, where: str) -> str:
    """The cell's ``%%cuda`` line, compiling ``kernels`` into a module called ``name``."""
    return swap_re(src, r"^%%cuda \w+[^\n]*", f"%%cuda {name} " + " ".join(f'-k "{k}"' for k in kernels), where)


def compile_cell(src: str, filename: str) -> object:
    ns: dict = {}
    run_source(src, filename, ns)
    (module,) = [v for k, v in ns.items() if not k.startswith("__")]
    return module


def resources(module, kernel: str) -> str:
    r = module.resources.get(kernel) or module.resources.get(module.symbol(kernel), {})
    shape = module.launch_shape(kernel)
    regs = f"{r.get('registers')} regs" if r else "? regs"
    return f"{regs}, {shape.smem_bytes / 1024:.0f} KiB smem" if shape else regs


# ---------------------------------------------------------------- decode (04.04)
DECODE_CELL = "v_decode"
# (alias, BN, warps, stages, blocks per SM, KV heads per block): paged DecConfig instantiations beside
# the cell's Paged (64, 4, 3, 2, KVB 1) and PagedKV4 (16, 4, 3, 2, KVB 4). Each keeps 4 or more warps
# (the swizzled loads need 8 rows per pass at d 128).
DECODE_CONFIGS = [("PagedS4B1", 64, 4, 4, 1, 1),   # 3 tiles (96 KiB) ahead, 1 block per SM
                  ("PagedS2B3", 64, 4, 2, 3, 1),   # 1 tile ahead, 3 blocks per SM: 96 KiB per SM
                  ("PagedW8S2", 128, 8, 2, 1, 1),  # 8 warps, 64 KiB tiles, 1 block per SM
                  ("PagedKV2", 32, 4, 3, 2, 2),    # 2 KV heads per block: 512-byte runs of a page
                  ("PagedKV8", 16, 8, 3, 1, 8)]    # all 8: a page of 16 tokens is one 32 KiB run
DECODE_PER_SM = (1, 3, 4)                         # blocks per SM the split aims at (the lesson: 2)


def d64_alias(alias: str) -> str:
    """The configuration a variant uses at d = 64 (the checks' sizes have both head dims): its own,
    unless a pass of its loads covers more rows than the block's q tile holds there (8 warps at d 64:
    32 rows against 16 per KV head), then the cell's Paged."""
    warps, kvb = next((w, k) for a, _, w, _, _, k in DECODE_CONFIGS if a == alias) if alias in CONFIG_NAMES else (4, 1)
    return alias if warps * 32 // 8 <= 16 * kvb else "Paged"
CONFIG_NAMES = [a for a, *_ in DECODE_CONFIGS]
PAGE_IGNORED = CPP_MISTAKES["decode"][2]["page_ignored"]   # the table not read: page b·max_pages + i


def decode_source(*, ignore_table: bool = False) -> str:
    where = f"{NB_DECODE.name}:{DECODE_CELL}"
    src = cell_source(NB_DECODE, "v_decode")
    names = ["Paged", "PagedKV4"] + CONFIG_NAMES
    kernels = ["decode<Dec<128>>"] + [f"decode<{a}<128>>" for a in names]
    kernels += sorted({f"decode<{d64_alias(a)}<64>>" for a in names})
    src = kernel_line(src, "dec_h200" + ("_notable" if ignore_table else ""), kernels, where)
    aliases = "".join(f"\ntemplate <int D> using {a} = DecConfig<D, {bn}, {w}, {s}, true, {b}, {kvb}>;  // issue 35"
                      for a, bn, w, s, b, kvb in DECODE_CONFIGS)
    src = swap_re(src, r"^(template <int D> using Paged = DecConfig<D, [^>]*>;)", r"\1" + aliases, where)
    for old, new in PAGE_IGNORED if ignore_table else ():
        src = swap(src, old, new, where)
    return src


def in_order_table(table):
    """A block table that maps sequence b's page i to page b·max_pages + i (pages in memory order)."""
    import torch

    B, n = table.shape
    return torch.arange(B * n, dtype=table.dtype, device=table.device).reshape(B, n)


def part_decode(run: "Run") -> None:
    mods = {}
    for key, ignore in (("sweep", False), ("table ignored", True)):
        mods[key] = compile_cell(decode_source(ignore_table=ignore), f"{NB_DECODE.name}:{DECODE_CELL}[{key}]")
        for k in mods[key].kernel_names:
            run.note(f"decode module {key!r}: {k}: {resources(mods[key], k)}")
    lesson = run_cells(NB_DECODE, ["setup", "v_decode", "launch"])
    mod, notable = mods["sweep"], mods["table ignored"]
    paged = lambda m, name, **kw: PA.paged_decode_launch(m[f"decode<{name}<128>>"],  # noqa: E731
                                                         m[f"decode<{d64_alias(name)}<64>>"], merge="fused", **kw)
    # The KVB > 1 kernels (new in the cell; a fault there would end the context) come after the rest.
    rows = [("Paged (KVB 1: the H100's)", paged(mod, "Paged"), "variant", None)]
    rows += [(f"Paged, {per_sm} blocks/SM of split", paged(mod, "Paged", per_sm=per_sm), "variant", None)
             for per_sm in DECODE_PER_SM]
    rows += [(f"{a} ({bn}, {w} warps, {s} stages, {b}/SM, KVB {kvb})", paged(mod, a), "variant", None)
             for a, bn, w, s, b, kvb in DECODE_CONFIGS if kvb == 1]
    rows += [("Paged, pages in memory order", paged(mod, "Paged"), "diagnostic", "in order"),
             ("Paged, table ignored, pages in memory order", paged(notable, "Paged"), "diagnostic", "in order"),
             (f"lesson launch_paged (as committed: {lesson['paged']})", lesson["launch_paged"], "lesson", None),
             ("PagedKV4 (16, 4 warps, 3 stages, 2/SM, KVB 4)", paged(mod, "PagedKV4"), "variant", None)]
    rows += [(f"{a} ({bn}, {w} warps, {s} stages, {b}/SM, KVB {kvb})", paged(mod, a), "variant", None)
             for a, bn, w, s, b, kvb in DECODE_CONFIGS if kvb > 1]
    rows += [("PagedKV8, 1 block/SM of split", paged(mod, "PagedKV8", per_sm=1), "variant", None),
             ("PagedKV4, pages in memory order", paged(mod, "PagedKV4"), "diagnostic", "in order")]
    bench = PA.decode_paged.bench_size                                  # pages of 16, Hkv 8
    # the same bytes in other layouts (timed only; the kernels are checked at the bench's layout)
    others = [(bench._replace(page=64), "pages of 64", ["Paged", "PagedKV4"]),
              # Hkv = 1, B = 64: as many blocks and bytes, each page one head's 16 rows (4 KiB, no stride)
              (PA.Decode((8192,) * 64, 4, 1, page=16), "Hkv 1, B 64 (4 KiB pages of one head)", ["Paged"])]
    others = [(size, [(f"{c}, {label}", paged(mod, c), "diagnostic", None) for c in configs])
              for size, label, configs in others]
    if run.dry:
        run.note(f"decode: every variant compiled (sm_90a, NVRTC); {len(rows) + 4} launch functions built; "
                 "nothing run")
        return

    run.timed_rows("decode", PA.decode, PA.DECODE_BENCH, [
        ("lesson launch_decode (contiguous cache)", lesson["launch_decode"], "lesson", None)])
    run.release(PA.decode, PA.DECODE_BENCH)
    run.read_ceiling("decode", PA.decode_paged, bench)
    case = run.case(PA.decode_paged, bench)
    in_order = list(case.args)
    in_order[3] = in_order_table(case.args[3])
    rows = [(label, launch, kind, in_order if args == "in order" else args) for label, launch, kind, args in rows]
    run.timed_rows("decode", PA.decode_paged, bench, rows, check_skip={"diagnostic"}, hidden=True)
    run.release(PA.decode_paged, bench)
    for size, size_rows in others:
        run.timed_rows("decode", PA.decode_paged, size, size_rows, check_skip={"diagnostic"})
        run.release(PA.decode_paged, size)


# ---------------------------------------------------------------- TMA transpose (05.01)
TMA_CELL = "v_tma"
TMA_SHAPES = [(8, 2), (4, 4), (2, 2), (1, 1), (8, 4), (16, 4)]   # Tp<TILES, STAGES>; the lesson's first
TMA_MIN_BLOCKS = 12                  # __launch_bounds__(128, 12): ≤ 40 registers (the lesson's 45: 10 per SM)
TMA_GROUPS = (32, 8)                 # strips per group of the block order (1: the lesson's row-major grid)
# The block order as a rewrite of the two lines that place a block: blocks are numbered row-major
# (x fastest, as launched) and walk groups of H strips (box rows) column by column, so the blocks
# resident at once cover whole box columns of H strips (H = gridDim.y: column-major).
TMA_ORDER = ("const int lin_ = blockIdx.x + gridDim.x * blockIdx.y;   // issue 35: block order\n"
             "  const int per_ = {H} * gridDim.x, grp_ = lin_ / per_, r_ = lin_ - grp_ * per_;\n"
             "  const int h_ = min({H}, (int)gridDim.y - grp_ * {H});\n"
             "  const int bx_ = r_ / h_, by_ = grp_ * {H} + r_ % h_;\n"
             "  const int n0 = bx_ * BOX;")


def tma_source(shapes, *, group: int | None = None, min_blocks: int | None = None) -> str:
    where = f"{NB_TMA.name}:{TMA_CELL}"
    src = cell_source(NB_TMA, "v_tma")
    name = f"tp_h200_g{group or 1}_b{min_blocks or 0}"
    src = kernel_line(src, name, [f"tma_transpose<Tp<{t}, {s}>>" for t, s in shapes], where)
    if min_blocks:
        src = swap(src, "__launch_bounds__(Cfg::THREADS)", f"__launch_bounds__(Cfg::THREADS, {min_blocks})", where)
    if group:
        src = swap(src, "const int n0 = blockIdx.x * BOX;", TMA_ORDER.format(H=group), where)
        src = swap(src, "const int first = blockIdx.y * Cfg::TILES;", "const int first = by_ * Cfg::TILES;", where)
    return src


def part_tma(run: "Run") -> None:
    builds = {"shapes": (TMA_SHAPES, {}), f"min {TMA_MIN_BLOCKS} blocks": ([(8, 2), (2, 2)], {"min_blocks": TMA_MIN_BLOCKS})}
    builds.update({f"{h} strips per group": ([(8, 2), (4, 4)], {"group": h}) for h in TMA_GROUPS})
    mods = {}
    for key, (shapes, kw) in builds.items():
        mods[key] = compile_cell(tma_source(shapes, **kw), f"{NB_TMA.name}:{TMA_CELL}[{key}]")
        for k in mods[key].kernel_names:
            run.note(f"tma module {key!r}: {k}: {resources(mods[key], k)}")
    lesson = run_cells(NB_TMA, ["setup", "v_tma", "launch"])
    # Tp<8, 2> of the first build is the lesson's kernel again: timed twice, the two rows show the noise
    rows = [("lesson launch_tma (as committed)", lesson["launch_tma"], "lesson", None)]
    for key, (shapes, _) in builds.items():
        rows += [(f"Tp<{t}, {s}>" + ("" if key == "shapes" else f", {key}"),
                  PH.tma_transpose_launch(mods[key][f"tma_transpose<Tp<{t}, {s}>>"]), "variant", None)
                 for t, s in shapes]
    if run.dry:
        run.note(f"tma: {len(rows)} launch functions built (sm_90a, NVRTC); nothing run")
        return
    run.timed_rows("tma", PH.tma_transpose, PH.tma_transpose.bench_size, rows)
    run.release(PH.tma_transpose, PH.tma_transpose.bench_size)


# ---------------------------------------------------------------- RMSNorm (02.04)
NORM_CELL = "v3_registers"
NORM_BASE = ["setup", "welford", "v1_layernorm", "given", "v2_rmsnorm"]
_R_LINE = "r = float32(1.0) / math.sqrt(block_allreduce_sum(acc) / float32(4 * nw) + float32(P.RMS_EPS))"
_W_LINE = "g0, g1, g2, g3 = unpack4(w4[j])"
NO_REDUCTION = [(_R_LINE, "r = float32(1.0) + acc * float32(0.0)")]       # y = x · w (wrong on purpose)
NO_WEIGHT = [(_W_LINE, "g0 = g1 = g2 = g3 = float32(1.0)")]                # y = x · r (wrong on purpose)


def _shape(threads: int, words: int) -> list:
    return [("WORDS = 8 ", f"WORDS = {words} "), ("THREADS3 = 128 ", f"THREADS3 = {threads} ")]


def _jit(options: str) -> list:
    return [("@cuda.jit\ndef rmsnorm_registers(", f"@cuda.jit({options})\ndef rmsnorm_registers(")]


def norm_variants(simulator: bool) -> list:
    """(label, kind, rewrites of the v3 cell). The simulator takes no launch bounds."""
    lb = (lambda b: "fastmath=True") if simulator else (lambda b: f"launch_bounds=(128, {b}), fastmath=True")
    w_early = [("c = cuda.local.array(WORDS, uint64)",
                "c = cuda.local.array(WORDS, uint64); g = cuda.local.array(WORDS, uint64)"),
               ("c[k] = x4[row, j] if j < nw else uint64(0)",
                "c[k] = x4[row, j] if j < nw else uint64(0); g[k] = w4[j] if j < nw else uint64(0)"),
               (_W_LINE, "g0, g1, g2, g3 = unpack4(g[k])")]
    return [("v3, launch_bounds(128, 10), fastmath", "variant", _jit(lb(10))),
            ("v3, 64 threads x 16 words", "variant", _shape(64, 16)),
            ("v3, 256 threads x 4 words", "variant", _shape(256, 4)),
            ("v3, w loaded with x (before the reduction)", "variant", w_early),
            ("v3, w loaded with x, launch_bounds(128, 8), fastmath", "variant", w_early + _jit(lb(8))),
            ("diagnostic: no block reduction (y = x w)", "diagnostic", NO_REDUCTION),
            ("diagnostic: no weight (y = x r)", "diagnostic", NO_WEIGHT),
            ("diagnostic: neither (a copy through the same registers)", "diagnostic", NO_REDUCTION + NO_WEIGHT)]


def norm_variant(base: dict, label: str, rewrites: list) -> dict:
    where = f"{NB_NORM.name}:{NORM_CELL}"
    src = cell_source(NB_NORM, "v3_registers")
    for old, new in rewrites:
        src = swap(src, old, new, where)
    ns = dict(base)
    run_source(src, f"{where}[{label}]", ns)
    return ns


def part_rms(run: "Run") -> None:
    base = run_cells(NB_NORM, NORM_BASE)
    lesson = run_cells(NB_NORM, NORM_BASE + [NORM_CELL, "pick_fastest"])
    variants = [(label, kind, norm_variant(base, label, rw)) for label, kind, rw in norm_variants(grader.SIMULATOR)]
    rows = [("lesson launch_rmsnorm (as committed)", lesson["launch_rmsnorm"], "lesson", None)]
    rows += [(label, ns["launch_rmsnorm_registers"], kind, None) for label, kind, ns in variants]
    if run.dry:
        # the simulator: every variant at one small size (v3's path: 1024 bf16 = 256 words a row)
        size = PR.Rows(2, 1024)
        for label, launch, kind, _ in rows:
            try:
                grader.check(launch, PR.rmsnorm_bf16, sizes=[size], quiet=True)
                verdict = "right"
            except Exception as exc:            # noqa: BLE001  (a diagnostic must be wrong)
                verdict = "wrong: " + str(exc).strip().splitlines()[0][:80]
            ok = (verdict == "right") == (kind != "diagnostic")
            run.note(f"rms (simulator, {size}): {label}: {verdict}" + ("" if ok else "  <-- UNEXPECTED"))
            if not ok:
                raise RuntimeError(f"rms dry run: {label} is {verdict}")
        return
    run.timed_rows("rms", PR.rmsnorm_bf16, PR.rmsnorm_bf16.bench_size, rows, check_skip={"diagnostic"},
                   also_copy=True)
    for label, kind, ns in variants:
        try:
            regs = ns["rmsnorm_registers"].get_regs_per_thread()
            regs = regs if isinstance(regs, int) else max(regs.values())
            run.note(f"rms {label}: {regs} registers")
        except Exception as exc:                # noqa: BLE001
            run.note(f"rms {label}: registers unknown ({exc})")
    run.release(PR.rmsnorm_bf16, PR.rmsnorm_bf16.bench_size)


# ---------------------------------------------------------------- the run
class Run:
    def __init__(self, dry: bool, budget_s: float, out: Path | None):
        self.dry, self.budget_s, self.out = dry, budget_s, out
        self.rows: list = []
        self.notes: list = []
        self.cases: dict = {}
        self.t0 = time.perf_counter()

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"[{time.perf_counter() - self.t0:6.1f}s] {text}", flush=True)

    def case(self, problem, size) -> TimedCase:
        key = (problem.name, repr(size))
        if key not in self.cases:
            self.cases[key] = TimedCase(problem, size, seed=1)
        return self.cases[key]

    def release(self, problem, size) -> None:
        self.cases.pop((problem.name, repr(size)), None)
        try:
            import torch

            torch.cuda.empty_cache()
        except Exception:                       # noqa: BLE001
            pass

    def read_ceiling(self, part: str, problem, size) -> None:
        work = problem.work(size)
        name, value = peers.measure(peers.read_stream(), peers.inputs_for({}, size, work), self.budget_s)
        self.rows.append({"part": part, "label": f"read ceiling of {work['bytes'] / 1e6:.1f} MB ({name})",
                          "kind": "ceiling", "value": value, "unit": "GB/s", "size": size_text(size)})
        self.note(f"{part}: {self.rows[-1]['label']}: {value:,.0f} GB/s")

    def timed_rows(self, part: str, problem, size, rows: list, check_skip=frozenset(), also_copy=False,
                   hidden=False) -> None:
        case = self.case(problem, size)
        work = problem.work(size)
        copy = None
        if also_copy:
            copy = peers.measure(peers.copy(), peers.inputs_for(case.dev_in, size, work), self.budget_s)[1]
        for label, launch, kind, args in rows:
            row = {"part": part, "label": label, "kind": kind, "size": size_text(size), "problem": problem.name}
            if kind in check_skip:
                row["correct"] = "not checked (" + kind + ")"
            else:
                try:
                    grader.check(launch, problem, quiet=True)
                    if hidden:
                        grader.check(launch, problem, hidden=True, quiet=True)
                    row["correct"] = "yes (visible, hidden)" if hidden else "yes"
                except Exception as exc:        # noqa: BLE001
                    row["correct"] = "NO: " + str(exc).strip().splitlines()[0][:120]
            try:
                call_args = args if args is not None else case.args
                m = timed(lambda: launch(*call_args), label=label, work=work, peer=problem.peer,
                          peer_inputs=case.dev_in, size=size, budget_s=self.budget_s)
                row.update(m.as_dict())
                row["label"] = label
                if copy:
                    row["copy_value"], row["copy_fraction"] = copy, m.value / copy
            except Exception as exc:            # noqa: BLE001
                row["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:160]}"
            self.rows.append(row)
            frac = row.get("fraction", math.nan)
            self.note(f"{part}: {label}: {row.get('value', math.nan):,.0f} GB/s = {100 * frac:.1f}% of "
                      f"{row.get('peer')} ({row.get('peer_value') or math.nan:,.0f}); {row['correct']}"
                      + (f"; {row['error']}" if "error" in row else ""))
            self.save()

    def save(self) -> None:
        if self.out is None:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "h200_memory_bound.json").write_text(json.dumps(
            {"device": device_text(), "date": time.strftime("%Y-%m-%d %H:%M"), "rows": self.rows,
             "notes": self.notes}, indent=1, default=str))

    def table(self) -> str:
        lines = [f"{'part':5} | {'variant':58} | {'GB/s':>6} | {'% peer':>7} | {'% copy':>6} | correct"]
        lines.append("-" * len(lines[0]))
        for r in self.rows:
            v, f = r.get("value", math.nan), r.get("fraction", math.nan)
            cf = r.get("copy_fraction", f if r.get("peer", "") and "copy" in str(r.get("peer")) else math.nan)
            lines.append(f"{r['part']:5} | {r['label'][:58]:58} | {v:6.0f} | {100 * f:6.1f}% | {100 * cf:5.1f}% | "
                         f"{r.get('correct', r.get('kind', ''))[:40]}" + (f" {r['error'][:60]}" if 'error' in r else ""))
        return "\n".join(lines)


def size_text(size) -> str:
    return size.describe() if hasattr(size, "describe") else " × ".join(map(str, size))


def device_text() -> str:
    info = grader.device.info()
    peaks = info.published or {}
    return (f"{info.name}, {info.sm_count} SMs, published {peaks.get('mem_GBps', '?')} GB/s"
            + ("" if info.simulator else f", cc {info.compute_capability[0]}.{info.compute_capability[1]}"))


PARTS = {"rms": part_rms, "tma": part_tma, "decode": part_decode}   # decode last: its KVB > 1 kernels are new


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="CPU: compile every C++ variant (NVRTC, sm_90a), "
                    "build every launch function, run the Numba variants in the simulator at a small size")
    ap.add_argument("--only", default=",".join(PARTS), help="parts to run, of " + ",".join(PARTS))
    ap.add_argument("--budget", type=float, default=0.5, help="seconds of timing per variant (and per peer)")
    args = ap.parse_args(argv)
    if not args.dry_run and grader.SIMULATOR:
        print("no GPU here: use --dry-run")
        return 2
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    run = Run(args.dry_run, args.budget, out)
    run.note(f"{device_text()}; {'dry run' if args.dry_run else 'GPU run'}; numpy {np.__version__}")
    failed = []
    for part in args.only.split(","):
        try:
            PARTS[part](run)
        except Exception:                       # noqa: BLE001  (the other parts still run)
            failed.append(part)
            run.note(f"{part} FAILED:\n{traceback.format_exc()}")
        run.save()
    if not args.dry_run:
        print("\n" + run.table())
    print(f"\n{device_text()}; {time.perf_counter() - run.t0:.0f} s; " + (f"FAILED: {failed}" if failed else "every part ran"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
