"""05.03 Pipelines and warp specialization (CUDA C++, sm_90a): a producer warpgroup (TMA) and
consumer warpgroups (WGMMA) with setmaxnreg, a ring of full/empty mbarriers and their parity, a
persistent grid, clusters with TMA multicast, a grouped tile order; then the same GEMM through
CUTLASS 3.x's collective builder (collective, kernel and device layers) as a host library."""
from tools.ch05_hopper import cell
from tools.nbbuild import code, md, solution, tests

NAME = "03_pipelines.ipynb"
KERNEL = "ws_gemm<Ws<128, 256, 4, 2, 8>>"


def cells():
    return [
        md(r"""
# 05.03 Pipelines and warp specialization

**What you will learn**
- **warp specialization**: one warpgroup only moves data (the *producer*: one thread issues every
  TMA load), the others only compute (the *consumers*: wgmma), and they never wait for each other
  except through mbarriers;
- **`setmaxnreg`**: the producer gives its registers back and the consumers take them — and why
  ptxas silently ignores it unless the kernel states `__launch_bounds__(THREADS, 1)`;
- the **ring** of full and empty barriers: who arrives on which, how many arrivals each expects,
  and the **parity** each side waits for as the ring wraps around, tile after tile;
- **clusters and TMA multicast**: two CTAs on neighbouring SMs share the B tile; each loads half
  of it and the copy engine delivers both halves to both;
- a **persistent** grid and a **grouped tile order** for L2 reuse; then the same GEMM built from
  **CUTLASS 3.x**'s collective builder, timed beside yours.

**Builds on:** 05.01 (TMA, the mbarrier and its parity), 05.02 (wgmma, descriptors, the 128 × 256
tile of two consumer warpgroups, the accumulator fragment). CUDA C++ for **sm_90a**. Without a
Hopper GPU the kernel is compiled and graded on its machine code; the correctness and speed cells
say "compiled and inspected only".
"""),
        code(r"""
import grader
import numpy as np
from grader.cuda import sass
from grader.plot import subplots
from grader.problems import hopper as P
from grader.problems.gemm import Shape

print(grader.mode(), "| compiling for", grader.cuda.default_arch())
""", "setup_ws"),
        md(r"""
## Why specialize

05.02's kernel had one leader thread that, between its own wgmmas, refilled the ring — after a
`__syncthreads` that made both warpgroups wait for the slower one. Every block ran one tile and
then stored it while the tensor cores idled. It reached 88% of cuBLAS at 4096³.

Here the block has **three warpgroups** (384 threads). Warpgroup 0 is the **producer**: one of its
threads waits until a slot is free, arms its barrier and issues the TMA loads — nothing else.
Warpgroups 1 and 2 are **consumers**: each waits until a slot is full, issues four
`wgmma m64n256k16` on it, and releases the slot once those wgmmas are done. Nobody calls
`__syncthreads` inside the loop.

**Registers.** An SM has 65,536 registers. At 384 threads per block, `__launch_bounds__(384, 1)`
gives every thread 168 (65,536 / 384, rounded down to 8). A consumer needs 128 for its 64 × 256
fp32 accumulator plus addresses and loop state; the producer needs about 30. `setmaxnreg.dec 40`
in the producer returns 128 × (168 − 40) registers to the CTA's pool, and `setmaxnreg.inc 232` in
each consumer takes 256 × (232 − 168) of them: 128·40 + 256·232 = 64,512 ≤ 65,536. ptxas then
allocates the consumer branch for 232 registers. Without launch bounds ptxas cannot tell the
register count at entry: it **drops** `setmaxnreg` and only says "(C7508) … 'setmaxnreg' ignored"
in its report — the code compiles, and spills or runs slowly. (`__launch_bounds__(384)` alone was
enough for this kernel with nvcc 13.0, not for a small one; the `, 1`, one block per SM, makes it
certain.)

**Napkin math.** The graded GEMM is 4096³ bf16: 137 GFLOP, 179 µs at cuBLAS's pace on an H100
(767 TFLOP/s). A 128 × 256 tile has 16 … 64 k steps of 48 KiB each (A 16 KiB, B 32 KiB). One k
step is 2·128·256·64 = 4.2 MFLOP: about 0.56 µs for an SM at 7.5 TFLOP/s. TMA must therefore
deliver 48 KiB per SM every 0.56 µs: 86 GB/s per SM, **11 TB/s** over 132 SMs — from L2, not DRAM
(each tile of A is read by 16 blocks, each tile of B by 32), which is why the tile order and
multicast matter.
"""),
        md(r"""
## The ring: full and empty barriers, and their parity

Slot *s* of the ring has two mbarriers:

- `full[s]` — initialised with **1** arrival: the producer's `arrive.expect_tx(48 KiB)`. The phase
  completes when that arrival and all 48 KiB have landed.
- `empty[s]` — initialised with **2** arrivals (one per consumer warpgroup; × 2 with clusters of two:
  below). Each consumer arrives once its wgmmas on the slot are finished (`wgmma.wait_group 1` after
  issuing the next k step's).

The producer and the consumers count k steps the same way, **across tiles**: the *it*-th k step
(over every tile this CTA computes) goes to slot *it* mod S, whose barriers are then in their
⌊*it* / S⌋-th phase. So a consumer waits `full[s]` for parity ⌊*it* / S⌋ mod 2, and the producer
waits `empty[s]` for the phase **before** — parity (⌊*it* / S⌋ + 1) mod 2 — which a fresh barrier
answers at once (05.01: a barrier in phase *k* reports phase *k* − 1 complete): the first S loads
do not wait. A consumer that waits for the wrong parity reads a slot before it is filled; a
producer that does not wait on `empty` overwrites a slot a wgmma is still reading.

The picture: a ring of 4 slots, the producer ahead, the two consumers in step; below, each slot's
life — loading, full, being read, free — and the phases its barriers complete.
"""),
        code(r"""
S, STEPS, LOAD, MMA = 4, 11, 1.6, 1.0           # slots, k steps drawn, time units of a load and of a k step
issue, land, start, done, free = {}, {}, {}, {}, {}
for it in range(STEPS):
    t = issue[it - 1] + 0.25 if it else 0.0        # one thread issues the loads, one after another
    if it >= S:
        t = max(t, free[it - S])                    # the producer waits on empty[s]
    issue[it], land[it] = t, t + LOAD
    start[it] = max(land[it], done[it - 1] if it else 0.0)   # the consumers wait on full[s]
    done[it] = start[it] + MMA
    if it:                                          # k step it - 1 released once k step it was issued
        free[it - 1] = max(done[it - 1], start[it])   # and wait_group 1 returned
free[STEPS - 1] = done[STEPS - 1]
colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52"]
fig, (ax, ax2) = subplots(2, 1, figsize=(11, 5.6), sharex=True, gridspec_kw={"height_ratios": [1, 1.25]})
for it in range(STEPS):
    s, k = it % S, it // S
    ax.broken_barh([(issue[it], 0.22)], (0.1, 0.8), fc=colors[s])
    ax.text(issue[it] + 0.11, 1.05, f"{it}", ha="center", fontsize=7)
    for row in (1, 2):
        ax.broken_barh([(start[it], MMA * 0.97)], (row + 0.1, 0.8), fc=colors[s], alpha=0.85)
        ax.text(start[it] + 0.5, row + 0.5, f"k{it}: slot {s}\nfull par. {k % 2}", ha="center", va="center",
                fontsize=6.5, color="w")
ax.set_yticks([0.5, 1.5, 2.5]); ax.set_yticklabels(["producer (1 thread): TMA", "consumer WG 1", "consumer WG 2"])
ax.set_ylim(3.1, -0.1)
ax.set_title("who works on which k step: the producer runs up to 4 slots ahead; a slot is refilled once "
             "both consumers released it", fontsize=9)
for it in range(STEPS):
    s, k = it % S, it // S
    ax2.broken_barh([(issue[it], land[it] - issue[it])], (s + 0.15, 0.7), fc=colors[s], alpha=0.3, hatch="///")
    ax2.broken_barh([(land[it], start[it] - land[it])], (s + 0.15, 0.7), fc=colors[s], alpha=0.45)
    ax2.broken_barh([(start[it], free[it] - start[it])], (s + 0.15, 0.7), fc=colors[s], alpha=0.95)
    ax2.plot(land[it], s + 0.5, "v", color="k", ms=5)
    ax2.text(land[it] + 0.08, s + 0.35, f"full {k}", fontsize=6)
    ax2.plot(free[it], s + 0.5, "^", color="w", mec="k", ms=5)
    ax2.text(free[it] + 0.08, s + 0.75, f"empty {k}", fontsize=6)
ax2.set_yticks([s + 0.5 for s in range(S)]); ax2.set_yticklabels([f"slot {s}" for s in range(S)])
ax2.set_ylim(S + 0.1, -0.1); ax2.set_xlabel("time (schematic)")
ax2.set_title("each slot: hatched = TMA in flight, pale = full (waiting), dark = wgmmas reading it;\n"
              "▼ full {k}: full[s] completes phase k (parity k mod 2); △ empty {k}: empty[s] completes phase k",
              fontsize=9)
fig.tight_layout()
fig
""", "ring_picture"),
        md(r"""
## Clusters and TMA multicast

A **cluster** is a group of CTAs (here 2) that the hardware places on neighbouring SMs of one GPC
at the same time; they can read and signal each other's shared memory (*distributed shared
memory*). Take the two tiles of C stacked along M, (m, n) and (m + 128, n): they need **different**
A tiles but the **same** B tile. With `cp.async.bulk.tensor … .multicast::cluster` and a CTA mask
of `0b11`, one load lands at the same shared-memory offset **in both CTAs**, and its bytes count
on the mbarrier at the same offset in each. So CTA rank 0 loads B's boxes 0 and 1, rank 1 loads
boxes 2 and 3, each multicasts to both, and each loads its own A. Every `full[s]` still expects the
whole 48 KiB (its A, all four B boxes), half of which another CTA sent — possibly before this
CTA's producer armed the barrier (the transaction count may run negative for a while; the phase
cannot complete until the arrival comes).

The other direction: rank 0 may overwrite slot *s* **in rank 1** only when rank 1's consumers are
done with it. So `empty[s]` counts **4** arrivals — both consumer warpgroups of both CTAs — and each
consumer releases a slot on every CTA of its cluster (`mapa` + `mbarrier.arrive.release.cluster`).
Before the loop, `barrier.cluster` makes sure no CTA signals a barrier its peer has not yet
initialised; after it, that no CTA exits while its peer may still signal it. L2 traffic for B
halves; in SASS the load shows as `UTMALDG.2D.MULTICAST`.
"""),
        code(r"""
from matplotlib.patches import FancyArrowPatch, Rectangle

fig, ax = subplots(figsize=(10.5, 4.6))
ax.add_patch(Rectangle((3.2, 5.2), 4, 0.8, fc="#dde8f5", ec="k"))
ax.text(5.2, 6.25, "B tile in global memory (64 × 256: 4 boxes of 64 × 64)", ha="center", fontsize=8)
for j in range(4):
    ax.add_patch(Rectangle((3.2 + j, 5.2), 1, 0.8, fc=["#4c72b0", "#4c72b0", "#dd8452", "#dd8452"][j], alpha=0.6, ec="k"))
    ax.text(3.7 + j, 5.6, f"box {j}", ha="center", va="center", fontsize=7)
for r, y in ((0, 2.6), (1, 0.0)):
    ax.add_patch(Rectangle((0.2, y), 1.6, 1.8, fc="#eee", ec="k"))
    ax.text(1.0, y + 0.9, f"A tile\nrows {128 * r}…{128 * r + 127}\n(own load)", ha="center", va="center", fontsize=7)
    ax.add_patch(Rectangle((2.6, y - 0.15), 5.6, 2.1, fill=False, ec="k", lw=1.5))
    ax.text(8.3, y + 0.9, f"CTA rank {r}\n(SM {2 * 7 + r})\nslot s:", fontsize=7.5, va="center")
    ax.add_patch(Rectangle((2.8, y + 0.5), 1.0, 0.9, fc="#eee", ec="k"))
    ax.text(3.3, y + 0.95, "A", ha="center", va="center", fontsize=7)
    for j in range(4):
        ax.add_patch(Rectangle((4.0 + j, y + 0.5), 1.0, 0.9, fc=["#4c72b0", "#4c72b0", "#dd8452", "#dd8452"][j], alpha=0.6, ec="k"))
        ax.text(4.5 + j, y + 0.95, f"B{j}", ha="center", va="center", fontsize=7)
    ax.annotate("", (2.8, y + 0.95), (1.8, y + 0.9), arrowprops=dict(arrowstyle="->", color="0.3"))
    ax.text(4.9, y + 0.15, f"full[s]: expects 48 KiB   empty[s]: 4 arrivals", fontsize=6.5, ha="left")
for j in range(4):
    src = 0 if j < 2 else 1
    for y in (2.6, 0.0):
        ax.add_patch(FancyArrowPatch((3.7 + j, 5.2), (4.5 + j, y + 1.4), arrowstyle="->", mutation_scale=8,
                                     color=["#4c72b0", "#dd8452"][src], lw=0.9, alpha=0.8))
ax.text(9.4, 5.35, "rank 0 loads B0, B1\nrank 1 loads B2, B3\neach multicast to both\n(cta mask 0b11)", fontsize=7.5)
ax.annotate("consumers of rank 1\nrelease slot s on\nrank 0 too (mapa +\narrive.release.cluster)", (8.2, 2.9), (9.4, 1.4),
            fontsize=7, arrowprops=dict(arrowstyle="->", color="#c44e52"))
ax.set_xlim(0, 11.5); ax.set_ylim(-0.3, 6.6); ax.axis("off")
ax.set_title("a cluster of two CTAs stacked along M: one B tile, loaded once from L2, lands in both", fontsize=9)
fig
""", "multicast_picture"),
        md(r"""
## A persistent grid and the order of the tiles

The kernel is **persistent**: it launches as many CTAs as fit on the GPU at once (132 on an H100;
for clusters, `cuOccupancyMaxActiveClusters` × 2) and each loops over tiles *u* = cluster id,
+ number of clusters, … until C is done. The producer then runs ahead into the next tile's k steps
while the consumers store the last one, and the ring's phases simply continue.

Which tiles run at the same time decides how much of A and B the L2 (50 MB) must hold. At 8192³
there are 32 × 32 units (two stacked 128 × 256 tiles each). Row by row (left), the 66 clusters of
one wave cover 3 unit rows of A and all 32 columns of B: (3 + 32) · 256 rows or columns of 8192
bf16, 147 MB — three times the L2. **Grouped** (right, GROUP_M = 8 unit rows): 8 unit rows by 9
columns, 71 MB, half as much, so more of the loads hit in L2. The kernel's `tile_of` computes the
order; nothing else changes.
"""),
        code(r"""
def order(units_m, tiles_n, group):
    # unit u -> (unit row, column), as the kernel's tile_of computes it
    out = []
    for u in range(units_m * tiles_n):
        um, un = u // tiles_n, u % tiles_n
        if group:
            per, first = group * tiles_n, (u // (group * tiles_n)) * group
            rows = min(units_m - first, group)
            um, un = first + (u % per) % rows, (u % per) // rows
        out.append((um, un))
    return out

UM, TN, WAVE = 32, 32, 66                   # 8192³ in units of two stacked 128 × 256 tiles: 32 × 32
fig, axes = subplots(1, 2, figsize=(10, 4.6))
for ax, group, title in ((axes[0], 0, "row by row"), (axes[1], 8, "grouped, GROUP_M = 8")):
    grid = np.full((UM, TN), np.nan)
    for u, (um, un) in enumerate(order(UM, TN, group)):
        grid[um, un] = u // WAVE
    ax.imshow(grid, cmap="viridis", aspect="auto")
    first = [(um, un) for u, (um, un) in enumerate(order(UM, TN, group)) if u < WAVE]
    rows, cols = len({r for r, _ in first}), len({c for _, c in first})
    ax.set_title(f"{title}: the first wave of {WAVE} clusters reads\n{rows} unit rows of A and {cols} columns of B",
                 fontsize=9)
    ax.set_xlabel("tile column of C (256 wide)"); ax.set_ylabel("unit row (2 tiles of 128)")
fig.suptitle("colour: the wave in which a cluster computes the unit (66 clusters of 2 CTAs at once)", fontsize=9)
fig.tight_layout()
fig
""", "order_picture"),
        md(r"""
## The kernel

`ws_gemm<Ws<BM, BN, STAGES, CLUSTER, GROUP_M>>`: tile 128 × 256 × 64, 4 slots (192 KiB), two consumer
warpgroups, clusters of 2 along M, grouped order. The epilogue stages each consumer's 64 × 256
piece of C in shared memory (128-byte swizzled, 128 columns at a time: 32 KiB more) and stores it
with TMA, which clips the ragged edges — 05.02's second stretch goal. The cell also compiles the
same kernel without clusters, in row order and grouped, for the ladder.

### Exercise (about 17 lines in five places)

1. The producer gives registers back: `course::setmaxnreg_dec<Cfg::PRODUCER_REGS>()`; 1 line.
2. The producer's k step: wait on `empty[s]` for the parity **before** this use, `arrive.expect_tx`
   the slot's bytes on `full[s]`, load A's box at {column `kt·BK`, row `m0`}, and this CTA's share of
   B's boxes — boxes `rank·B_BOXES/CL` … `(rank+1)·B_BOXES/CL − 1` at {`n0 + 64j`, `kt·BK`} —
   multicast to mask `(1 << CL) − 1` when `CL > 1`: about 9 lines.
3. The consumers take registers: `course::setmaxnreg_inc<Cfg::CONSUMER_REGS>()`; 1 line.
4. `release(s)`: the warpgroup's signalling thread arrives on `empty[s]` of every CTA of the
   cluster (`course::mbar_arrive_cluster(&empty[s], r)`), or its own (`course::mbar_arrive`); 5 lines.
5. The consumer's wait on `full[s]`; 1 line.

The helpers are in `grader/include/pipeline.cuh` (setmaxnreg, the bounded wait, clusters, the
multicast load), `tma.cuh` and `wgmma.cuh`. `course::mbar_wait_or_trap` gives up after about two
seconds and traps: a wrong parity then fails the launch with an error instead of hanging the
notebook (restart the kernel afterwards: the GPU context is lost).
"""),
        solution(cell("ws_cell.cu"), "v_ws"),
        code(r"""
# Tile, stages, cluster and threads come from the type; the launch function encodes the three tensor
# maps (A: 128 × 64 boxes, B and C: 64 × 64) and launches a persistent grid of whole clusters.
launch_ws = P.ws_gemm_launch(ws["ws_gemm<Ws<128, 256, 4, 2, 8>>"])
print("ws_gemm<Ws<128, 256, 4, 2, 8>> launches with", ws["ws_gemm<Ws<128, 256, 4, 2, 8>>"].launch_shape)
""", "launch_ws"),
        md(r"""
### Graded without a GPU: the machine code

The kernel holds wgmma at 64 × 256 × 16 (`HGMMA.64x256x16.F32.BF16`), TMA loads with the multicast
form (`UTMALDG.2D.MULTICAST`), the mbarrier waits, the cluster barrier (`UCGABAR_ARV`/`_WAIT`), the
TMA stores of the epilogue (`UTMASTG.2D`), no global loads or stores of its own and no spills; its
wgmma ordering as in 05.02; and **setmaxnreg in effect**: both `USETMAXREG.DEALLOC` (producer) and
`USETMAXREG.TRY_ALLOC` (consumers) in the SASS, no "(C7508) setmaxnreg ignored" from ptxas, and at
most 168 registers at entry (one CTA of 384 threads per SM). The epilogue's shared-memory stores
reach the TMA store through the async-proxy fence (05.01).
"""),
        tests(r"""
sass.require(ws, "ws_gemm<Ws<128, 256, 4, 2, 8>>",
             present=["HGMMA.64x256x16.F32.BF16", "UTMALDG.2D.MULTICAST", "UTMASTG.2D", "SYNCS.PHASECHK",
                      "UCGABAR_ARV", "UCGABAR_WAIT"],
             absent=["LDG", "STG", "HMMA", "LDL", "STL"], no_spills=True)
sass.require_wgmma(ws, "ws_gemm<Ws<128, 256, 4, 2, 8>>", max_pending=1)
sass.require_fence(ws, "ws_gemm<Ws<128, 256, 4, 2, 8>>", writes="STS", fence="FENCE.VIEW.ASYNC.S", reader="UTMASTG")
regs = sass.require_setmaxnreg(ws, "ws_gemm<Ws<128, 256, 4, 2, 8>>", threads=384)
print(f"✓ HGMMA 64x256x16, multicast TMA loads, TMA stores, the cluster barrier; setmaxnreg in effect "
      f"({regs['registers']} registers at entry); no spills")
""", "test_ws_sass", 2),
        md(r"""
### On a GPU: correct

05.02's shapes — one tile; ragged against 128 × 256 × 64 on every side; one row; an 8-wide C; long K
(8200); 2048³ — plus 2304 × 4104 × 256, which has more tiles than an H100 has SMs (each persistent
CTA computes several, and the ring's phases run on across them) and an odd number of tile rows (the
last cluster's second tile lies wholly below C: its loads are zeros, its stores are dropped). C is
poisoned with NaNs before each run.
"""),
        tests(r"""
grader.check(launch_ws, P.ws_gemm)
""", "test_ws_visible", 2),
        tests(r"""
grader.check(launch_ws, P.ws_gemm, sizes=[Shape(136, 264, 72)])
### BEGIN HIDDEN TESTS
grader.check(launch_ws, P.ws_gemm, hidden=True)
### END HIDDEN TESTS
""", "test_ws_hidden", 2),
        md(r"""
## Speed (graded)

4096³ against cuBLAS (torch.matmul) on the same A and B, in the same run. **Full points at 70% of
cuBLAS**, nothing at 35%. The course's goals for its reference: ≥ 95% at 4096³, ≥ 100% at 8192³.

**Measured on an H100** (2026-11-24, cuBLAS in the same run each time): through the judge, this
kernel 774 TFLOP/s = **99.1% of cuBLAS** (781 TFLOP/s) at 4096³; at 8192³, 820 TFLOP/s = **101%**
(cuBLAS 810; `dev/ch05_hopper/pipelines_gpu.py`, `results/ch05/pipelines_gpu_h100_2026-11-24_run2.log`,
spreads ≤ 0.4%). Nsight Compute at 8192³: the tensor pipe is busy 98% of the kernel's cycles (cuBLAS
97%). In the same run, at 4096³ / 8192³: 05.02's kernel 88% / 94%; specialized and persistent in
row order 97% / 85% (at 8192³ a wave in row order spans every column of B: L2 misses); grouped 100%
/ 100%; with clusters and multicast 99% / 101%; CUTLASS's collective builder (below) 98% / 98%; 3
slots instead of 4 94% / 98%; 128 × 128 tiles with 6 slots 77% / 78%. The lesson's first GPU run
released slots with `mbarrier.arrive.release.cluster`: ptxas put a `MEMBAR.ALL.GPU` before every
arrival, and every cluster kernel ran at 42% — right, and slow.
"""),
        tests(r"""
grader.speed(launch_ws, P.ws_gemm, points=3)
""", "speed_ws", 3),
        md(r"""
## The same GEMM with CUTLASS 3.x

CUTLASS builds this kernel from three layers, each a type:

- **collectives** — what one CTA does. `gemm::collective::CollectiveBuilder<Sm90, OpClassTensorOp,
  bf16, RowMajor, 8, bf16, RowMajor, 8, float, TileShape, ClusterShape, StageCount, Schedule>`
  picks the TMA copies (multicast along the cluster), the shared-memory layouts and swizzle, the
  wgmma atom (here `MMA_64x256x16_F32BF16BF16_SS` with B transposed), and the pipeline
  (`PipelineTmaAsync`: exactly your full/empty ring). `StageCountAutoCarveout` fills shared memory
  after the epilogue's share. The epilogue builder does the same for the store of D (TMA, through
  shared memory, as yours).
- **the kernel** — `gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>`: the warp roles
  (with `KernelTmaWarpSpecializedCooperative`: a producer and two consumer warpgroups sharing one
  tile, setmaxnreg included), the persistent tile scheduler, the cluster launch.
- **the device layer** — `gemm::device::GemmUniversalAdapter<Kernel>`: host code that checks the
  arguments (`can_implement`), encodes the TMA descriptors (`initialize`) and launches (`run`).

Because the device layer is host code, this cell is built by **nvcc** into a shared library
(`%%nvcc`, `grader.cuda.host`) that Python calls through ctypes, not by NVRTC like the `%%cuda`
cells; it needs the CUDA toolkit (nvcc and a host compiler) and takes about a minute to build (the
judge's run of your notebook skips it). It earns no points: it is here to be read, checked and timed
beside your kernel.
"""),
        code(cell("cutlass_cell.cu"), "cutlass_cell"),
        code(r"""
# What CUTLASS built: its kernel's machine code holds the same instructions as yours.
launch_cutlass = P.cutlass_gemm_launch(cl) if globals().get("cl") else None
if launch_cutlass:
    print(sass.require(cl.module, "device_kernel", present=["HGMMA.64x256x16.F32.BF16", "UTMALDG", "USETMAXREG"],
                       absent=["LDL", "STL"]).summary())
""", "cutlass_launch"),
        md(r"""
## The ladder

Your kernel in three configurations — warp-specialized and persistent in row order, then grouped,
then with clusters and multicast (the graded one) — and CUTLASS's, each against cuBLAS in the same
run at 4096³. Without a Hopper GPU: the reference's recorded run.
"""),
        code(r"""
from grader.cuda import compile_cuda

configs = {"v1 specialized, persistent, row order": "ws_gemm<Ws<128, 256, 4, 1, 0>>",
           "v2 + grouped order": "ws_gemm<Ws<128, 256, 4, 1, 8>>",
           "v3 + clusters of 2, multicast": "ws_gemm<Ws<128, 256, 4, 2, 8>>"}
hopper = not grader.SIMULATOR and grader.device.info().compute_capability == (9, 0)
versions = {}
if hopper:
    for label, k in configs.items():
        versions[label] = grader.measure(P.ws_gemm_launch(ws[k]), P.ws_gemm, label)
    if globals().get("launch_cutlass"):
        grader.check(launch_cutlass, P.ws_gemm, sizes=[Shape(1000, 1032, 1016), Shape(2304, 4104, 256)])
        versions["CUTLASS collective builder"] = grader.measure(launch_cutlass, P.ws_gemm, "CUTLASS collective builder")
if not (hopper or grader.SIMULATOR):
    print("the ladder needs a Hopper GPU (sm_90a); this one has", grader.device.info().compute_capability)
grader.ladder_plot(versions, P.ws_gemm, title="bf16 GEMM 4096³: % of cuBLAS (same run)") if hopper or grader.SIMULATOR else None
""", "ladder_ws"),
        md(r"""
## Stretch goals (no points)

- **Ping-pong**: give each consumer warpgroup its own tile (two tiles in flight per CTA) and let
  them take turns on the tensor cores, so one's epilogue hides under the other's wgmmas (CUTLASS's
  `KernelTmaWarpSpecializedPingpong`; FlashAttention-3 does the same in lesson 05).
- Clusters of 2 along N instead (multicast A), or 2 × 2 (multicast both): change `tile_of`, the
  masks and the `empty` count.
- A Hilbert curve instead of groups for the tile order; measure L2 hit rate with Nsight Compute
  (`lts__t_sector_hit_rate.pct`).
- In the CUTLASS cell: `KernelTmaWarpSpecializedPingpong` with `TmaWarpSpecialized`, tile 128 × 128,
  cluster 1 × 2; `StageCount<5>` instead of the carve-out. Which wins at 4096³? At 8192³?
"""),
    ]
