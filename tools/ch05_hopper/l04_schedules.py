"""05.04 Schedules and epilogues (CUDA C++, sm_90a): the persistent tile scheduler as a subject (static
striding, grouped order), wave quantization, a data-parallel + Stream-K schedule whose last wave is
split along K over every SM (partial fp32 tiles through a global workspace, atomic sums and a count per tile), and a
fused epilogue (bias + GELU) with the idea of CUTLASS's epilogue visitor trees. Built on 05.03's
warp-specialized kernel through grader/include/gemm_sm90.cuh. The FP8 part of lesson 04 is
04_fp8.ipynb (l04_fp8.py)."""
from tools.ch05_hopper import cell
from tools.nbbuild import code, md, solution, tests

NAME = "04_schedules.ipynb"
KERNEL = "sk_gemm<Sk<128, 256, 4, 8, Plain>>"
FUSED = "sk_gemm<Sk<128, 256, 4, 8, BiasGelu>>"


def cells():
    return [
        md(r"""
# 05.04 Schedules: persistent tiles, Stream-K, fused epilogues

**What you will learn**
- the **persistent tile scheduler**: a grid of one CTA per SM that walks the tiles of C by a
  static stride, in a grouped order — what 05.03's kernel already does, now as a subject;
- **wave quantization**: when the tiles are 132·k + a few, the last wave keeps a few SMs busy for a
  whole tile's time while the others idle — and how much that costs at a real shape;
- **Stream-K** for the last wave: data-parallel whole tiles first, then the leftover tiles' k steps
  laid end to end and cut into equal ranges, one per SM; the partial fp32 tiles meet in a global
  workspace by vector atomic adds, ordered by a **count per split tile** (release / acquire at GPU scope);
- a **fused epilogue**: C = GELU(A·B + bias) computed on the accumulators before the TMA store,
  against cuBLAS followed by torch's ops — and the idea of CUTLASS's **epilogue visitor trees**.

**Builds on:** 05.03 (the warp-specialized persistent kernel: its ring, producer and consumers come
from `grader/include/gemm_sm90.cuh`, the same steps you wrote there, as named functions), 02.03
(a grid-wide reduction through global memory). CUDA C++ for **sm_90a**. Without a Hopper GPU the
kernel is compiled and graded on its machine code; the correctness and speed cells say "compiled
and inspected only". The FP8 half of lesson 04 is `04_fp8.ipynb`.
"""),
        code(r"""
import grader
import numpy as np
from grader.cuda import sass
from grader.plot import subplots
from grader.problems import hopper_streamk as P
from grader.problems.gemm import Shape

print(grader.mode(), "| compiling for", grader.cuda.default_arch())
""", "setup_sk"),
        md(r"""
## The persistent tile scheduler

05.03's kernel launched as many CTAs as the GPU holds at once — one per SM at 225 KiB of shared
memory — and each walked the tiles *u* = blockIdx.x, + gridDim.x, + 2·gridDim.x, … That is a
**static** scheduler: which CTA computes which tile is fixed by arithmetic before the launch, no
queue, no atomics. Its order (`grouped_tile`: GROUP_M tile rows, then one column to the right)
decides which tiles run together, so how much of A and B the L2 must hold (05.03's picture).
CUTLASS's `PersistentTileSchedulerSm90` is the same idea with more knobs (raster order, swizzle,
clusters).

Persistence pays twice: the producer starts loading the next tile while the consumers store the
last, and the grid's launch and tail costs are paid once. What it cannot fix is the **number** of
tiles: if there are 144 and 132 SMs, the second wave has 12.

## Wave quantization

`P.WAVE_SHAPE` = 4352 × 1024 × 16384: 34 × 4 = **136 tiles** of 128 × 256 — 132 + 4. Each tile
is 256 k steps of 4.2 MFLOP (2·128·256·64): 1.07 GFLOP, 143 µs for one SM at the tensor cores'
dense peak (989 TFLOP/s / 132 = 7.5 TFLOP/s per SM); about 160 µs measured. A data-parallel
schedule runs 132 tiles in the first wave, then 4 in the second while 128 SMs idle: two
tile-times, about 320 µs, for 1.03 waves of work — **52%** of the machine. The napkin for any
shape: efficiency = tiles / (132 · ⌈tiles / 132⌉), here 136 / 264.

The fix is not a smaller tile (128 × 128 makes 272 tiles = 2.06 waves: three waves, 69%) but to
split the leftover tiles' **k steps** over every SM: 4 · 256 = 1024 k steps / 132 SMs = 7.8 each,
so the tail costs 7.8 / 256 = 3% of a tile-time. Total ≈ 1.03 tile-times plus the fix-up: **1.9×**
faster than data-parallel, in the napkin. `P.streamk_plan` decides which tiles are whole: all full
waves, and the last one too when it is at least half full (then splitting gains little and costs a
fix-up per tile).

The picture: each row an SM, time in tile-times; above, data-parallel; below, data-parallel then
Stream-K, each colour one of the split tiles.
"""),
        code(r"""
SMS = 132
s = P.WAVE_SHAPE
tiles, k_tiles = (-(-s.M // 128)) * (-(-s.N // 256)), -(-s.K // 64)
dp = P.streamk_plan(tiles, k_tiles, SMS)
iters = (tiles - dp) * k_tiles
begin = [c * iters // SMS for c in range(SMS + 1)]
cmap = __import__("matplotlib").colormaps["tab20"]
fig, (ax1, ax2) = subplots(2, 1, figsize=(10, 6.4), sharex=True)
for c in range(SMS):
    for w, t in enumerate(range(c, tiles, SMS)):                  # data-parallel: tile t in wave w
        ax1.broken_barh([(w, 0.98)], (c, 0.9), fc="#4c72b0" if w == 0 else "#dd8452")
    for w, t in enumerate(range(c, dp, SMS)):                      # Stream-K: the whole tiles first
        ax2.broken_barh([(w, 0.98)], (c, 0.9), fc="#4c72b0")
    g, x = begin[c], dp // SMS
    while g < begin[c + 1]:                                        # then this SM's range, tile by tile
        t, kb = g // k_tiles, g % k_tiles
        n = min(k_tiles - kb, begin[c + 1] - g)
        ax2.broken_barh([(x, n / k_tiles)], (c, 0.9), fc=cmap(t % 20), ec="k" if kb == 0 else None, lw=0.4)
        x, g = x + n / k_tiles, g + n
for ax, title in ((ax1, f"data-parallel: {tiles} tiles on {SMS} SMs = 2 waves, the second {tiles - SMS}/{SMS} full "
                        f"-> {100 * tiles / (2 * SMS):.0f}% busy"),
                  (ax2, f"data-parallel {dp} tiles, then {tiles - dp} tiles × {k_tiles} k steps split over {SMS} SMs "
                        f"({iters / SMS:.1f} each) -> about {100 * tiles / SMS / (dp / SMS + iters / SMS / k_tiles):.0f}% busy")):
    ax.set_ylabel("SM"); ax.set_ylim(SMS, 0); ax.set_title(title, fontsize=9)
ax2.set_xlabel(f"time (one tile of {k_tiles} k steps = 1)"); ax2.set_xlim(0, 2.05)
fig.tight_layout()
fig
""", "wave_picture"),
        md(r"""
## Stream-K for the last wave

Lay the split tiles' k steps end to end — iteration *g* is k tile *g* mod k_tiles of split tile
⌊*g* / k_tiles⌋ — and give CTA *c* the iterations `range_begin(c)` … `range_begin(c+1) − 1` with
`range_begin(c) = ⌊c · iters / gridDim.x⌋`: equal shares (±1), every iteration in exactly one
range. A range that crosses a tile boundary is cut there, so a CTA's work is a list of pieces
(tile, kb, ke); the producer and the consumers walk the same list, so the ring's slots and
parities agree as in 05.03.

A tile split between CTAs c₁ < c₂ < … needs its pieces summed. The CTA that holds the tile's
**first** k step (kb = 0) finishes it: every other piece is the **first** piece of a later CTA's
range (ranges are contiguous), computed at the very start of its Stream-K work, while c₁ computes
its piece at the end of its own. So:

- a piece with kb > 0: add the 64 × 256 fp32 accumulators of both consumer warpgroups into the
  split tile's slot of `partials` with `red.global.add.v4.f32` — four fp32 atomic adds at L2 in one
  instruction, new in sm_90, fire and forget — then `__threadfence()`, a named barrier over the 256
  consumer threads, and one thread adds 1 to the tile's count with **release** semantics at GPU
  scope (`red.release.gpu.global.add.s32`): whoever reads that count with **acquire** also sees the
  sums that came before it;
- the piece with kb = 0 and ke < k_tiles: count the later CTAs whose range starts inside the tile
  (skipping empty ranges, which exist when there are fewer iterations than CTAs); one thread per
  warpgroup spins on the tile's count with acquire until it reaches that number, the warpgroup
  syncs, and every thread adds the slot (`__ldcg`, past L1) to its accumulators and writes zeros
  back; once both warpgroups have read it, one thread resets the count. Then the ordinary epilogue.

Nobody waits before adding its own piece, so no CTA can wait for one that waits for it; and each
launch leaves the workspace at zero for the next. The sum's order of additions varies from run to
run (atomics), so C may differ in its last bits between runs — within the tolerance, and the
reason CUTLASS also offers a deterministic, slower reduction. This is the "fix-up" of Stream-K
(Osama et al., 2023); CUTLASS's `Sm90TileSchedulerStreamK` does it with a reduction workspace and
per-tile locks, and can spread the reduction over several CTAs.

**A first design was slower.** Each later piece wrote its own slot and the owner read them one
after the other: at `WAVE_SHAPE` 10 reads of 128 KiB by one SM, about 4 µs each, because ptxas
keeps only about four of a thread's 16-byte loads in flight beside a 128-register accumulator.
The tail cost 40 µs of the kernel's 143 (measured, H100, 2026-11-24: the same kernel without any
fix-up took 103 µs). The atomic sum leaves the owner one read.

The workspace is one fp32 tile and one count per split tile — at most one per CTA: 132 × 128 KiB ≈
16.5 MiB, allocated (zeroed) once by the launch function through Numba the first time a shape
needs it. The problem bounds what a launch may allocate to 20 MiB at any size: a split-K that keeps
a full fp32 C per split fails it.

The picture: the first CTAs of the tail at `WAVE_SHAPE`, their ranges over the first split tiles;
hatched: the owner's piece (kb = 0), which waits for the pieces to its right in the same tile.
"""),
        code(r"""
show = min(tiles - dp, 3)                                          # split tiles drawn
ctas = min(70, max(c for c in range(SMS) if begin[c] < show * k_tiles) + 1)
fig, ax = subplots(figsize=(10, 4.2))
for c in range(ctas):
    g = begin[c]
    while g < begin[c + 1]:
        t, kb = g // k_tiles, g % k_tiles
        n = min(k_tiles - kb, begin[c + 1] - g)
        if t < show:
            ax.broken_barh([(g, n)], (c, 0.85), fc=cmap(t % 20), ec="k", lw=0.3, hatch="" if kb else "///")
        g += n
for t in range(show + 1):
    ax.axvline(t * k_tiles, color="k", lw=0.8)
    if t < show:
        ax.text(t * k_tiles + k_tiles / 2, -1.5, f"split tile {t}", ha="center", fontsize=8)
ax.set_xlim(0, show * k_tiles); ax.set_ylim(ctas + 1, -3)
ax.set_xlabel("iteration g (k steps of the split tiles, end to end)"); ax.set_ylabel("CTA")
ax.set_title(f"each CTA's range ({iters / SMS:.1f} iterations); hatched: the piece with kb = 0, whose CTA "
             "adds the others' summed pieces and stores the tile", fontsize=9)
fig
""", "ranges_picture"),
        md(r"""
## The kernel

`sk_gemm<Sk<BM, BN, STAGES, GROUP_M, Epi>>`: 05.03's kernel without clusters (tile 128 × 256 × 64,
4 slots, a producer and two consumer warpgroups, setmaxnreg), its steps called from
`gemm_sm90.cuh`: `sm90::load_k_range` and `sm90::mma_k_range` take a k range [kb, ke) of a tile
instead of all of K, and `sm90::store_tile<Cfg, Epi>` is 05.03's epilogue with an `Epi::apply` on
each element. The launch passes `dp_tiles` (from `P.streamk_plan`) and the workspace.
The same cell compiles the kernel with a second epilogue, `BiasGelu`, used at the end.

### Exercise (about 33 lines in four places)

1. (a) `range_begin(c)`: CTA c's first iteration, equal shares of `iters`; 1 line. (b) In
   `for_each_work`, after the whole tiles: walk this CTA's range, cut at tile boundaries, calling
   `fn(dp_tiles + g / k_tiles, kb, ke)` for each piece; about 5 lines. (c) The fix-up after each
   piece's `mma_k_range`, as described above; about 25 lines.
2. `BiasGelu::apply` (used by the last section): 3 lines.

`course::named_barrier_sync(3, 256)` syncs the two consumer warpgroups (ids 1 and 2 are each
warpgroup's own). `sm90::wait_flag_or_trap(p, n)` spins until `*p == n` and gives up after about
two seconds with a trap, so a count that never comes fails the launch instead of hanging the
notebook.
"""),
        solution(cell("streamk_cell.cu"), "v_sk"),
        code(r"""
# The tile, stages and threads come from the type; the launch function encodes the three tensor maps,
# launches one CTA per SM, decides with P.streamk_plan which tiles are split and allocates the workspace.
launch_sk = P.streamk_gemm_launch(sk["sk_gemm<Sk<128, 256, 4, 8, Plain>>"])
tiles_at = lambda s: (-(-s.M // 128)) * (-(-s.N // 256))
print("sk_gemm<Sk<128, 256, 4, 8, Plain>> launches with", sk["sk_gemm<Sk<128, 256, 4, 8, Plain>>"].launch_shape)
print(f"at {P.WAVE_SHAPE}: {tiles_at(P.WAVE_SHAPE)} tiles, {P.streamk_plan(tiles_at(P.WAVE_SHAPE), P.WAVE_SHAPE.K // 64, 132)} "
      "of them whole on an H100 (132 SMs)")
""", "launch_sk"),
        md(r"""
### Graded without a GPU: the machine code

wgmma at 64 × 256 × 16 (`HGMMA.64x256x16.F32.BF16`), TMA loads and stores, the mbarrier waits; the
workspace's vector atomic adds (`REDG.E.ADD.F32x4`), the owner's 16-byte loads past L1
(`LDG.E.128.STRONG.GPU` from `__ldcg`), the release add of the count (`REDG.E.ADD.S32.STRONG.GPU`)
and its acquire loads (`LDG.E.STRONG.GPU`); setmaxnreg in effect; no spills (a 64 × 256 fp32
accumulator plus the sum's loads must fit in 232 registers); the epilogue's proxy fence.
"""),
        tests(r"""
sass.require(sk, "sk_gemm<Sk<128, 256, 4, 8, Plain>>",
             present=["HGMMA.64x256x16.F32.BF16", "UTMALDG.2D", "UTMASTG.2D", "SYNCS.PHASECHK",
                      "REDG.E.ADD.F32x4", "LDG.E.128.STRONG.GPU", "REDG.E.ADD.S32.STRONG.GPU", "LDG.E.STRONG.GPU"],
             absent=["HMMA", "LDL", "STL"], no_spills=True)
sass.require_fence(sk, "sk_gemm<Sk<128, 256, 4, 8, Plain>>", writes="STS", fence="FENCE.VIEW.ASYNC.S", reader="UTMASTG")
regs = sass.require_setmaxnreg(sk, "sk_gemm<Sk<128, 256, 4, 8, Plain>>", threads=384)
print(f"✓ HGMMA 64x256x16, TMA loads and stores, the workspace's atomic sums and counts; setmaxnreg in "
      f"effect ({regs['registers']} registers at entry); no spills")
""", "test_sk_sass", 2),
        md(r"""
### On a GPU: correct

05.03's shapes and: 2304 × 2048 × 8192, wave-quantized (132 whole tiles, then 12 split over 11 CTAs each); one
tile of 129 k steps (split over 129 CTAs: three CTAs' ranges are empty); six tiles of 160 k steps
with ranges spanning two tiles. Shapes whose last wave is at least half full run data-parallel
(2048³, for instance). C is poisoned with NaNs before each run; the workspace must stay within the
problem's 20 MiB.
"""),
        tests(r"""
grader.check(launch_sk, P.streamk_gemm)
""", "test_sk_visible", 2),
        tests(r"""
grader.check(launch_sk, P.streamk_gemm, sizes=[Shape(136, 264, 4096)])
### BEGIN HIDDEN TESTS
grader.check(launch_sk, P.streamk_gemm, hidden=True)
### END HIDDEN TESTS
""", "test_sk_hidden", 2),
        md(r"""
## Speed (graded)

At `P.WAVE_SHAPE` (4352 × 1024 × 16384) against cuBLAS (torch.matmul) on the same A and B, in the
same run. **Full points at 60% of cuBLAS**, nothing at 30%. The course's goal for its reference:
faster than cuBLAS at this shape.

**Measured on an H100** (2026-11-24, cuBLAS in the same run; `grader.measure` in
`dev/ch05_hopper/streamk_gpu.py`, `results/ch05/streamk_gpu_h100_2026-11-24_run2.log`; the judge's
run of this notebook is still to be recorded): at 4352 × 1024 × 16384 this kernel reached 734
TFLOP/s = **108% of cuBLAS** (681 TFLOP/s: its own tiles leave its last wave short here too), the
same kernel data-parallel 452 TFLOP/s = 66%. At 2304 × 2048 × 8192 (132 + 12 tiles) 676 TFLOP/s =
**89%** of cuBLAS (761: not quantized at that shape), data-parallel 460 = 61%: the Stream-K tail is
1.47× faster than a second wave there, and cuBLAS is still faster. At 4096³ (3 waves + 116 tiles:
data-parallel by the plan) 767 TFLOP/s = 100% of cuBLAS; at 8192³ 796 = 100% (the first run). The
first fix-up design (one read per piece, above) reached 70% and 71% at the two quantized shapes;
without any fix-up (wrong values, timing only) 115% and 98% — the bare schedule's ceiling.
"""),
        tests(r"""
grader.speed(launch_sk, P.streamk_gemm, points=3)
""", "speed_sk", 3),
        md(r"""
## The schedules side by side

The same kernel launched two ways at `WAVE_SHAPE` — data-parallel only (`split="none"`: 05.03's
schedule) and data-parallel + Stream-K for the last wave (the graded one) — each against cuBLAS in
the same run. Without a Hopper GPU: the reference's recorded run.
"""),
        code(r"""
hopper = not grader.SIMULATOR and grader.device.info().compute_capability == (9, 0)
versions = {}
if hopper:
    k = sk["sk_gemm<Sk<128, 256, 4, 8, Plain>>"]
    for label, split in (("data-parallel (two waves)", "none"), ("data-parallel + Stream-K tail", "auto")):
        versions[label] = grader.measure(P.streamk_gemm_launch(k, split=split), P.streamk_gemm, label)
else:
    print("the comparison needs a Hopper GPU (sm_90a)")
grader.ladder_plot(versions, P.streamk_gemm, title=f"bf16 GEMM {P.WAVE_SHAPE}: % of cuBLAS (same run)") if hopper or grader.SIMULATOR else None
""", "ladder_sk"),
        md(r"""
## A fused epilogue

A layer of an MLP is rarely C = A·B alone: it is GELU(A·B + bias), often cast, scaled, added to a
residual. Done as separate kernels, each step reads C and writes it back: cuBLAS writes C (2 bytes
an element), torch's bias add reads and writes it, GELU reads and writes it — five passes over
M·N·2 bytes. At 4096² that is 5 × 32 MiB = 168 MB, about 55 µs at 3 TB/s, beside a 180 µs GEMM.
`torch.addmm` folds the bias into cuBLAS's own epilogue (three passes).

In our kernel the accumulators are in registers when the tile is finished; anything elementwise
on them costs a few instructions per element and **no** memory traffic. `store_tile<Cfg, Epi>`
calls `Epi::apply(acc, bias[n])` on every element before rounding it to bf16; the bias is read once
per tile and column pair (4 bytes, from L2), and GELU's tanh is one `MUFU.TANH`. The launch is
`P.fused_gemm_launch`: the same kernel, every tile whole.

### Epilogue visitor trees

CUTLASS 3 writes an epilogue as an **expression tree** over the tile (Chen et al.'s "EVT"): leaves
fetch operands — the accumulator (`Sm90AccFetch`), a source matrix (`Sm90SrcFetch`), a scalar, a
vector broadcast along the tile (`Sm90RowBroadcast` for a bias of N values, one per column of C,
`Sm90ColBroadcast` for one per row) — inner nodes compute (`Sm90Compute<GELU, …>`, multiply-add),
and store or reduce nodes write extra outputs (an auxiliary tensor, a row or column reduction).
`Sm90EVT<Node, Children…>` composes them, so GELU(acc + bias) is
`Sm90EVT<Sm90Compute<GELU>, Sm90EVT<Sm90Compute<plus>, Sm90AccFetch, Sm90RowBroadcast>>`. The
collective epilogue then visits the tree once per fragment of accumulators: each node's `visit`
is what our `apply` is, and the broadcast nodes load their vectors into shared memory once per
tile, with TMA, in the producer warp. Our `Epi` is a tree of depth two written by hand; EVT makes
the tree a type, so one kernel template serves every epilogue.

### On a GPU: correct

C = GELU(A·B + bias) against float64, with the bias as large as A·B's typical element (so it moves
GELU's input as much as the product does). A bias read at the element's column within the tile,
not within C, is wrong on every tile but the first column of tiles.
"""),
        code(r"""
launch_fused = P.fused_gemm_launch(sk["sk_gemm<Sk<128, 256, 4, 8, BiasGelu>>"])
""", "launch_fused"),
        tests(r"""
grader.check(launch_fused, P.fused_gemm)
### BEGIN HIDDEN TESTS
grader.check(launch_fused, P.fused_gemm, hidden=True)
### END HIDDEN TESTS
""", "test_fused", 2),
        md(r"""
### Speed (graded)

4096³ against the unfused peer timed as one call: the faster of cuBLAS then torch's `add_` and
`gelu(approximate="tanh")`, and `torch.addmm` (bias in cuBLAS's epilogue) then `gelu`. **Full points
at 60%**, nothing at 6%. The course's goal for its reference: at least as fast as the peer.

**Measured on an H100** (2026-11-24, the peers in the same run; `dev/ch05_hopper/streamk_gpu.py`,
`results/ch05/streamk_gpu_h100_2026-11-24_run2.log` and `_run1.log`): at 4096³ the fused kernel
reached 729 TFLOP/s = **107% of the unfused peer** (its faster form, `addmm` then `gelu`: 679;
`matmul`, `add_`, `gelu`: 553, so 131% of that), 94% of cuBLAS's bare GEMM (771) — the epilogue's
bias loads and tanh cost about 5% against this kernel without it (767). At 8192³ (first run):
782 TFLOP/s = 103% of `addmm` + `gelu` (760), 119% of `matmul` + `add_` + `gelu`. cuBLASLt's own
fused GELU epilogue (`torch._addmm_activation(use_gelu=True)`, ungraded) reached 747 at 4096³ and
796 at 8192³: this kernel is at 97% and 98% of the library's fused epilogue.
"""),
        tests(r"""
grader.speed(launch_fused, P.fused_gemm, points=2)
""", "speed_fused", 2),
        md(r"""
## Stretch goals (no points)

- **Deterministic reduction**: the atomic sum adds the pieces in whatever order they arrive, so C
  can change in its last bits from run to run. Make it deterministic without the first design's
  slow reads: the owner copies each piece into its free ring with a TMA bulk copy
  (`cp.async.bulk`, no registers) while it adds the previous one; or split the reduction, each CTA
  of a tile summing a slice of it ("separate reduction" in CUTLASS).
- **Stream-K with clusters**: a split tile's pieces must share B's multicast partner — give each
  cluster a range, not each CTA.
- **Hybrid sizing**: CUTLASS can split the last wave *and* one full wave before it ("two-tile
  Stream-K + DP"), so each CTA's range is more than a tile and each tile has at most two or three
  pieces. That needs more workspace slots than CTAs (`streamk_plan` allows at most one per CTA):
  try it at shapes with 1.5 waves.
- **An EVT node of your own**: a residual add (`Epi::apply(acc, bias, residual)`): read C's
  previous value with TMA into the staging boxes before the epilogue, add it, store.
"""),
    ]
