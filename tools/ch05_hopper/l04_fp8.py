"""05.04 FP8 GEMM with block scaling (CUDA C++, sm_90a): e4m3, per-tensor against DeepSeek-style block
scaling (1 × 128 on the activations, 128 × 128 on the weights), FP8 wgmma (K-major operands, k32), and
the promotion of each k tile's partial sums into an fp32 accumulator in registers, on 05.03's
warp-specialized persistent kernel. Stream-K, the persistent tile scheduler as a subject and fused
epilogues are not in this lesson (see docs/CURRICULUM.md)."""
from tools.ch05_hopper import cell
from tools.nbbuild import code, md, solution, tests

NAME = "04_fp8.ipynb"
KERNEL = "fp8_gemm<Fp8<128, 192, 4, 1, 8>>"


def cells():
    return [
        md(r"""
# 05.04 FP8 GEMM with block scaling

**What you will learn**
- **e4m3**: 8 bits, 4 of exponent and 3 of mantissa, largest 448 — about 15 binades of range and
  2⁻⁴ relative precision, so every FP8 tensor travels with **scales**;
- **per-tensor against block scaling**: one scale for a whole matrix lets a few outlier rows
  push everything else towards zero; DeepSeek-V3's scheme keeps one fp32 scale per row per
  128-wide block of K for the activations A (**1 × 128**) and one per **128 × 128** block for the
  weights B;
- **FP8 wgmma**: `wgmma.mma_async …m64n192k32.f32.e4m3.e4m3` — k32 per instruction, both operands
  **K-major** (B is the weight matrix as stored, (N, K)), `QGMMA` in the SASS; N = 192 is not a power
  of two, and a tile of 192 columns meets two of B's 128-wide scale blocks;
- **promotion**: the tensor core's FP8 accumulator keeps fewer mantissa bits than fp32, so after
  each 128-wide k block the partial sums are scaled by their block's two scales and added to an
  fp32 accumulator in registers — which is also where the block scales can be applied at all;
- **scales that travel with the tile**: stored one row per k block, a k tile's scales are one more
  TMA box in its ring slot, waited on with the tile — a global load per k tile on the consumers'
  path costs more than the promotion's FMAs;
- **registers past the launch count**: a partial and an fp32 sum of 64 × 192 each take 192 registers a
  thread; `setmaxnreg` gives the consumers 232, and ptxas uses them — unless a `__trap()` sits in
  their loop.

**Builds on:** 05.02 (wgmma, descriptors, the accumulator fragment), 05.03 (the warp-specialized,
persistent kernel with clusters: this lesson changes only its operands and its consumer's k step).
CUDA C++ for **sm_90a**. Without a Hopper GPU the kernel is compiled and graded on its machine code;
the correctness and speed cells say "compiled and inspected only".
"""),
        code(r"""
import grader
import numpy as np
from grader.cuda import sass
from grader.plot import subplots
from grader.problems import hopper_fp8 as P
from grader.problems.gemm import Shape

print(grader.mode(), "| compiling for", grader.cuda.default_arch())
""", "setup_fp8"),
        md(r"""
## e4m3 and its scales

An e4m3 number is `(-1)^s · 2^(e-7) · (1 + m/8)` for exponent bits e = 1 … 15, and `2^-6 · m/8`
(subnormal) for e = 0; the code `S.1111.111` is NaN and there is no infinity. The largest value is
448, the smallest normal 2⁻⁶, the smallest subnormal 2⁻⁹. Between 2⁻⁶ and 448 every value is kept to
about 6% (3 mantissa bits); below 2⁻⁶ the steps are a fixed 2⁻⁹, so precision falls away.

To store a block of real numbers x, pick a scale s = max|x| / 448 and store e4m3(x / s): the block's
largest element lands on 448 and the rest keep 6% precision as long as they are within 2¹⁵ of it. A
GEMM on such operands computes Σ_k (s_a·a_k)(s_b·b_k): the scales factor out of every sum whose
terms share them. `grader.problems.hopper_fp8` has the encoder (round to nearest even, saturating)
and the three scalings in NumPy.

**Per-tensor scaling** uses one s for the whole matrix: if a few rows of activations are 10⁴ times
larger than the rest (LLM activations have such outlier channels and tokens), the ordinary rows are
divided by the outliers' scale and fall into the subnormal range — or to zero. **Block scaling**
gives each row of A its own scale per 128-wide block of K, and each 128 × 128 block of B its own:
an outlier only coarsens its own block. The picture: A (256 × 1024, standard normal) with one row
in 32 multiplied by an outlier factor, B (256 × 1024) normal; the error of C = A·Bᵀ computed from
the dequantized operands in float64, relative to C's rms, on the ordinary rows and the outlier rows.
"""),
        code(r"""
rng = np.random.default_rng(0)
M, N, K = 256, 256, 1024
a0 = rng.standard_normal((M, K)).astype(np.float32)
b = (rng.standard_normal((N, K)) * 0.05).astype(np.float32)
outlier = np.arange(M) % 32 == 5
factors = [1, 10, 100, 1e3, 1e4, 3e4, 1e5, 1e6]
err = {k: [] for k in ("per-tensor, ordinary rows", "per-tensor, outlier rows", "blocks, ordinary rows",
                       "blocks, outlier rows")}
qb_t, sb_t = P.quantize_tensor(b)
B_t = P.e4m3_decode(qb_t).astype(np.float64) * sb_t
B_b = P.dequantize_blocks(*P.quantize_blocks(b)).astype(np.float64)
for f in factors:
    a = a0.copy()
    a[outlier] *= np.float32(f)
    c = a.astype(np.float64) @ b.astype(np.float64).T
    qa_t, sa_t = P.quantize_tensor(a)
    c_t = (P.e4m3_decode(qa_t).astype(np.float64) * sa_t) @ B_t.T
    c_b = P.dequantize_rows(*P.quantize_rows(a)).astype(np.float64) @ B_b.T
    for name, got in (("per-tensor", c_t), ("blocks", c_b)):
        for rows, which in ((~outlier, "ordinary"), (outlier, "outlier")):
            e = np.sqrt(np.mean((got[rows] - c[rows]) ** 2) / np.mean(c[rows] ** 2))
            err[f"{name}, {which} rows"].append(e)
fig, ax = subplots(1, 1, figsize=(7, 4))
for (label, ys), style in zip(err.items(), ("o-", "x--", "s-", "+--")):
    ax.plot(factors, ys, style, label=label)
ax.set_xscale("log"); ax.set_yscale("log")
ax.set_xlabel("outlier rows: times the ordinary rows"); ax.set_ylabel("rms error of C / rms of C")
ax.set_title("FP8 e4m3 GEMM from quantized operands (float64 sums)", fontsize=10)
ax.legend(fontsize=8)
for f, t, bl in zip(factors, err["per-tensor, ordinary rows"], err["blocks, ordinary rows"]):
    print(f"outliers ×{f:>9,.0f}: ordinary rows {100 * t:6.1f}% off with one scale, {100 * bl:4.1f}% with blocks")
fig
"""
, "accuracy_picture"),
        md(r"""
Up to outliers about 10³ times the ordinary rows both scalings err by the same 3.7% (e4m3's rounding
of both operands): the relative precision of a normal e4m3 value does not depend on the scale. Past
that, per-tensor scaling pushes the ordinary rows into e4m3's subnormals (10⁴: 6%) and then to zero
(10⁶: 100% — those rows of C are lost), while block scaling stays at 3.7% for every row. Weights have
outliers too, more mildly; the 128 × 128 blocks keep one scale per block of B, which is what lets the
kernel apply it once per k tile rather than per element.

## Promotion: why the kernel rescales every 128 k

With per-tensor scales a GEMM can run the whole K loop in the tensor core's accumulator and multiply
by s_a·s_b once at the end. Block scales change along K, so each k block's partial sum must be
multiplied by its own scales before it joins the others:

C[m, n] = Σ_kb  sa[kb, m] · sb[kb, ⌊n/128⌋] · ( Σ_{k in block kb} A[m, k] · B[n, k] )

The inner sum is what wgmma computes: four `m64n192k32` per 128-wide k tile, into a **partial**
accumulator (the first with scale-d = 0: it starts from zero). After `wgmma.wait_group 0` the
consumer multiplies each partial by its row's A scale (a thread's fragment covers two rows, g and
g + 8) and its column's B scale, and adds it to a second, fp32, accumulator: 96 FMAs per thread per k
tile. DeepSeek-V3 calls this **promotion** and does it for a second reason: on Hopper, FP8 wgmma's
accumulator does not keep fp32's 23 mantissa bits (DeepSeek report about 14), so summing all of a
long K inside the tensor core loses accuracy even with per-tensor scales. Here it never sums more
than 128 products.

**Registers.** A consumer warpgroup owns 64 rows of the tile; with 192 columns its partial is
64 × 192 floats and so is its fp32 sum: 96 + 96 registers a thread, before addresses, scales and loop
counters. A block of 384 threads starts with 65536 / 384 → 168 registers a thread; `setmaxnreg`
moves them at run time (the producer drops to 40, the two consumers rise to 232), and ptxas compiles
the code after `setmaxnreg.inc` to that budget — this kernel's consumers use about 200. One thing stops it:
a `__trap()` inlined into the consumers' code (05.03's bounded wait, `course::mbar_wait_or_trap`,
traps after about two seconds so that a wrong parity fails instead of hanging). With it, ptxas keeps
the consumers within the 168 registers of launch time and spills (about 350 bytes a thread, in the
k loop). The kernel's consumers therefore wait with `mbar_wait_lean`: the `try_wait` inline, the
slow path with its clock and its trap in a `__noinline__` function — a call that is never made
unless the data is late. (The previous version of this lesson took the spills for a hard limit of
168 registers and stayed with 128 × 128 tiles; `tests/test_ch05_fp8.py` shows the spills coming back
when the trap is inlined again.)

**Napkin math.** At 8192³ the GEMM is 1.1 TFLOP of work; the tensor-wise cuBLAS peer runs at about
1480 TFLOP/s on an H100 (about 740 µs), 11.2 TFLOP/s per SM. A 128 × 192 × 128 k tile is 6.3 MFLOP for
40 KiB of A and B (one byte each): 0.56 µs per tile, 73 GB/s per SM, 9.6 TB/s over 132 SMs from L2
(a 128 × 128 tile needs 12 TB/s for the same work). The promotion costs each consumer 96 FMAs and a
`wait_group 0` per 4 wgmmas, and 0.56 µs of tensor work per k tile has to cover a warpgroup's drain
and promotion, or the tensor core waits. The two consumer warpgroups could drift into step — both
issue, both wait, both promote, and nothing runs on the tensor core meanwhile; making them **take
turns** (below) prevents that, but measured on this tile the turns cost more than they save, and
the reference leaves them off.
"""),
        md(r"""
## The kernel

`fp8_gemm<Fp8<BM, BN, STAGES, CLUSTER, GROUP_M>>`: 05.03's kernel with FP8 operands, here
`Fp8<128, 192, 4, 1, 8>`. TILE_K = 128: one k tile is one scale block, and 128 e4m3 are exactly the
128-byte swizzle's span, so A's box is 128 rows × 128 bytes and B's (N, K) box is 192 rows × 128
bytes — **both K-major**, both described like 05.02's A (SBO 1024, the 128-byte swizzle; +32 bytes
per k32 step). 4 slots of 40 KiB of tiles plus 544 bytes of scales, and two 64 × 64 bf16 staging
boxes per consumer for the epilogue's TMA stores. Clusters of 1: with clusters of 2
(`Fp8<128, 192, 4, 2, 8>`, in the cell too) each CTA loads 96 of B's 192 rows and multicasts them, as
in 05.03 — on this kernel that measured slower (below), so the reference does without.

**The scales travel with the tile.** The problem stores both scale tensors **k-block-major**: row kb
of sa holds the scales of every row of A for k block kb, row kb of sb those of every 128-column block
of B, each row padded to a multiple of 4 floats (TMA's 16 bytes; the layout DeepGEMM takes for A's
scales). So a k tile's scales are two boxes of one row each, and the producer loads them into the
slot with the tile, counted on the same full barrier (`SCALE_BYTES` more): the tile's 128 row scales
of sa, and 8 of sb starting at block `(n0 / 128) & ~3` — a box that started off a 16-byte boundary
failed when we tried it (an H100, 2026-11-25), so it starts at a multiple of 4 floats and the tile's
blocks lie somewhere in it. A TMA destination in shared memory must be 128-byte aligned (slots 16
bytes apart failed with a misaligned address): `sa_s[S][128]` and `sb_s[S][32]`, of which a slot uses 8. A consumer reads its two rows' A scales and its chunks' B
scales with `LDS` right after waiting on the slot, while the previous k tile's wgmmas run. The first
version of this kernel read them with `__ldg` from (M, K/128) and (⌈N/128⌉, K/128) instead: four global
loads per k tile per thread, issued a k tile ahead, and still **6 points** slower at 8192³ (below).

**Two B scale blocks per tile.** B's scales cover 128 columns; a tile of 192 starting at n0 (a
multiple of 64) meets blocks n0 / 128 and the next. Elements 32q … 32q + 31 of a thread's fragment are
columns 64q … 64q + 63 (`wgmma_acc_col`), chunk q, which lies in block (n0 + 64q) / 128 — never across
the boundary. So each chunk's B scale is worked out once per tile as an index into the slot's box,
`jb[q] = (n0 + 64q) / 128 − ((n0 / 128) & ~3)`, and the promotion multiplies six scales per k tile
(two rows × three chunks) with no select in the k loop; each FMA takes one of them.

**What stands between two k tiles.** After `wait_group 0` a consumer has to promote before it can
issue its next wgmmas, and everything else it does per k tile sits on that path too unless it is moved
off: so the next k tile's slot and phase are worked out, its full barrier waited on and its scales read
*while this k tile's wgmmas run*, and the descriptors are made once, for slot 0 (slot s's are
s · 40 KiB further on: a descriptor holds the address / 16). The warpgroup index goes through
`__shfl_sync` so the compiler knows it is the same in every lane and keeps the descriptor arithmetic
in uniform registers. The next slot's descriptors are made while this k tile's wgmmas run, and go
through an opaque register move (`opaque`, one `mov.b64` in inline PTX): without it ptxas undoes
the hoisting and rebuilds both from the shared window's base (`S2UR SR_CgaCtaId` and a dozen
uniform instructions) right before each k tile's first wgmma — on the path from a promotion to the
next wgmmas. What is left after the wait is the slot's release and the 96 FMAs.

**Turns** (`TURNS`, off in the reference; `Fp8<128, 192, 4, 1, 8, true>`, in the cell too, turns them
on). Consumer c waits on named barrier
3 + c before it issues a k tile's four wgmmas and arrives on the other's barrier right after its
commit (`bar.sync` / `bar.arrive` with 256 threads: one warpgroup arrives, the other waits). So the
tensor core gets consumer 0's k tile, then consumer 1's, then 0's next — and each warpgroup's drain
and promotion run while the tensor core works through the other's wgmmas. Consumer 1 arrives once
first (consumer 0 starts) and skips its arrival after its very last k tile, so no arrival is left
waiting when the kernel ends. Measured (below), the kernel without turns is faster: with nothing to
wait for, a consumer issues its next k tile as soon as its promotion is done.

**The epilogue's two staging boxes** take turns across tiles, not just within one: a tile of 192
columns stores three 64-column boxes, and choosing the box by `h % 2` would start the next tile on
the box whose TMA store (`bulk_wait_read<1>` lets one be in flight) may still be reading it. That
version of this kernel was wrong in a few 64-column chunks, now and then — on short K, where the
next tile's epilogue comes soon (found 2026-11-25; `stored` counts the boxes).

### Exercise (about 10 lines in two places)

1. The k tile's four `course::wgmma_e4m3(part, da + 32k, db + 32k, scale_d)`: `scale_d` 0 for the
   first (a fresh partial), 1 for the others; 3 lines.
2. The promotion: for each 64-column chunk q, its B scale `scale_b[q]` times `scale_lo` and
   `scale_hi` (the A scales of this thread's two rows), then
   `acc[i] += part[i] · (i & 2 ? s_hi[i / 32] : s_lo[i / 32])` for every i; about 7 lines.

The wrappers are in `grader/include/wgmma.cuh` (`wgmma_e4m3` picks m64n128k32, m64n192k32 or
m64n256k32 from the accumulator's length).
"""),
        solution(cell("fp8_cell.cu"), "v_fp8"),
        code(r"""
# Tile, stages, cluster and threads come from the type; the launch function encodes A's map (128 × 128
# e4m3 boxes), B's (192 × 128; 96 × 128 with clusters of 2), C's (64 × 64 bf16) and the scales' (one
# k block × 128 of sa, × 8 of sb), and launches a persistent grid.
launch_fp8 = P.fp8_gemm_launch(fp8["fp8_gemm<Fp8<128, 192, 4, 1, 8>>"])
print("fp8_gemm<Fp8<128, 192, 4, 1, 8>> launches with", fp8["fp8_gemm<Fp8<128, 192, 4, 1, 8>>"].launch_shape)
""", "launch_fp8"),
        md(r"""
### Graded without a GPU: the machine code

FP8 wgmma is `QGMMA` in the SASS (bf16's is `HGMMA`): the kernel holds `QGMMA.64x192x32.F32.E4M3.E4M3`
and no HGMMA or HMMA, TMA loads and stores, the mbarrier waits, **no
spills** (the registers above); setmaxnreg in effect; the epilogue's proxy fence before its TMA stores.
No global loads or stores of its own (`LDG`, `STG`): everything, the scales too, moves by TMA. (05.03
grades the multicast loads and the cluster barrier; this kernel runs without clusters.)
"""),
        tests(r"""
sass.require(fp8, "fp8_gemm<Fp8<128, 192, 4, 1, 8>>",
             present=["QGMMA.64x192x32.F32.E4M3.E4M3", "UTMALDG.2D", "UTMASTG.2D", "SYNCS.PHASECHK"],
             absent=["HGMMA", "HMMA", "LDG", "STG", "LDL", "STL"], no_spills=True)
sass.require_fence(fp8, "fp8_gemm<Fp8<128, 192, 4, 1, 8>>", writes="STS", fence="FENCE.VIEW.ASYNC.S", reader="UTMASTG")
regs = sass.require_setmaxnreg(fp8, "fp8_gemm<Fp8<128, 192, 4, 1, 8>>", threads=384)
print(f"✓ QGMMA 64x192x32 e4m3, TMA loads (the scales too) and stores, the mbarrier waits; setmaxnreg "
      f"in effect ({regs['registers']} registers at entry); no spills")
""", "test_fp8_sass", 2),
        md(r"""
### On a GPU: correct

The inputs are quantized from fp32 data with outlier rows (one in 16, 8× the others) and blocks of
different magnitudes (×0.5, 1, 2), so the scales vary down M and along K. The reference is the
float64 product of the **dequantized** operands — FP8's rounding is not the kernel's error; what is
left is the order of the sums, the tensor core's accumulator and the bf16 rounding of C (tolerance:
`P.fp8_tolerance`). A scale from the wrong row or block, or applied once at the end, misses by a
block's contribution, many times the tolerance. Shapes: one tile; ragged M and N (K must be a
multiple of 128, the scale blocks); one row; an 8-wide C; K = 8192 (64 promotions); 2048³; more tiles
than SMs. C is poisoned with NaNs before each run.
"""),
        tests(r"""
grader.check(launch_fp8, P.fp8_gemm)
""", "test_fp8_visible", 2),
        tests(r"""
grader.check(launch_fp8, P.fp8_gemm, sizes=[Shape(136, 264, 256)])
### BEGIN HIDDEN TESTS
grader.check(launch_fp8, P.fp8_gemm, hidden=True)
### END HIDDEN TESTS
""", "test_fp8_hidden", 2),
        md(r"""
## Speed (graded)

4096³ against cuBLAS's FP8 GEMM (`torch._scaled_mm`, one scale per tensor, bf16 out) on the same A
and B, in the same run. **Full points at 60%**, nothing at 6%. The peer does less (no per-block
scales, no promotion), which is what makes it the bar. The course's goal for its reference: ≥ 90% at
8192³. cuBLAS also has a block-scaled FP8 GEMM on Hopper (since CUDA 12.9; `torch._scaled_mm` with
this problem's 1 × 128 and 128 × 128 scales, `grader.peers.scaled_mm("blockwise")`): it does the same
work as your kernel, and on an H100 it runs at **90%** of tensorwise at 8192³ and 93% at 4096³
(2026-11-25, `results/ch05/fp8_cublas_block_h100_2026-11-25_run*.log`; its kernel,
`nvjet_sm90_qqtst_128x128_128x6_1x2_h_bz_coopA_…_Ablk128_Bvec128`, is a 128 × 128 tile in clusters of
2, with the same chain as here: wait, promote, issue). So the goal is as fast as NVIDIA's own
block-scaled kernel.

**Measured on an H100** (2026-11-25, each ratio to cuBLAS measured in the same run;
`results/ch05/fp8_gpu_h100_2026-11-25_tma.log`): at 8192³ 1391 TFLOP/s = **91%** of tensorwise (1521)
and 102% of rowwise (1363); at 4096³ 1145 TFLOP/s = 85% (1347). Beside cuBLAS's block-scaled kernel
(`fp8_cublas_block_h100_2026-11-25_run15.log`, 3 rounds): **101–102%** of it at 8192³ (1391 against 1370
TFLOP/s), 94–95% at 4096³. Through the judge (the chapter's run of 2026-11-25, about 09:00 UTC,
`results/scoreboard_ch05.log`): 1144 TFLOP/s = **86.7%** (1320) at 4096³, 3/3 points. The reference
goal, ≥ 90% of tensorwise at 8192³, is **reached**: 91.3–91.5% in two runs (and 91.4% for the same
design in the dev run before it, `fp8tsa_h100_2026-11-25_run11.log`). The ladder, at 8192³ (4096³ in
brackets), each row's ratio to the cuBLAS run beside it:

| kernel | TFLOP/s | of tensorwise cuBLAS | log (`results/ch05/`) |
| --- | --- | --- | --- |
| first version: 128 × 128, no turns, every k tile's set-up after the wait | 958 (861) | 65% (67%) | `fp8speed_explore_…` |
| + the consumers take turns, the lean k loop (clusters of 2) | 1088 (992) | 73% (74%) | `fp8wide_gpu_…` |
| the same with clusters of 1 | 1138 (1045) | 77% (80%) | `fp8speed_gpu_…` |
| 128 × 192, the trap off the consumers' path, clusters of 1 | 1224 (1012) | 83% (77%) | `fp8desc_gpu_…` |
| + the descriptors made a k tile ahead (`opaque`), no turns; scales by `__ldg` (the reference until 2026-11-25 09:11) | 1256 (1043) | 85% (79%) | `fp8desc_gpu_…` |
| + A's scales by TMA with the tile (dev) | 1327–1364 (1084–1104) | 89–90% (82–84%) | `fp8tsa_…_run1`–`run11` |
| **+ B's scales by TMA too, each chunk's from its own index: this kernel** | 1391 (1145) | **91%** (85%) | `fp8_gpu_…_tma` |
| this kernel with turns (`Fp8<128, 192, 4, 1, 8, true>`) | 1359 (1119) | 89% (83%) | `fp8_gpu_…_tma` |
| this kernel with clusters of 2 (`Fp8<128, 192, 4, 2, 8>`) | 1306 (1060) | 86% (79%) | `fp8_gpu_…_tma` |
| this kernel with 128 × 128 tiles (`Fp8<128, 128, 5, 1, 8>`) | 1152 (1066) | 76% (79%) | `fp8_gpu_…_tma` |
| ceiling: 128 × 192 with no promotion at all (wrong values) | 1540 (1283) | 104% (98%) | `fp8desc_gpu_…` |

Each scale load on the consumers' path cost more than its share of instructions: with the scales
read by `__ldg` (four loads per k tile per thread, issued a k tile ahead), scales made from k instead
(wrong values, a probe) ran 7 points faster; A's scales by TMA gained 4–5 points, B's the rest
(`fp8_cublas_block_…_run4`–`run10`, `fp8tsa_…`). At 8192³ the 192-wide tile is worth 15 points over
128 × 128; at 4096³ less (22 tile columns of 192 against 32 of 128: 704 tiles on 132 SMs leave the
sixth wave a third full). Turns and clusters of 2 still cost 2 and 5 points. Nsight Compute at 8192³
(`fp8_ncu_pipe_h100_2026-11-25.log`): the tensor pipe is active **84%** of the time for this kernel,
82% for cuBLAS's block-scaled kernel; it was 73% for the reference of 2026-11-24 and 94% for cuBLAS's
tensorwise kernel (`fp8wide_ncu_…`; `nvjet…144x128…coopA`: 144 × 128 tiles, no promotion). What is left is the promotion's
place in each consumer's k loop — `wait_group 0`, the scale products, 96 FMAs, then the next wgmmas:
without the promotion the same tile runs at 104%. Tried beside it, slower: a 192 × 128 tile with three
consumer warpgroups of 64 × 128 (78%; `dev/ch05_hopper/fp8_variants/three.patch`), and each
consumer's 64 × 192 as two 64 × 96 partials, one promoted while the other's wgmmas run (69%: m64n96
reads A from shared memory twice per 192 columns; `halves.patch`); 5 ring slots instead of 4 (82%: the
loads are not what is missing). The promotion costs one FMA per element of C per 128 k whatever the
tile — only its overlap with the tensor core can change.

The accumulator, measured on the same GPU (`results/ch05/fp8_gpu_h100_2026-11-24.log`, with the kernel
before the turns, and again with this kernel, `fp8_gpu_h100_2026-11-25_review.log`: the same figures
within 0.1 point; per-tensor inputs, every scale 1,
M = N = 256, error of the bf16 C against float64, relative to C's rms): promoting every 128 k, the largest error is 0.9% at
K = 512 and stays at 0.9% at K = 32768 — the same as fp32 accumulation rounded to bf16. Without
promotion (FP8 wgmma accumulating all of K) it grows with K: 1.0%, 1.5%, 2.9%, **4.9%** at K = 512,
2048, 8192, 32768 (rms 0.17% → 0.47%).
"""),
        tests(r"""
grader.speed(launch_fp8, P.fp8_gemm, points=3)
""", "speed_fp8", 3),
        md(r"""
## Stretch goals (no points)

- **The scale products.** With every B scale 1 (wrong values, timing only) the kernel with A's scales
  by TMA ran at 94–96% of tensorwise at 8192³ (`fp8tsa_…_run2`–`run11`): the three B-scale `LDS`, six
  products and their registers per k tile still cost about 4 points. A producer warp could multiply
  sa by sb for the tile's rows and chunks and leave the products in the slot (384 floats a k tile);
  or the products could be made a k tile ahead, if ptxas can be kept from moving them back after the
  wait (it did, here). How the scales got here, each measured beside the kernel of its day
  (`fp8_cublas_block_…_run4`–`run14`): loads two k tiles ahead (+1 point); a cp.async loader warp
  (−3); consumers staging 8 k blocks in shared memory (±0), with one 16-byte load of 4 (+2); then the
  scales by TMA with the tile (+6).
- **Overlap the promotion.** Without it this kernel's 128 × 192 tile runs at 104% of cuBLAS at 8192³;
  with it, 91%. A second partial per consumer (promote one k tile while the next one's wgmmas run, as
  05.03's `wait_group 1` does) needs 3 × 96 registers at 128 × 192, more than 232; at 128 × 128 it
  fits (3 × 64): `dev/ch05_hopper/fp8_variants/pipelined.cu` does it, right at every size, and runs
  at **71%** (its 128 × 128 tile without any promotion: 93%): the FMAs beside the wgmmas cost the same
  whether they overlap their own consumer's or the other's. Two things ptxas does on the way: it
  serializes every wgmma (warning C7514) if a partial is read while a wgmma it cannot prove retired
  is in flight across the loop's back edge, so nothing may be in flight there; and it moves the
  promotion's independent FMAs in after the *first* of the four wgmmas (it fills that wgmma's
  modelled latency), holding back the other three, unless they sit in a loop that runs once. What a k tile costs, from SM
  clock stamps (`dev/ch05_hopper/fp8_timeline.py`, the previous reference): ~1130 clocks, against
  ~800 with one FMA of promotion left; each consumer's 96 FMAs take 300–430 clocks, and the chain
  "wait, promote, turn, issue" outlasts the other consumer's wgmmas, so the tensor core idles ~300
  clocks a k tile. Why the FMAs are slow, from a microbenchmark with this kernel's warps
  (`dev/ch05_hopper/ffma_bench.py`, `results/ch05/fp8ffma2_…`): an FFMA that reads two registers
  issues every ~1 clock alone, one that reads three every ~2; **while a wgmma runs in the same SM
  sub-partition both costs double** (the tensor core takes about half the register file's read
  bandwidth). ptxas caches the scale (`.reuse`) on every other FFMA only, because a cached operand is
  lost when the warp yields: ~3 clocks an FFMA beside the other consumer's wgmmas. Caching it on
  every FFMA (rewriting the cubin: `dev/ch05_hopper/ffma_yield.py`) makes them ~2 clocks, but a warp
  that never yields starves the other consumer's issue; letting every 4th FFMA yield reached 87%
  on the kernel with `__ldg` scales, against its 85% (`reuse_y4`, `fp8ffma2_…_run4`). DeepGEMM rewrites the same bits; NVRTC 13 already alternates them.
- **A tile that is not a multiple of 64.** 128 × 208 (m64n208k32) reads less shared memory per FLOP
  and spreads each `wait_group 0`'s fixed latency over more wgmma work (the FMAs per FLOP stay the
  same); its 208 columns can meet three of B's scale blocks, and 2 × 104 registers of partial and sum
  leave little for everything else (setmaxnreg 24/240; 32/240 asks for more registers than the CTA
  has at launch, and hangs). Measured (`dev/ch05_hopper/fp8_variants/n208.cu`, the k loop compiled
  once per position of the scale-block boundary; its scales by `__ldg`): 86% at 8192³ and 91% at
  4096³, beside the kernel of that day's 85% / 79% — at 4096³ mostly the wave count: 640 tiles are 5
  waves on 132 SMs, 704 are 6. With this kernel's scales by TMA (a box of 8 of sb covers its three
  blocks) it is the next thing to try at 4096³.
- **A fused epilogue**: bias + GELU in the epilogue, before the bf16 store, against cuBLAS followed
  by torch's op.
- **Rowwise** scaling: `torch._scaled_mm` with one scale per row of A and per column of C; where
  does it sit between per-tensor and block scaling in accuracy, and in speed?
"""),
    ]
