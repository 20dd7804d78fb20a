"""05.01 TMA and mbarrier (CUDA C++, sm_90): tensor maps from Python, bulk tensor loads and stores,
mbarrier expect-tx and phase parity, the async-proxy fence; a transpose moved entirely by TMA."""
from tools.ch05_hopper import cell
from tools.nbbuild import code, md, solution, tests

NAME = "01_tma.ipynb"


def cells():
    return [
        md(r"""
# 05.01 TMA and the mbarrier

**What you will learn**
- why Hopper copies tiles with the **Tensor Memory Accelerator** (TMA): one thread asks for a whole
  box, a copy engine beside the SM generates every address, and no register holds the data;
- **tensor maps**: the 128 bytes that describe a tensor to TMA (address, sizes, row strides, box,
  swizzle, what to read past the edge), encoded on the host through the CUDA driver from Python and
  passed to the kernel by value as a `__grid_constant__` parameter;
- the **mbarrier**: arrivals plus an *expected transaction count* in bytes, phases and their
  **parity**, and why a ring of slots flips the parity it waits for;
- the **async proxy**: TMA does not see your shared-memory stores in order until you fence them
  (`fence.proxy.async`);
- the exercise: chapter 01's transpose again, every byte loaded and stored by TMA, the transpose
  itself in 128-byte-swizzled shared memory without a bank conflict.

**Builds on:** 01.03 (coalescing and the shared-memory transpose), 03.04 (compiled cells, the launch
contract, shared-memory swizzles). CUDA C++ for a GPU with TMA (compute capability 9.0: H100/H200,
and Blackwell). Without one the kernel is compiled for sm_90a and graded on its machine code; the
correctness and speed cells say "compiled and inspected only".
"""),
        code(r"""
import grader
import numpy as np
from grader.cuda import sass, tma
from grader.plot import subplots
from grader.problems import hopper as P

print(grader.mode(), "| compiling for", grader.cuda.default_arch())
""", "setup"),
        md(r"""
## Why TMA

In 01.03 every thread of the transpose computed addresses, issued loads, waited for them in
registers and stored them to shared memory; `cp.async` (03.04) skipped the registers but still
needed one instruction per 16 bytes from every thread. On Hopper a **single thread** hands the copy
engine a tensor map and the coordinates of a box — here 32 × 32 floats, 4 KiB — and the engine
walks the rows, clips or zero-fills at the tensor's edges, swizzles the box into shared memory and,
when the last byte lands, counts it on an **mbarrier**. The other 127 threads of the block are free
the whole time, and so is the register file. Stores run the same way backwards: `cp.async.bulk.tensor`
from shared memory to a box of the output.

**Napkin math.** The graded transpose is 8192 × 8192 fp32: 256 MiB read, 256 MiB written, 537 MB in
all. At an H100's copy bandwidth (≈ 3.0 TB/s) that is **≈ 179 µs**, and the transpose can do no
better: it moves the same bytes as a copy. Per SM that is only ≈ 13 bytes per clock of DRAM
traffic; the box makes it through shared memory four times (TMA in, read, write, TMA out), 52 B/clk
against the 128 B/clk shared memory serves — if no access conflicts.

**The box over the tensor** (left): a block owns a strip of boxes down one column of boxes of `a`.
The boxes at the right and bottom edges stick out of the tensor: TMA reads zeros there and drops the
writes, so the kernel has no bounds checks at all. **The 128-byte swizzle** (right): a box row is 128
bytes, eight 16-byte chunks; TMA stores chunk *j* of row *r* at chunk *j* XOR (*r* mod 8). Reading a
column of the box — which a transpose must — then touches eight different chunks in eight rows
instead of one bank eight times. Shared memory cannot be padded under TMA (the box lands dense), so
the swizzle is how the transpose avoids bank conflicts here; it is also the layout WGMMA reads in
lesson 02.
"""),
        code(r"""
from matplotlib.patches import Rectangle

M, N, B, TILES = 150, 100, 32, 2           # a small `a`, the 32 × 32 box, strips of 2 boxes (the kernel: 8)
fig, (ax, ax2) = subplots(1, 2, figsize=(10.5, 4.2), gridspec_kw={"width_ratios": [1.25, 1]})
ax.add_patch(Rectangle((0, 0), N, M, fc="#dde8f5", ec="k", lw=1.5, label="a (150 × 100 fp32)"))
for by in range(-(-M // B)):
    for bx in range(-(-N // B)):
        x, y = bx * B, by * B
        ragged = x + B > N or y + B > M
        ax.add_patch(Rectangle((x, y), B, B, fill=False, ec="#c44" if ragged else "0.45", lw=1, ls="--" if ragged else "-"))
        if x + B > N:
            ax.add_patch(Rectangle((N, y), x + B - N, B, fc="none", ec="#c44", hatch="///", lw=0))
        if y + B > M:
            ax.add_patch(Rectangle((x, M), min(B, N - x), y + B - M, fc="none", ec="#c44", hatch="///", lw=0))
strip = 1                                   # one block's strip: box column 1, box rows 2 and 3
for i in range(TILES):
    ax.add_patch(Rectangle((strip * B, (2 + i) * B), B, B, fc="#f2b134", alpha=0.8, ec="k"))
    ax.text(strip * B + B / 2, (2 + i) * B + B / 2, f"box {i}\n{{{strip * B}, {(2 + i) * B}}}", ha="center", va="center", fontsize=7)
ax.set_xlim(-4, 4 * B + 6); ax.set_ylim(5 * B + 6, -4); ax.set_aspect("equal")
ax.set_xlabel("column (innermost: the first coordinate)"); ax.set_ylabel("row")
ax.set_title("32 × 32 boxes over a; hatched: past the edge (zeros in, writes dropped)", fontsize=9)
rows = np.arange(16)[:, None]
phys = (np.arange(8)[None, :] ^ (rows % 8))               # where chunk j of row r is stored
ax2.imshow(phys, cmap="tab10", aspect="auto")
for r in range(16):
    for j in range(8):
        ax2.text(j, r, str(phys[r, j]), ha="center", va="center", fontsize=7, color="w")
ax2.set_xlabel("16-byte chunk j of the box row (4 floats: columns 4j … 4j+3)"); ax2.set_ylabel("box row r")
ax2.set_title("128-byte swizzle: chunk j of row r is stored at j XOR (r mod 8)", fontsize=9)
fig.tight_layout()
fig
""", "box_picture"),
        md(r"""
## The mbarrier: expect-tx, phases and parity

An mbarrier is 8 bytes of shared memory that counts, in its current **phase**, the arrivals still
due (set at `mbarrier.init`) and the **transaction bytes** still due. The producer thread calls
`mbarrier.arrive.expect_tx(bar, 4096)` — one arrival, and 4096 more bytes expected — then issues the
TMA load naming the same barrier; the copy engine lowers the byte count as the box lands. When both
counts reach zero the phase **completes** and the next phase begins, with the counts reset.

Phases are numbered 0, 1, 2, … and a waiter names only the **parity** (phase mod 2) of the phase it
waits for: `mbarrier.try_wait.parity(bar, p)` is true once the phase of parity *p* has completed —
and, for a barrier in phase *k*, at once for parity (*k* − 1) mod 2, the phase just before. So with a
ring of S slots, box *i* goes to slot *i* mod S, which is used for the ⌊*i* / S⌋-th time: wait for
parity ⌊*i* / S⌋ mod 2. Waiting for the wrong parity returns at once, before the data has landed —
and worse: the leader then arms the slot again while its phase is still pending, the barrier's counts
go wrong, and a later wait never returns (on an H100 a 1000 × 4 transpose hung this way). Expecting
the wrong number of bytes hangs at once: a phase that waits for bytes that never come never
completes. The grader stops such a kernel after `GRADER_GPU_TIMEOUT` seconds (60) and says so; the GPU
is then unusable until you restart the notebook's kernel.

**The other direction.** The transposed box is written to shared memory by ordinary `st.shared`
instructions; the TMA store reads it through the *async proxy*, which is not ordered with them. Each
writing thread executes `fence.proxy.async.shared::cta`, the block syncs, and only then does one
thread issue the store. Stores are tracked in *bulk groups*: `cp.async.bulk.commit_group`, then
`cp.async.bulk.wait_group.read N` before a slot the store is still reading is written again (and
before the block exits: its shared memory must outlive the read).
"""),
        code(r"""
S, BOXES = 2, 6                              # a ring of 2 slots, a strip of 6 boxes
fig, ax = subplots(figsize=(10, 2.8))
colors = ["#4c72b0", "#dd8452"]
for i in range(BOXES):
    s, k = i % S, i // S
    t_issue = 0 if i < S else 2 * (i - S) + 2            # box i is loaded once box i - S is transposed
    t_land, t_done = t_issue + 1.6, 2 * i + 2
    ax.broken_barh([(t_issue, t_land - t_issue)], (s - 0.35, 0.3), fc=colors[s], alpha=0.35)
    ax.broken_barh([(max(t_land, 2 * i), 2)], (s + 0.05, 0.3), fc=colors[s], alpha=0.9)
    ax.text(t_issue + 0.05, s - 0.2, f"TMA box {i} (expect-tx 4 KiB)", fontsize=7, va="center")
    ax.text(max(t_land, 2 * i) + 0.05, s + 0.2, f"wait parity {k % 2} (phase {k}) → transpose, store {i}",
            fontsize=7, va="center", color="w")
ax.set_yticks(range(S)); ax.set_yticklabels([f"slot {s}: full[{s}]" for s in range(S)])
ax.set_ylim(S - 0.4, -0.6); ax.set_xlabel("time (schematic)")
ax.set_title("a 2-slot ring: slot i mod 2 holds box i; its barrier's phase ⌊i/2⌋ completes when the box lands", fontsize=9)
fig.tight_layout()
fig
""", "parity_picture"),
        md(r"""
## Tensor maps from Python

The driver encodes a map with `cuTensorMapEncodeTiled`; `grader.cuda.tma.tiled_2d(tensor, box,
swizzle)` calls it through `cuda.bindings` with the tensor's address, its sizes and row stride
(innermost dimension first), the box, the swizzle, and "fill with zeros" past the edges. The kernel
takes the map as `const __grid_constant__ course::TensorMap` (128 bytes, 64-byte aligned): it stays
in the kernel's parameter space and TMA reads it from there, by its address — no copy to global memory.

TMA has rules: rows must start a **multiple of 16 bytes** apart, a box side is at most 256
elements, a box row is a multiple of 16 bytes, and with the 128-byte swizzle a box row is at most
128 bytes (so 32 floats). For the transpose, `a` (M, N) and `t` (N, M) both need rows a multiple of
16 bytes: **M and N multiples of 4**. The graded sizes keep that rule and are ragged against the box
everywhere else; the launch function refuses other shapes with a message. `tma.layout_problems`
states the rules without a GPU:
"""),
        code(r"""
for shape in [(1020, 516), (1023, 517)]:
    why = tma.layout_problems(shape, row_stride_bytes=4 * shape[1], itemsize=4, box=(32, 32), swizzle="128B")
    print(shape, "→", why or "TMA can describe it")
print(tma.layout_problems((64, 64), 256, 4, box=(32, 64), swizzle="128B"))
""", "rules"),
        md(r"""
## The kernel

`tma_transpose<Tp<8, 2>>`: a block of 128 threads owns a strip of 8 boxes down one box column of `a`
(256 × 32 floats); its boxes stream through a ring of 2 slots. Thread 0 (the *leader*) initialises the
barriers, fills the ring, and after each box issues the store and the next load. Everyone waits for
the box, transposes it from `a`'s swizzled slot into `t`'s swizzled slot (lane bits arranged so that
a warp's 32 reads and its 32 writes each hit 32 different banks), and fences. Box (row *m*, column *n*)
of `a` becomes box (row *n*, column *m*) of `t`; coordinates are `{column, row}`.

### Exercise (about 9 lines in four places)

1. `issue_load(i)`: `mbar_arrive_expect_tx` on slot s's barrier for one box's bytes, then `tma_load_2d`
   into slot s at `{column, row}` of box i of the strip: 2 lines.
2. The wait: box i is slot s's ⌊i / S⌋-th use — wait for that parity: 1 line.
3. The transpose step: `t_box` at (c, r) takes `a_box` at (r, c), both through `swz`: 1 line.
4. Hand the box to TMA: the proxy fence, the block barrier, and (leader only) the store at `{column,
   row}` of `t` and the commit: 5 lines.

The helpers are in `grader/include/tma.cuh`, one PTX instruction each.
"""),
        solution(cell("tma_cell.cu"), "v_tma"),
        code(r"""
# The boxes (TILE_N × TILE_N), the strip (TILE_M), block size and shared memory come from the type;
# the launch function encodes both tensor maps (grader.cuda.tma.tiled_2d) and derives the grid.
launch_tma = P.tma_transpose_launch(tp["tma_transpose<Tp<8, 2>>"])
print("tma_transpose<Tp<8, 2>> launches with", tp["tma_transpose<Tp<8, 2>>"].launch_shape)
""", "launch"),
        md(r"""
### Graded without a GPU: the machine code

The kernel holds the TMA load and store (`UTMALDG`, `UTMASTG`), the mbarrier's transaction arrive and
its parity wait (`SYNCS.ARRIVE.TRANS64`, `SYNCS.PHASECHK`), no ordinary global load or store at all
(every byte moves by TMA), and no local memory; and in program order, between the last shared-memory
store (`STS`) and the TMA store, the async-proxy fence (`FENCE.VIEW.ASYNC.S`: `fence.mbarrier_init`
compiles to the same opcode, so its mere presence proves nothing).
"""),
        tests(r"""
sass.require(tp, "tma_transpose<Tp<8, 2>>",
             present=["UTMALDG.2D", "UTMASTG.2D", "SYNCS.ARRIVE.TRANS64", "SYNCS.PHASECHK", "FENCE.VIEW.ASYNC.S"],
             absent=["LDG", "STG", "LDL", "STL"], no_spills=True)
sass.require_fence(tp, "tma_transpose<Tp<8, 2>>", writes="STS", fence="FENCE.VIEW.ASYNC.S", reader="UTMASTG")
print("✓ the machine code holds the TMA load and store, the mbarrier, the proxy fence between the shared-memory "
      "stores and the TMA store; no LDG/STG, no spills")
""", "test_tma_sass", 2),
        md(r"""
### On a GPU: correct

One box (4 × 4), a single row or column of boxes, shapes ragged against the box on both sides
(1020 × 516: the last box column holds 4 of its 32 columns), and a large square. The output is poisoned
before each run, so a box never stored cannot pass.
"""),
        tests(r"""
grader.check(launch_tma, P.tma_transpose)
""", "test_tma_visible", 2),
        tests(r"""
grader.check(launch_tma, P.tma_transpose, sizes=[(36, 68)])
### BEGIN HIDDEN TESTS
grader.check(launch_tma, P.tma_transpose, hidden=True)
### END HIDDEN TESTS
""", "test_tma_hidden", 2),
        md(r"""
## Speed (graded)

8192 × 8192 fp32 against a device-to-device copy of as many bytes, in the same run. **Full points at
70% of copy**, nothing at 35% (where 01.03's naive transpose sits). The course's goal for its
reference: ≥ 90% of copy.

**Measured on an H100** (2026-11-24, through the judge, the copy peer in the same run): this kernel
2771 GB/s = **91.2% of copy** (`cudaMemcpy`, 3037 GB/s), 0.2 ms — the 90% goal met. (Before the
grader's L2 flush became a read, which no longer leaves dirty lines for the timed kernel to write
back, the same kernel measured 89.6% of 3009 GB/s.) Strips
of 4 boxes reached 90% in a sweep, within its 0.4% spread; longer strips (16, 32 boxes) were slower
(85–88%): fewer blocks, a longer tail. 01.03's padded-tile transpose in Numba reached 57% (H200).
"""),
        tests(r"""
grader.speed(launch_tma, P.tma_transpose, points=3)
""", "speed_tma", 3),
        md(r"""
## The ladder

The TMA transpose as a share of the copy bandwidth, beside torch's `a.t().contiguous()` on the same
tensor in the same run. Without a GPU: the reference's recorded run.
"""),
        code(r"""
from grader import peers

versions = {"v1 TMA, 128B swizzle, 2 slots": launch_tma}
extra = []
if not grader.SIMULATOR and grader.device.info().compute_capability >= (9, 0):
    versions["v1 TMA, 128B swizzle, 2 slots"] = ours = grader.measure(launch_tma, P.tma_transpose, "v1 TMA, 128B swizzle, 2 slots")
    vs_torch = grader.measure(launch_tma, P.tma_transpose, "v1 vs torch",
                              peer=peers.torch_op("torch a.t().contiguous()", lambda a: a.t().contiguous()))
    print(vs_torch)
    extra = [("torch a.t().contiguous()", ours.fraction / vs_torch.fraction)]
grader.ladder_plot(versions, P.tma_transpose, extra=extra,
                   title="transpose 8192² fp32: % of copy bandwidth (same run)")
""", "ladder"),
        md(r"""
## Stretch goals (no points)

- Try `Tp<4, 2>`, `Tp<16, 3>`: how deep must the ring be, and how long the strip, before the copy
  engine stays busy? (Add `-k "tma_transpose<Tp<16, 3>>"` to the cell's first line.)
- Encode the maps without the swizzle (`swizzle="none"`) and read the box plainly: count the bank
  conflicts with Nsight Compute (`l1tex__data_bank_conflicts_pipe_lsu_mem_shared`).
- A bf16 transpose: the box row becomes 64 elements; a 16-bit transpose in shared memory wants pairs
  of rows packed with `prmt` (or `ldmatrix.trans`, 03.04) so that each store is 32 bits.
- Let one warp be the producer and the others consumers, with a second barrier per slot
  ("empty") instead of `__syncthreads` — lesson 03's warp specialization in miniature.
"""),
    ]
