"""04.03 FlashAttention-2 on tensor cores (CUDA C++): mma.sync, ldmatrix(.trans), cp.async, split-Q."""
from tools.ch04_attention import cell
from tools.nbbuild import code, md, solution, tests

NAME = "03_fa2_tensor_cores.ipynb"


def cells():
    return [
        md(r"""
# 04.03 FlashAttention-2 on tensor cores

**What you will learn**
- lesson 02's algorithm on tensor cores: `mma.sync.m16n8k16` for S = Q·Kᵀ and for O += P·V, bf16 in,
  fp32 accumulators; `ldmatrix` for Q and K, `ldmatrix.trans` for V;
- **split-Q**: the warps of a block own disjoint query rows and share every K/V tile, which streams
  through a ring of shared-memory stages filled by `cp.async` while the tensor cores work;
- the softmax in registers: the S accumulator's layout *is* the A-fragment layout of P·V, so P is
  packed to bf16 in place and never touches shared memory;
- the lazy rescale (a row's reference point may lag its max by 2⁸), causal blocks that skip the tiles
  past the diagonal, and a SASS rubric that shows each idea landed (HMMA, LDSM, LDGSTS, no spills).

**Builds on:** 03.04 (mma.sync, ldmatrix, cp.async, swizzle, launch contract), 04.02 (the online
softmax over tiles). CUDA C++. Runs and is timed on a GPU (compute capability 8.0 or newer); without
one the kernel is compiled for sm_90a and graded on its machine code, and the correctness and speed
cells say "not graded".
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

**Work split.** A block owns BR = 128 query rows of one (batch, head); its 4 warps take 32 rows each
(two m16 tiles). Keys and values of that head stream through shared memory in tiles of BC keys, each
tile loaded **once per block** and read by all 4 warps. Per tile, each warp:

1. S = Q_w Kᵀ: (32, BC) fp32 in registers — mma.sync with A = Q rows (ldmatrix), B = K rows
   (ldmatrix, not transposed: K stored (keys, d) row-major *is* Bᵀ, which is what "col" B wants);
2. masks (only the ≤ BR/BC + 1 tiles crossing the causal diagonal or the ragged end; a compile-time
   flag gives the others a body with no mask code at all);
3. the online softmax of 04.02, per row, in registers: the row max across the 4 lanes of a quad
   (`quad_max`: two shuffles), p = 2^(s·scale·log₂e − m) on the special-function unit (`ex2`);
4. O_w += P V: (32, d) fp32 — A = P, B = V by `ldmatrix.trans` (V is (keys, d); B must be k-major).

**P never leaves registers.** A lane's S accumulator holds rows g and g + 8 (g = lane / 4), columns
2t, 2t + 1 (t = lane % 4) of each n8 tile; the A fragment of an m16n8k16 mma wants rows g, g + 8 and
columns 2t, 2t + 1, 2t + 8, 2t + 9 of a k16 step. So n8 tiles 2kk and 2kk + 1 of S are exactly the A
fragment of key step kk of P·V: each pair of probabilities is packed into one bf16x2 register and used.

**Lazy rescale.** Rescaling a 32 × 128 output costs 128 FMUL per lane per tile. A row's reference
point m may lag its true max by up to TAU = 8 (p ≤ 2⁸: no overflow in fp32, bf16 keeps its relative
precision); the warp rescales only when some row outgrew its reference by more than that (a warp
vote), which after the first tiles is rare. Exact in real arithmetic: O = acc / l does not depend on m.

**Napkin math** (B = 4, H = 32, S = 4096, d = 128): 4·B·H·S²·d = 1.10·10¹² FLOPs (causal: half);
537 MB of Q, K, V, O: ≈ 2050 FLOP/B — far past the ridge: compute-bound. mma.sync on Hopper runs at
about 2/3 of the ≈ 990 TFLOP/s that `wgmma` reaches (chapter 05): ≈ 660 TFLOP/s, a 1.7 ms floor. On
top of the MMAs each score costs an FFMA, an EX2, an FADD and half an FMNMX (for d = 128, one score
is 512 MMA FLOPs). Registers per thread: the 32 × 128 fp32 output is 128 of them, S and P another
48; 2 blocks of 128 threads per SM (≤ 255 registers). Shared memory: Q 32 KB + 3 stages × (K, V) of
32 keys 48 KB = 80 KB per block.
"""),
        code(r"""
from matplotlib.patches import FancyArrowPatch, Rectangle

fig, ax = subplots(figsize=(11, 4.4))
colors = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
for w in range(4):                                             # the block's query rows
    ax.add_patch(Rectangle((0, 70 - 17 * w), 3.2, 16, color=colors[w], alpha=0.35))
    ax.text(1.6, 78 - 17 * w, f"warp {w}: rows {32 * w}–{32 * w + 31}\nS, P, O in registers", ha="center",
            va="center", fontsize=7.5)
ax.text(1.6, 90, "Q: 128 query rows of one head\n(shared memory, ldmatrix)", ha="center", fontsize=8)
for s, (label, fill) in enumerate([("tile j\n(read by all warps)", 0.35), ("tile j + 1\n(landed)", 0.15),
                                   ("tile j + 2\n(cp.async in flight)", 0.05)]):
    x = 5 + 2.6 * s                                            # the ring of shared-memory stages
    ax.add_patch(Rectangle((x, 44), 2.3, 40, color="0.3", alpha=fill, lw=1.2, ec="0.2"))
    ax.text(x + 1.15, 74, f"stage {s}", ha="center", fontsize=8, weight="bold")
    ax.text(x + 1.15, 62, "K (32 × d)\nV (32 × d)", ha="center", fontsize=7.5)
    ax.text(x + 1.15, 49, label, ha="center", fontsize=7)
ax.text(8.9, 90, "shared memory: a ring of 3 K/V stages", ha="center", fontsize=8)
for t in range(9):                                             # K, V of the head in global memory
    ax.add_patch(Rectangle((4 + 0.95 * t, 5), 0.85, 18, color="0.5", alpha=0.5 if t < 3 else 0.2))
    ax.text(4.42 + 0.95 * t, 14, f"{t}", ha="center", fontsize=7)
ax.text(13.6, 14, "K, V of the head\nin global memory:\ntiles of 32 keys", ha="center", va="center", fontsize=8)
for s in range(3):
    ax.add_patch(FancyArrowPatch((4.42 + 0.95 * s, 23), (6.15 + 2.6 * s, 44), arrowstyle="->", mutation_scale=9, lw=0.8))
for w in range(4):
    ax.add_patch(FancyArrowPatch((5, 60), (3.25, 78 - 17 * w), arrowstyle="->", mutation_scale=9, lw=0.8,
                                 color=colors[w]))
ax.text(-0.2, -3, "after the barrier of tile j: every warp reads stage j % 3 (ldmatrix K, ldmatrix.trans V), "
        "and one cp.async group refills stage (j + 2) % 3 with tile j + 2", fontsize=7.5, va="top")
ax.set_xlim(-0.3, 14.2); ax.set_ylim(-10, 100); ax.axis("off")
ax.set_title("FA2 on tensor cores: split-Q over warps, K/V tiles shared through shared memory", fontsize=10)
fig
""", "picture"),
        md(r"""
## The kernel

One template, three versions by their `Config`, each instantiated for d = 64 and d = 128 (the
launch function picks by the inputs' d, from the type's `TILE_K`):

| version | rows per block (warps × rows) | keys per tile | stages | Q |
|---|---|---|---|---|
| `V1` | 64 (4 × 16) | 64 | 2 | fragments in registers |
| `V2` | 128 (4 × 32: each K/V fragment feeds 2 m16 tiles) | 64 | 2 | ldmatrix each step |
| `V3` (the reference) | 128 (4 × 32) | 32 at d = 128 (64 at d = 64) | 3 at d = 128 (2) | ldmatrix each step |

The copy pipeline, S = Q·Kᵀ, the masks and the epilogue are given. Shared-memory tiles are
(rows, d) bf16 with 16-byte chunk c of row r stored at chunk c ^ (r % 8) (`attn::swz`): the 8 rows one
`ldmatrix` phase reads fall in 8 different bank groups, and stepping 16 columns along d is an XOR
with 32. The helpers are in `grader/include/attention.cuh` (read it once).

### Exercise: the online softmax, P and O += P·V (about 45 lines)

Where `// YOUR CODE HERE` stands, for this warp's MT m16 tiles (rows g and g + 8 of each, `hh` = 0, 1):
1. the tile's row max in log₂ units (`quad_max` of the lane's maxima, times `scale_log2`); if any row
   of the warp (`__any_sync`) exceeds its `m_run` by more than `C::TAU`: for each row, m_new = max,
   α = `ex2(m_run − ref_point(m_new))`, scale `l_run` and the row's `acc` by α, m_run = m_new;
2. p = `ex2(fmaf(s, scale_log2, −ref_point(m_run)))` for each score; add the lane's p to `l_run`;
   pack each pair with `pack_bf16(p0, p1)` into `pa[i][n / 2][(n % 2) * 2 + hh]`;
3. for each key step kk and pair of d tiles dd: `course::ldmatrix_x4_trans` of V at
   `rd + ((v_ld + kk * 16 * D * 2) ^ (dd * 32))`, then two `mma_bf16` into `acc[i][2dd]`, `acc[i][2dd + 1]`.
"""),
        solution(cell("fa2_cell.cu"), "v_fa2"),
        code(r"""
# Block size, shared memory and tiles come from each version's Config in the compiled module;
# fa2_launch picks the instantiation whose head dim (TILE_K) matches the inputs: grid (Sq / TILE_M, H, B).
launch_v1 = P.fa2_launch(fa["fa2<V1<128>>"], fa["fa2<V1<64>>"])
launch_v2 = P.fa2_launch(fa["fa2<V2<128>>"], fa["fa2<V3<64>>"])     # at d = 64, V2 is V3
launch_fa2 = P.fa2_launch(fa["fa2<V3<128>>"], fa["fa2<V3<64>>"])
print("v3, d = 128, launches with", fa["fa2<V3<128>>"].launch_shape)
""", "launch"),
        md(r"""
### Graded without a GPU: the machine code

Both instantiations of the reference version must hold the bf16 tensor-core mma
(`HMMA.16816.F32.BF16`), `ldmatrix` for Q and K (`LDSM.16.M88.4`) and transposed for V
(`LDSM.16.MT88.4`: only P·V uses it), the `cp.async` copies (`LDGSTS`), and no local memory.
"""),
        tests(r"""
for kernel in ("fa2<V3<128>>", "fa2<V3<64>>"):
    sass.require(fa, kernel, present=["HMMA.16816.F32.BF16", "LDSM.16.M88.4", "LDSM.16.MT88.4", "LDGSTS"],
                 absent=["LDL", "STL"], no_spills=True)
print("✓ the machine code holds HMMA, LDSM, LDSM.MT, LDGSTS and no spills")
""", "test_fa2_sass", 2),
        md(r"""
### On a GPU: correct

bf16 inputs, a float64 reference from the same bf16 values, outputs poisoned with NaN. Sizes: d = 64
and 128; causal and not; S of 1, 65, 1000, 1031; Sq ≠ Sk (65 queries, 1000 keys and back); GQA (8 query
heads over 2 KV heads); rows with no key at all (Sk = 0: O = 0); logits of ±300 (no max subtraction
overflows); key norms that grow along the sequence (a missing rescale fails); values near 10⁴ under
near-uniform attention (an fp16 P·V accumulator overflows). Tolerance: one bf16 rounding of O and of
P, 2⁻⁷ relative plus 2⁻⁸ of the largest |v|.
"""),
        tests(r"""
grader.check(launch_fa2, P.fa2)
""", "test_fa2_visible", 2),
        tests(r"""
grader.check(launch_fa2, P.fa2, sizes=[P.Attn(1, 2, 33, 64, causal=True), P.Attn(2, 4, 129, 128, Sk=77, Hkv=1)])
### BEGIN HIDDEN TESTS
grader.check(launch_fa2, P.fa2, hidden=True)
### END HIDDEN TESTS
""", "test_fa2_hidden", 2),
        md(r"""
## Speed (graded)

Timed at B = 4, H = 32, S = 4096, d = 128 (4096 blocks: 15 waves of 2 blocks on each of 132 SMs)
against torch's SDPA with the flash backend (FlashAttention-2) on the same tensors in the same run,
non-causal and causal. **Full points at 50% of SDPA flash**, nothing at 5%. The course's goal for its
reference: ≥ 100% non-causal and ≥ 95% causal.

**Measured on an H100** (2026-11-24, this notebook through the grader, SDPA on the same tensors in
the same run): v3 381 TFLOP/s = **105% of SDPA flash** (363) non-causal, 353 = **106%** (332)
causal — the course's goals met. The ladder: v1 95% / 100% (non-causal / causal), v2 99.5% / 100.5%,
v3 106% / 106%; SDPA cuDNN 691 / 606 TFLOP/s, v3 at 0.56× / 0.58× of it (cuDNN uses Hopper's
`wgmma`, chapter 05). The experiments behind the tiles (`dev/ch04_attention/`): d = 64 at 1.15× flash.
"""),
        tests(r"""
grader.speed(launch_fa2, P.fa2, points=3)
""", "speed_fa2", 3),
        tests(r"""
grader.speed(launch_fa2, P.fa2_causal, points=2)
""", "speed_fa2_causal", 2),
        md(r"""
## The ladder

Each version as a share of SDPA flash, and SDPA's cuDNN backend on the same inputs (measured now;
without a GPU, the reference's recorded run).
"""),
        code(r"""
versions = {"v1 64 rows (4 warps × 16), Q in registers": launch_v1,
            "v2 128 rows (4 warps × 32)": launch_v2,
            "v3 + key tiles of 32, 3 stages": launch_fa2}
extra = []
if not grader.SIMULATOR:                 # v3 against SDPA flash and cuDNN, on the same inputs
    versions["v3 + key tiles of 32, 3 stages"] = vs_flash = grader.measure(launch_fa2, P.fa2, "v3 vs SDPA flash")
    vs_cudnn = grader.measure(launch_fa2, P.fa2, "v3 vs SDPA cuDNN", peer=grader.peers.sdpa("cudnn"))
    print(vs_cudnn)
    extra = [("SDPA cuDNN (same run)", vs_flash.fraction / vs_cudnn.fraction)]
grader.ladder_plot(versions, P.fa2, extra=extra, title="FA2 bf16, B=4 H=32 S=4096 d=128: % of SDPA flash")
""", "ladder"),
        code(r"""
versions = {"v1 64 rows (4 warps × 16), Q in registers": launch_v1,
            "v2 128 rows (4 warps × 32)": launch_v2,
            "v3 + key tiles of 32, 3 stages": launch_fa2}
extra = []
if not grader.SIMULATOR:
    versions["v3 + key tiles of 32, 3 stages"] = vs_flash = grader.measure(launch_fa2, P.fa2_causal, "v3 causal vs SDPA flash")
    vs_cudnn = grader.measure(launch_fa2, P.fa2_causal, "v3 causal vs SDPA cuDNN", peer=grader.peers.sdpa("cudnn", causal=True))
    print(vs_cudnn)
    extra = [("SDPA cuDNN causal (same run)", vs_flash.fraction / vs_cudnn.fraction)]
grader.ladder_plot(versions, P.fa2_causal, extra=extra, title="FA2 bf16 causal, B=4 H=32 S=4096 d=128: % of SDPA flash")
""", "ladder_causal"),
        md(r"""
## Stretch goals (no points)

- Read `fa.sass("fa2<V3<128>>")`: find the `VOTE.ANY` that guards the rescale and count the FMULs
  behind it. Set `TAU = 0` (always rescale) and time it.
- Keep Q in registers in v3 (`QREG = true`): fewer `LDSM` per mma, 32 more registers. Spills?
- The backward pass needs the row's log-sum-exp: write `lse = (m + log₂ l)·ln 2` in the epilogue.
- Chapter 05 rebuilds this kernel with `wgmma` and TMA (FlashAttention-3), where cuDNN's 0.6× gap is.
"""),
    ]
