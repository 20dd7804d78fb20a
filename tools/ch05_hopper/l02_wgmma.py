"""05.02 WGMMA (CUDA C++, sm_90a): warpgroups, shared-memory matrix descriptors and the 128-byte
swizzle, wgmma fence / commit / wait; a TMA + WGMMA bf16 GEMM fed by a multi-stage ring (no warp
specialization: that is lesson 03)."""
from tools.ch05_hopper import cell
from tools.nbbuild import code, md, solution, tests

NAME = "02_wgmma.ipynb"
KERNEL = "wgmma_gemm<Wg<128, 256, 4>>"


def cells():
    return [
        md(r"""
# 05.02 WGMMA: Hopper's warpgroup MMA

**What you will learn**
- the **warpgroup**: four consecutive warps (128 threads) that issue one `wgmma.mma_async`
  together — a 64 × N × 16 product (N up to 256) that reads A and B **straight from shared
  memory**, with no `ldmatrix` and no fragments in registers except the fp32 accumulator;
- the **shared-memory matrix descriptor**: 64 bits that tell the tensor core where a tile starts,
  how its 8-row blocks are spaced (LBO, SBO) and which **swizzle** TMA wrote it with;
- **asynchrony**: `wgmma.fence` before the accumulators are used by a wgmma, `commit_group` to
  close a batch, `wait_group N` to let all but N batches finish — and why the pipeline's slot
  may be refilled only after the wait;
- the exercise: a bf16 GEMM whose every byte of A and B arrives by TMA (05.01) into a 4-slot ring
  and is consumed by two warpgroups, each computing 64 × 256 of a 128 × 256 tile of C.

**Builds on:** 03.04 (mma.sync, the m16n8 accumulator fragment, cp.async pipelines, the launch
contract), 05.01 (TMA, tensor maps, the mbarrier and its parity, the 128-byte swizzle). CUDA C++
for **sm_90a** — wgmma exists only on Hopper (H100/H200; Blackwell has `tcgen05`, lesson 06). Without
a Hopper GPU the kernel is compiled for sm_90a and graded on its machine code; the correctness and
speed cells say "compiled and inspected only: running it needs a Hopper GPU". The cell names
its target (`--arch sm_90a`), so it compiles for Hopper on any machine, whatever GPU is there.
"""),
        code(r"""
import grader
import numpy as np
from grader.cuda import sass
from grader.plot import subplots
from grader.problems import hopper as P
from grader.problems.gemm import Shape

print(grader.mode(), "| compiling for", grader.cuda.default_arch())
""", "setup_wg"),
        md(r"""
## From mma.sync to wgmma

In 03.04 each warp loaded its A and B fragments from shared memory with `ldmatrix` and issued
`mma.sync m16n8k16`: 4096 FLOPs per instruction, its operands in registers, the warp stalled
until the result came back. On Hopper that path reaches about two thirds of the tensor cores'
rate (03.04 measured 63.5% of cuBLAS). `wgmma.mma_async.m64nNk16` is issued by a **warpgroup**:
the four warps of one block whose first warp index is a multiple of 4 — one warp per SM
sub-partition, so one wgmma drives all four of the SM's tensor cores. One m64n256k16 is
2·64·256·16 = **524,288 FLOPs** (128 mma.syncs). A and B come from shared memory through
descriptors; only D, the fp32 accumulator, lives in registers: 64 × 256 floats over 128 threads,
**128 registers per thread**. And the instruction is **asynchronous**: it returns at once, the
tensor cores work on, and the threads must not touch the accumulators (nor overwrite the tiles)
until they wait for it.

**Napkin math.** The graded GEMM is 4096 × 4096 × 4096 in bf16: 2·4096³ = **137 GFLOP**. A, B and
C are 32 MiB each: 101 MB if each is moved once — 34 µs at 3 TB/s, while 137 GFLOP at cuBLAS's 767
TFLOP/s (H100, this course's run of 2026-11-24) take **179 µs**: compute-bound five times over. Per
block, one k step of 64 loads 128 × 64 + 64 × 256 bf16 = 48 KiB into shared memory and computes
2 · 128 · 256 · 64 = 4.2 MFLOP: 85 FLOPs per byte. Over the whole grid, each of the 512 blocks
reads (128 + 256) · 4096 · 2 B = 3 MiB from L2: **1.6 GB**, 16× the DRAM minimum — why tiles
are as large as the registers allow (and why lesson 03 multicasts tiles across a cluster).

## The accumulator fragment

Which thread holds which element of the 64 × N result? Warp *w* of the warpgroup owns rows 16*w* …
16*w* + 15, and inside them the layout is mma.sync's m16n8 C fragment (03.04), repeated every 8
columns: lane *l* (*g* = *l* / 4, *q* = *l* mod 4) holds, in its element *i*, row 16*w* + *g* + 8·⌊*i*/2⌋ mod 2
and column 8·⌊*i*/4⌋ + 2*q* + (*i* mod 2). `course::wgmma_acc_row(i)` / `wgmma_acc_col(i)` in
`grader/include/wgmma.cuh` compute it. Elements *i* and *i* + 1 are neighbours in a row: the
epilogue stores them as one 4-byte bf16 pair.
"""),
        code(r"""
from matplotlib.patches import Rectangle

def acc_owner(row, col):
    # (thread of the warpgroup, element i) that holds D[row, col] of a 64 × N wgmma accumulator
    w, r = divmod(row, 16)
    g, h = r % 8, r // 8
    j, c = divmod(col, 8)
    q, e = divmod(c, 2)
    return 32 * w + 4 * g + q, 4 * j + 2 * h + e

fig, (ax, ax2) = subplots(1, 2, figsize=(11, 5.2), gridspec_kw={"width_ratios": [1, 1.35]})
N = 256
warp = np.array([[acc_owner(r, c)[0] // 32 for c in range(N)] for r in range(64)])
ax.imshow(warp, cmap="Pastel1", aspect="auto", vmin=0, vmax=8)
for w in range(4):
    ax.text(N / 2, 16 * w + 7.5, f"warp {w}: rows {16 * w}–{16 * w + 15}\n(threads {32 * w}–{32 * w + 31}, 128 floats each)",
            ha="center", va="center", fontsize=8)
ax.add_patch(Rectangle((-0.5, -0.5), 16, 16, fill=False, ec="k", lw=1.5))
ax.set_xlabel("column of D (N = 256)"); ax.set_ylabel("row of D")
ax.set_title("64 × 256 fp32 accumulator of one warpgroup", fontsize=9)
R, C = 16, 16                                    # the zoom: warp 0, columns 0–15
lane = np.array([[acc_owner(r, c)[0] for c in range(C)] for r in range(R)])
ax2.imshow(lane % 4, cmap="Pastel2", aspect="auto")
for r in range(R):
    for c in range(C):
        t, i = acc_owner(r, c)
        ax2.text(c, r, f"T{t}\nd[{i}]", ha="center", va="center", fontsize=5.5)
ax2.set_xticks(range(C)); ax2.set_yticks(range(R))
ax2.set_xlabel("column (colour: q = lane mod 4, which column pair)"); ax2.set_ylabel("row (g = lane / 4, + 8 for i mod 4 ≥ 2)")
ax2.set_title("the framed corner: thread T holds D[row, col] in its element d[i]", fontsize=9)
fig.tight_layout()
fig
""", "fragment_picture"),
        md(r"""
## Descriptors and the 128-byte swizzle

A wgmma names each shared-memory operand by a 64-bit **matrix descriptor**:

| bits | field | in the lesson's kernel |
|---|---|---|
| 0–13 | start address ÷ 16 | the slot's tile (+ 32 B per k16 step for A, + 2048 B for B) |
| 16–29 | leading-dimension byte offset (LBO) ÷ 16 | A: unused with a swizzle (16); B: 8192, from one 64-wide column block of N to the next |
| 32–45 | stride-dimension byte offset (SBO) ÷ 16 | 1024 for both: from one 8-row block (8 × 128 B) to the next |
| 49–51 | base offset | 0: every tile starts on a 1024-byte boundary |
| 62–63 | swizzle | **1 = 128-byte** (2 = 64 B, 3 = 32 B, 0 = none) |

The tensor core then reads the tile the way TMA wrote it. With the 128-byte swizzle a tile is made
of **atoms** of 8 rows × 128 bytes (1 KiB): row *r* of an atom keeps its eight 16-byte chunks, but
chunk *j* is stored at position *j* XOR *r* — the same pattern 05.01 transposed through. The
descriptor's swizzle field must name the **same** swizzle as the tensor map, in its own encoding
(the driver's `CU_TENSOR_MAP_SWIZZLE_128B` is 3, the descriptor's code is 1).

**A is K-major** (row-major A: k runs along a row): TMA writes the block's 128 × 64 slice of A as
128 rows of 128 bytes. A k16 step is 32 bytes of every row — two chunks, scattered by the swizzle
(left, below) — and yet the descriptor simply moves its start address by 32 B: the hardware applies
the XOR to the addresses it forms, as TMA did. **B is N-major** (row-major B: n runs along a row),
so `imm-trans-b = 1`: each 64-wide block of N is one TMA box of 64 rows of k × 128 bytes, a k16 step
is 16 whole rows (+2048 B), the 8-row atoms of k are SBO = 1024 B apart, and the next 64 columns of
N are LBO = 8192 B away (the next box).
"""),
        code(r"""
from matplotlib.patches import Rectangle

fig, (ax, ax2) = subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [1, 1.5]})
rows = 16                                            # two atoms of A's tile: rows 0–15, 8 chunks of 8 bf16
grid = np.full((rows, 8), -1)
for r in range(rows):
    for j in range(8):
        grid[r, j ^ (r % 8)] = j // 2                  # logical chunk j (k = 8j … 8j+7) sits at position j ^ r
ax.imshow(grid, cmap="tab10", vmin=0, vmax=9, aspect="auto")
for r in range(rows):
    for p in range(8):
        j = p ^ (r % 8)
        ax.text(p, r, f"k{8 * j}–{8 * j + 7}", ha="center", va="center", fontsize=6)
ax.axhline(7.5, color="k", lw=2)
ax.set_xticks(range(8)); ax.set_xticklabels([f"{16 * p}" for p in range(8)])
ax.set_xlabel("byte offset in the 128-byte row (16-byte chunks)"); ax.set_ylabel("row m of A's tile (an atom = 8 rows, 1 KiB)")
ax.set_title("A (K-major), 128B swizzle: colour = k16 step 0, 1, 2, 3\n(the descriptor's start moves by 32 B per step)", fontsize=9)

def desc(start, lbo, sbo, swizzle):
    return ((start & 0x3FFFF) >> 4) | (((lbo & 0x3FFFF) >> 4) << 16) | (((sbo & 0x3FFFF) >> 4) << 32) | (swizzle << 62)

fields = [("start ÷ 16", 0, 14), ("", 14, 2), ("LBO ÷ 16", 16, 14), ("", 30, 2), ("SBO ÷ 16", 32, 14),
          ("", 46, 3), ("base", 49, 3), ("", 52, 10), ("swz", 62, 2)]
for y, (label, d) in enumerate([("A, slot 0, k step 1", desc(0x0400 + 32, 16, 1024, 1)),
                                ("B, slot 0, k step 1", desc(0x4400 + 2048, 8192, 1024, 1))]):
    for name, lo, width in fields:
        val = (d >> lo) & ((1 << width) - 1)
        ax2.add_patch(Rectangle((64 - lo - width, y * 1.6), width, 1, fc="#f2b134" if name else "0.9", ec="k"))
        if name and width >= 8:
            ax2.text(64 - lo - width / 2, y * 1.6 + 0.5, f"{name}\n{val}", ha="center", va="center", fontsize=7)
        elif name:                                   # narrow fields: the label above the box
            ax2.text(64 - lo - width / 2, y * 1.6 - 0.1, f"{name} {val}", ha="center", va="bottom", fontsize=7)
    ax2.text(64.5, y * 1.6 + 0.5, f"{label}\n0x{d:016x}", ha="left", va="center", fontsize=8)
    ax2.text(0, y * 1.6 + 1.05, "63", fontsize=6, va="top"); ax2.text(64, y * 1.6 + 1.05, "0", fontsize=6, va="top", ha="right")
ax2.set_xlim(-1, 84); ax2.set_ylim(3, -0.8); ax2.axis("off")
ax2.set_title("the 64-bit descriptors (bit 63 on the left); addresses as in a slot at 0x0400", fontsize=9)
fig.tight_layout()
fig
""", "descriptor_picture"),
        md(r"""
## Fence, commit, wait

```
mbar_wait(full[s])          the slot's A and B have landed (05.01's mbarrier)
wgmma_fence()               the accumulators' registers are ready for the tensor cores
4 × wgmma m64n256k16        k = 0, 16, 32, 48 of this slot, accumulating into acc
wgmma_commit()              close the four into one group
wgmma_wait<1>()             all but the newest group done: the *previous* slot is free
__syncthreads(); refill     the leader loads k tile kt − 1 + STAGES into that slot
```

`wgmma.fence` orders the threads' own register accesses before a wgmma: the accumulators were
zeroed by ordinary instructions, and in general any register a wgmma reads or writes that ordinary
code touched needs it. (ptxas, finding no fence where it sees the hazard, inserts the
`WARPGROUP.ARRIVE` itself — the SASS is identical without it — but the PTX ISA leaves such a kernel
undefined, so the rubric reads your source for the fence.) `wait_group 1` leaves the group just
committed running while this warpgroup's previous group has finished reading its slot: after the
block barrier (the other warpgroup too) the leader may overwrite it. `wait_group 2` here (or no
wait at all) lets TMA overwrite a tile a wgmma may still be reading: a race, which on an H100 the
values did not show in any of the graded sizes — the rubric catches it instead, from the
`WARPGROUP.DEPBAR` in the machine code. Reading `acc` after the loop with anything but
`wait_group 0` makes ptxas wait after **every** wgmma (its note C7514: "wgmma.mma_async
instructions are serialized") — right, and slower (72% of cuBLAS instead of 88% on an H100).

No warp specialization yet: the same threads wait for data, issue the MMAs and (one of them) the
loads. The ring keeps STAGES − 1 k tiles in flight ahead of the tensor cores, which is enough to
hide TMA's latency; lesson 03 gives loading its own warpgroup.

### Exercise (about 10 lines in four places)

1. The two descriptors of slot s: `course::make_smem_desc(address, LBO, SBO, course::DESC_SWIZZLE_128B)`
   for A (this warpgroup's 64 rows, K-major) and for B (N-major, TILE_N / 64 boxes side by side): 2 lines.
2. `wgmma_fence()`, then one `course::wgmma_bf16<0, 1>(acc, desc_a, desc_b)` per 16 of K (`desc_advance`
   moves a descriptor: A by 32 B, B by 16 rows of 128 B), then `wgmma_commit()`: 4 lines.
3. The wait that frees the previous slot: 1 line.
4. The epilogue: element i's row and column (`course::wgmma_acc_row/col`), and the guarded store of
   the pair (i, i + 1) with `course::pack_bf16x2`: 3 lines.
"""),
        solution(cell("wgmma_cell.cu"), "v_wgmma"),
        code(r"""
# Tiles, stages, threads and shared memory come from the type; the launch function encodes A's and
# B's tensor maps (boxes TILE_M × 64 and 64 × 64) and launches one block per 128 × 256 tile of C.
launch_wg = P.wgmma_gemm_launch(wg["wgmma_gemm<Wg<128, 256, 4>>"])
print("wgmma_gemm<Wg<128, 256, 4>> launches with", wg["wgmma_gemm<Wg<128, 256, 4>>"].launch_shape)
""", "launch_wg"),
        md(r"""
### Graded without a GPU: the machine code

The kernel holds the wgmma at the expected shape (`HGMMA.64x256x16.F32.BF16`: m64n256k16, fp32
accumulators, bf16 operands; `.tnspB` on B), the TMA loads (`UTMALDG.2D`) and the mbarrier wait, no
`ldmatrix`, shared-memory or global loads (the tensor cores read shared memory themselves), no
`mma.sync` (`HMMA`), no spills. And wgmma's ordering: a `wgmma_fence` in the source; no wgmma
serialized by ptxas; every `WARPGROUP.DEPBAR` (`wgmma.wait_group N`) with N ≤ 1; and a
`WARPGROUP.DEPBAR` between the last `HGMMA` and every TMA load that follows it (the refill).
"""),
        tests(r"""
sass.require(wg, "wgmma_gemm<Wg<128, 256, 4>>",
             present=["HGMMA.64x256x16.F32.BF16", "UTMALDG.2D", "SYNCS.PHASECHK", "WARPGROUP.ARRIVE"],
             absent=["LDSM", "LDS", "LDG", "HMMA", "LDL", "STL"], no_spills=True)
sass.require_wgmma(wg, "wgmma_gemm<Wg<128, 256, 4>>", max_pending=1)
sass.require_fence(wg, "wgmma_gemm<Wg<128, 256, 4>>", writes="HGMMA", fence="WARPGROUP.DEPBAR.LE", reader="UTMALDG",
                   why="wgmma.wait_group before a slot the wgmmas read is loaded again")
print("✓ HGMMA 64x256x16 bf16 → fp32 fed by TMA; the fence, the waits (≤ 1 group pending) before each refill; "
      "no ldmatrix, no mma.sync, no spills")
""", "test_wgmma_sass", 2),
        md(r"""
### On a GPU: correct

One tile; shapes ragged against 128 × 256 × 64 on every side (1000 × 1032 × 1016: the last k tile
holds 56 of its 64 columns, and TMA fills the other 8 with zeros); a single row of C; an 8-wide C;
a long K (8200: bf16 accumulation would be off by far more than the tolerance); a 2048³ square.
K and N are multiples of 8 (TMA's rows are 16-byte aligned; the launch refuses other shapes).
C is poisoned with NaNs before each run.
"""),
        tests(r"""
grader.check(launch_wg, P.wgmma_gemm)
""", "test_wgmma_visible", 2),
        tests(r"""
grader.check(launch_wg, P.wgmma_gemm, sizes=[Shape(136, 264, 72)])
### BEGIN HIDDEN TESTS
grader.check(launch_wg, P.wgmma_gemm, hidden=True)
### END HIDDEN TESTS
""", "test_wgmma_hidden", 2),
        md(r"""
## Speed (graded)

4096³ against cuBLAS (torch.matmul) on the same A and B, in the same run. **Full points at 50% of
cuBLAS**, nothing at 5%. The course's goal for its reference: ≥ 75%.

**Measured on an H100** (2026-11-24, through the judge, cuBLAS in the same run): this kernel 672
TFLOP/s = **88.2% of cuBLAS** (762 TFLOP/s), 0.2 ms; at 8192³, 743 TFLOP/s = 94% (cuBLAS 788;
`dev/ch05_hopper/wgmma_gpu.py`, `results/ch05/wgmma_gpu_h100_2026-11-24.log`). The same kernel with
other tiles, at 4096³: 128 × 256 with 3 slots 87%, 128 × 128 with 4 slots 75% (3 slots, two blocks
per SM: 71%), one warpgroup 64 × 256 72%, 64 × 128 with 2 slots 52%. Reading the accumulators
after `wait_group 1` (ptxas then serializes the wgmmas) gave the right answer at 72%. What is left
is mostly the epilogue: staging C in swizzled shared memory and storing it by TMA reached 97%
(99% at 8192³) in the same run — the second stretch goal.
"""),
        tests(r"""
grader.speed(launch_wg, P.wgmma_gemm, points=3)
""", "speed_wgmma", 3),
        md(r"""
## The ladder

Your kernel with three configurations, each against cuBLAS in the same run: one warpgroup with a
64 × 128 tile and 2 slots (the smallest that works), two warpgroups with 128 × 128 and 4 slots,
and the graded 128 × 256 with 4 slots. The cell compiles the other two from your source (one more
`-k` each). Without a Hopper GPU: the reference's recorded run.
"""),
        code(r"""
from grader.cuda import compile_cuda

configs = ["wgmma_gemm<Wg<64, 128, 2>>", "wgmma_gemm<Wg<128, 128, 4>>", "wgmma_gemm<Wg<128, 256, 4>>"]
labels = ["v1 1 warpgroup, 64×128, 2 slots", "v2 2 warpgroups, 128×128, 4 slots", "v3 2 warpgroups, 128×256, 4 slots"]
hopper = not grader.SIMULATOR and grader.device.info().compute_capability == (9, 0)
versions = {}
if hopper:
    body = wg.source
    more = compile_cuda(body, name="wg_ladder", arch="sm_90a", kernels=configs)
    for k, label in zip(configs, labels):
        versions[label] = grader.measure(P.wgmma_gemm_launch(more[k]), P.wgmma_gemm, label)
elif not grader.SIMULATOR:
    print("the ladder needs a Hopper GPU (sm_90a); this one has", grader.device.info().compute_capability)
grader.ladder_plot(versions, P.wgmma_gemm, title="bf16 GEMM 4096³: % of cuBLAS (same run)") if hopper or grader.SIMULATOR else None
""", "ladder_wg"),
        md(r"""
## Stretch goals (no points)

- Feed the other warpgroup's wgmmas while one waits: give each warpgroup its own "empty" mbarrier
  per slot instead of `__syncthreads`, so they drift apart (lesson 03 does this with a producer).
- Store C through shared memory and one TMA store per tile (`tma_store_2d`, 05.01): 16-byte rows
  instead of 4-byte pairs, and TMA clips the ragged edge for you.
- Try the 64-byte swizzle (boxes of 32 bf16): both the tensor maps and the descriptors change, and
  so do the k steps. Which is faster, and why (bank conflicts of the tensor core's reads)?
- Keep A in registers (`wgmma ... {a registers}, desc_b`: the RS form) and scale it on the way.
"""),
    ]
