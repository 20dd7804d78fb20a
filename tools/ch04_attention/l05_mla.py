"""04.05 MLA decode (CUDA C++): DeepSeek's latent KV cache, absorbed up-projections."""
from tools.ch04_attention import cell
from tools.nbbuild import code, md, solution, tests

NAME = "05_mla_decode.ipynb"


def cells():
    return [
        md(r"""
# 04.05 MLA decode: a latent KV cache

**What you will learn**
- DeepSeek's multi-head latent attention (MLA): the cache keeps one 576-value row per token — a
  512-wide latent c_kv and a 64-wide rotary key k_pe — instead of K and V for every head;
- absorbing the up-projections: with q_nope·W_UK folded into a 512-wide query, every head attends to
  the *same* latent rows (keys and values at once), like MQA with 576-wide keys and 512-wide values;
- a decode kernel whose work per byte grows with the heads: 16 heads are memory-bound, 128 are
  compute-bound on mma.sync — and how a block splits the 576 columns of Q·Kᵀ and the 512 of P·V
  over its warps.

**Builds on:** 04.04 (decode, split-KV and its merge). CUDA C++; runs on a GPU, graded on its
machine code without one.
"""),
        code(r"""
import grader
import numpy as np
from grader.cuda import sass
from grader.plot import subplots
from grader.problems import attention as P

print(grader.mode(), "| compiling for", grader.cuda.default_arch())
""", "setup"),
        md(r"""
## The idea

In MLA a token's keys and values for all heads are up-projections of one latent: k_h = W_UK,h c_kv
(plus a rotary part shared by all heads), v_h = W_UV,h c_kv. The score of head h is
q_h · k_h = (W_UK,hᵀ q_nope,h) · c_kv + q_pe,h · k_pe, so with the **absorbed** query
q̃_h = [W_UK,hᵀ q_nope,h, q_pe,h] (576 values) every head scores against the cached row itself, and
o_h = Σ p v_h = W_UV,h (Σ p c_kv): the kernel computes the 512-wide Σ p c_kv and W_UV is applied after.

    q     (B, Hq, 576) bf16          cache (B, CAP, 576) bf16: [c_kv (512) | k_pe (64)]
    O     (B, Hq, 512) bf16 = softmax(scale · q · cacheᵀ) · cache[:, :512],  scale = 1/√192

**Napkin math.** The cache: 576·2 = 1152 bytes per token per layer (DeepSeek-V3, 128 heads: 32 KiB
for MHA's K and V at d = 128, 4 KiB for GQA with 8 KV heads). B = 64, L = 8192: 604 MB, a floor of
201 µs at 3.0 TB/s. FLOPs: 2·B·Hq·L·(576 + 512) — 30 FLOP/B at 16 heads (memory-bound), 242 at 128
(past mma.sync's ridge of ≈ 220: compute-bound).

**The kernel.** A block takes 16 heads (one m16 tile: `H16`) or 32 (`H32`) of one sequence and one
chunk of its tokens; tiles of 32 (or 64) tokens × 1152 bytes stream through shared memory. Per tile:
(1) Q·Kᵀ is split over the 576 columns: warp w takes a quarter (144 columns, 9 k16 steps), its Q
fragments held in registers for the whole chunk, and leaves its partial scores in shared memory;
(2) every warp adds the four quarters and runs the same softmax (no warp needs another's state);
(3) each warp computes O for its 128-column quarter of the 512 outputs, P · c_kv with `ldmatrix.trans`
of the same tile. Chunks are merged as in lesson 04 (`combine`).
"""),
        code(r"""
heads = np.array([1, 2, 4, 8, 16, 32, 64, 128])
fig, (ax1, ax2) = subplots(1, 2, figsize=(11, 3.6))
kinds = [("MHA, 128 heads × d 128", 2 * 128 * 128 * 2), ("GQA, 8 KV heads", 2 * 8 * 128 * 2),
         ("MQA, 1 KV head", 2 * 128 * 2), ("MLA: 512 + 64", 576 * 2)]
ax1.barh([k for k, _ in kinds], [b / 1024 for _, b in kinds], color=["0.6", "0.6", "0.6", "tab:blue"])
for y, (_, b) in enumerate(kinds):
    ax1.text(b / 1024 * 1.05, y, f"{b / 1024:g} KiB", va="center", fontsize=8)
ax1.set_xscale("log"); ax1.set_xlabel("KV cache per token per layer (KiB)"); ax1.invert_yaxis()
ax1.set_title("what one token costs to keep", fontsize=10)
ax2.loglog(heads, 2 * heads * 1088 / 1152, "o-", label="MLA decode: 2·Hq·1088 FLOP per 1152 B")
ax2.axhline(660e12 / 3.0e12, color="tab:red", ls="--", lw=1, label="H100 ridge for mma.sync (660 TFLOP/s ÷ 3.0 TB/s)")
ax2.set_xlabel("query heads Hq"); ax2.set_ylabel("FLOP per byte of cache"); ax2.legend(fontsize=7)
ax2.set_title("memory-bound at 16 heads, compute-bound at 128", fontsize=10)
fig.tight_layout()
fig
""", "picture"),
        md(r"""
### Exercise: O += P · c_kv for this warp's 128 columns (about 15 lines)

After the softmax, `p[n][e]` holds this lane's probabilities of tile tokens n·8 + 2t + (e & 1) for heads
g + 8·(e >> 1) — the accumulator layout of lesson 03, so for each key step kk (16 tokens) the A fragment
is `pack_bf16` of n8 tiles 2kk and 2kk + 1. B is the latent rows of those 16 tokens, transposed:
`course::ldmatrix_x4_trans` at `rd + kk * 16 * C::ROW_BYTES + (v_off ^ (32 * (dd & 3))) + 128 * (dd >> 2)`
gives the b registers of column tiles 2dd and 2dd + 1 (8 pairs for the warp's 128 columns); then two
`mma_bf16` into `acc[2dd]`, `acc[2dd + 1]`.
"""),
        solution(cell("mla_cell.cu"), "v_mla"),
        code(r"""
# Head groups of TILE_M heads, tiles of TILE_N tokens: from each Config; the chunks fill one block per SM.
launch_mla = P.mla_launch(mla["mla<H16>"], mla["combine<Comb512>"])
launch_mla32 = P.mla_launch(mla["mla<H32>"], mla["combine<Comb512>"])
print("mla<H16> launches with", mla["mla<H16>"].launch_shape)
""", "launch"),
        md(r"""
### Graded without a GPU: the machine code

The 16-head kernel holds the tensor-core mma, `ldmatrix` for Q and the keys and transposed for the
values (the latent, read a second time from the same tile), `cp.async`, and no local memory.
"""),
        tests(r"""
sass.require(mla, "mla<H16>", present=["HMMA.16816.F32.BF16", "LDSM.16.M88.4", "LDSM.16.MT88.4", "LDGSTS"],
             absent=["LDL", "STL"], no_spills=True)
""", "test_mla_sass", 2),
        md(r"""
### On a GPU: correct

Ragged batches with empty sequences (the cache is NaN past each L_b), 16 to 128 heads (head counts
that are no multiple of 16 too), one chunk or many.
"""),
        tests(r"""
grader.check(launch_mla, P.mla)
""", "test_mla_visible", 2),
        tests(r"""
grader.check(launch_mla, P.mla, sizes=[P.Mla((3, 700), 40)])
### BEGIN HIDDEN TESTS
grader.check(launch_mla, P.mla, hidden=True)
### END HIDDEN TESTS
""", "test_mla_hidden", 2),
        md(r"""
## Speed (graded)

B = 64, L = 8192, 16 heads (DeepSeek-V3's 128 heads over 8 GPUs of tensor parallelism) against a copy
of as many bytes (606 MB) in the same run. **Full points at 50% of copy**, nothing at 5%. The course's
goal for its reference: ≥ 80% of copy.

**Measured on an H100** (2026-11-24, this notebook through the grader, copies of the same bytes in
the same run): B = 64, 16 heads, H16 with 2 chunks: 217 µs = 2791 GB/s = **95.4% of copy** (2926
GB/s): the goal is met. At B = 16 (151 MB) the same kernel reaches 78.5% of a copy of that size
(72 µs): one 4-warp block of 162 KB per SM keeps too few tiles in flight for so short a kernel —
just under the goal at that batch. At 128 heads (H32): 30% of copy, but 191 TFLOP/s — bound by
mma.sync's work per byte, where `wgmma` (chapter 05) is the way on.
"""),
        tests(r"""
grader.speed(launch_mla, P.mla, points=3)
""", "speed_mla", 3),
        md(r"""
## The ladder

Both configurations at the graded shape, and the reference at a smaller batch and at more heads
(measured now; without a GPU, the reference's recorded run).
"""),
        code(r"""
versions = {"H16: 16 heads a block, tiles of 32 tokens": launch_mla,
            "H32: 32 heads a block (half empty at 16 heads), tiles of 64": launch_mla32}
extra = []
if not grader.SIMULATOR:
    b16 = grader.measure(launch_mla, P.mla, "H16 at B = 16", size=P.Mla((8192,) * 16, 16))
    h128 = grader.measure(launch_mla32, P.mla, "H32 at B = 16, 128 heads", size=P.Mla((8192,) * 16, 128))
    for m in (b16, h128):
        print(m)
    extra = [("H16, B = 16 (151 MB)", b16.fraction), ("H32, B = 16, 128 heads (compute-bound)", h128.fraction)]
grader.ladder_plot(versions, P.mla, extra=extra, title="MLA decode B=64 L=8192 16 heads: % of copy bandwidth")
""", "ladder"),
        md(r"""
## Stretch goals (no points)

- At B = 16 the kernel keeps ~3 tiles in flight per SM. Try tiles of 64 tokens with 3 stages (fits in
  227 KB?) or two blocks of 8 heads (padding the m16 tile): which hides more latency?
- A paged latent cache (pages of 64 tokens, as FlashMLA): port lesson 04's `row_off`.
- At 128 heads, count the HMMAs per byte and compare with mma.sync's rate: how far is the kernel from
  the compute roof? Chapter 05's `wgmma` doubles it.
"""),
    ]
