"""05.05, second part: FP8 attention (CUDA C++, sm_90a). 05.05's warp-specialized FlashAttention-3 kernel
with e4m3 Q, K and V: FP8 wgmma (k32) for Q Kᵀ and for P V, P rounded to e4m3 in registers and packed
in place into the A fragment, V taken transposed with its keys in the accumulator's order (the input
contract: an FP8 KV cache that stores V with the keys contiguous), tiles of 192 keys, one descale per head applied back in the softmax's
scale and in the epilogue, and the Hadamard rotation of Q and K (incoherent processing) in the input
preparation. Its own notebook: 05_flash3.ipynb is long already, and its bf16 kernel is graded on its own."""
from tools.ch05_hopper import cell
from tools.nbbuild import code, md, solution, tests

NAME = "05_flash3_fp8.ipynb"
KERNEL = "flash3_fp8<F8<0, 1, 1>>"


def cells():
    return [
        md(r"""
# 05.05 (part 2) FP8 attention

**What you will learn**
- attention with **FP8 (e4m3) tensor cores**: `wgmma …k32.f32.e4m3.e4m3` runs at twice bf16's rate,
  and reads both operands **K-major** only — what that means for P V;
- why P's places do not match P V's A fragment (the accumulator of S gives a thread columns 2q, 2q + 1
  of each 8-wide block, the FP8 A fragment wants 4q … 4q + 3) — and how storing V's keys in the
  accumulator's order makes that free: P V sums over the keys, in any order both share;
- what binds an FP8 attention kernel, measured with Nsight Compute: not the tensor core;
- **scales**: e4m3 holds 3 mantissa bits and ±448, so each head's Q, K, V carry a descale, applied
  back where it costs nothing (the softmax's scale, the epilogue);
- **incoherent processing**: a Hadamard rotation of Q and K leaves Q Kᵀ unchanged and spreads outlier
  features over every column before rounding — and how much accuracy that buys, measured;
- tolerances derived from the format (2⁻⁴ relative rounding, the √d of a dot product), not tuned.

**Builds on:** 05.05 (the bf16 FA3 kernel: this one is the same skeleton), 05.04 (FP8 GEMM:
e4m3, scales, QGMMA). CUDA C++ for **sm_90a**; without a Hopper GPU the kernel is compiled and graded
on its machine code, and the correctness and speed cells say "compiled and inspected only".
"""),
        code(r"""
import grader
import numpy as np
from grader.cuda import sass
from grader.plot import subplots
from grader.problems import flash3_fp8 as P
from grader.problems.attention import Attn

print(grader.mode(), "| compiling for", grader.cuda.default_arch())
""", "setup_flash3_fp8"),
        md(r"""
## The input contract

FP8 attention is used where Q, K and V already are FP8 — an FP8 KV cache, a model quantized end
to end. So the problem hands the kernel e4m3 tensors, prepared by
`P.prepare_fp8(q, k, v, rng)` (NumPy, outside the attention kernel, as a model's quantize step):

| input | shape | what it holds |
|---|---|---|
| `q` | (B, H, Sq, 128) uint8 | e4m3 codes of (Q · M) / qd, M the Hadamard rotation below |
| `k` | (B, Hkv, Sk, 128) uint8 | e4m3 codes of (K · M) / kd |
| `vt` | (B, Hkv, 128, Sk_pad) uint8 | e4m3 codes of Vᵀ / vd — **V stored transposed**, keys contiguous, each group of 16 keys in the order `P.KEY_ORDER` (below); Sk_pad = Sk rounded up to 16 (TMA's row pitch); the padding holds zeros |
| `qd`, `kd`, `vd` | (B, H), (B, Hkv), (B, Hkv) fp32 | one descale per head: the head's largest magnitude / 448 |

O (B, H, Sq, 128) bf16 = softmax(Q̂ K̂ᵀ · qd · kd / √d) · V̂ᵀᵀ · vd, with causal masking as in 05.05.

**Why V transposed.** `wgmma` with FP8 inputs has no transpose flags: A is (M, K) and B is (N, K),
K contiguous in both (05.04). In O = P V the contraction runs over the **keys**: B = V must be
(d, keys) with the keys contiguous — Vᵀ. bf16 wgmma could read V (keys, d) row-major with its
"N-major" flag (05.05's P V); FP8 cannot. Two ways out: transpose each V tile in shared memory inside
the kernel (FA3 does it, with `ldmatrix`/`stmatrix` in the producer warpgroup), or store the cache
that way. This problem takes the second, **as its input format**: the transposition is not a hidden,
untimed step of the kernel — it is where the data lives, and a cache written once per token pays it
once. The same format fixes the order of the keys inside each group of 16 (next section: it makes P's
registers the A fragment as they are). The tensor map of Vt runs to Sk_pad: the zero padding is read,
and multiplied by P = 0 (the masked keys).
"""),
        md(r"""
## The napkin math

At B·H = 128, S = 4096, d = 128 the matmuls are 1.1 TFLOP (05.05). H100's dense FP8 rate is about
1979 TFLOP/s — twice bf16's — so the tensor cores need 0.56 ms. The exponentials have not changed:
2.1 × 10⁹ `ex2` on the 16-a-clock MUFU, **0.55 ms**. In bf16 they were half the matmuls' time; in FP8
they are **all** of it, and every other softmax instruction (scale, max, sum, conversion, rescale)
comes on top. FP8 attention is a softmax kernel with matmuls on the side: the course's goal (FP8
≥ 1.3× the bf16 kernel) is about keeping the CUDA cores' work per score small, not about the
tensor cores.

## P from registers: the keys in the accumulator's order

After the softmax a thread holds its probabilities in S's accumulator places: in warp w, lane l
(g = l / 4, q = l % 4), element i is row 16w + g + 8·((i/2) % 2), column 8·(i/4) + 2q + (i % 2). For the
k32 step kk (keys 32kk … 32kk + 31) those are elements x = s_acc + 16kk: columns {8c + 2q, 8c + 2q + 1},
c = 0 … 3, x[4c], x[4c + 1] in row g and x[4c + 2], x[4c + 3] in row g + 8.

The FP8 A fragment of `wgmma m64nNk32` wants, in lane q, **four consecutive** A columns a register
(grader/include/flash3_fp8.cuh): a[0] = row g, columns 4q … 4q + 3; a[1] the same in row g + 8;
a[2], a[3] columns 16 + 4q … 16 + 4q + 3. (bf16's k16 fragment wanted two consecutive columns — the
accumulator's own pairs: nothing to do, 05.05.) Taken literally, columns 4q′ … 4q′ + 3 live in two
other lanes: two shuffles and two byte permutes per register, the kernel's first form.

But the A fragment's "columns" are only the index the product sums over: P V = Σ_keys P[:, key] · V[key, :].
Any order of the keys gives the same O, as long as P's A columns and V's B rows (Vt's columns) follow
the same one. So the input format fixes it: in each group of 16 keys, Vt's column 4q + j holds key
8·(j / 2) + 2q + j % 2 (`P.KEY_ORDER` = 0 1 8 9 2 3 10 11 4 5 12 13 6 7 14 15) — lane q's accumulator
columns 2q, 2q + 1 of the two 8-wide blocks, in the order of its A bytes. Then lane q's A register
a[h] is **its own** four probabilities:

    a[h] = e4m3(x[e], x[e + 1], x[e + 4], x[e + 5]),   e = 8·(h / 2) + 2·(h % 2)

two `cvt.rn.satfinite.e4m3x2.f32` and one merge; no byte crosses a lane. FA3 does the same with V in
its natural layout: its producer transposes each V tile in shared memory and writes it in such an
order. The reference un-permutes Vt (`P.unpermute`) and computes attention of the true values, so a
kernel that packs P in the accumulator's own order — x[4h] … x[4h + 3] — multiplies each probability
by another key's value, mixes rows g and g + 8, and fails the checks by far
(tests/wrong/ch05_flash3_fp8.py: `p_not_permuted`).

## P's range, and the scales

P is rounded to e4m3 before P V. With the usual reference point (the row max ↦ 2⁰) the probabilities
below 2⁻⁶ of the max are **subnormal** in e4m3 and lose their relative precision. The kernel computes
P = 2^(s − max + 8) instead: the largest is 256, everything down to 2⁻¹⁴ of the max stays a normal
number (relative error ≤ 2⁻⁴), and l sums the same values, so the 2⁸ cancels in O / l.

The descales: S = Q̂ K̂ᵀ · qd · kd — one product per head, folded into the softmax's scale
(`sc_log2 = log2(e)/√d · qd · kd`); O = P V̂ · vd / l — one more factor in the epilogue. Both cost one
multiply where a multiply already was. Forgetting either compiles and runs; the checks fail it by
factors of hundreds.
"""),
        md(r"""
## The kernel

`flash3_fp8<F8<PINGPONG, LAZY, TREE, STAGES, POLY, BN>>`: 05.05's persistent kernel — a producer warpgroup
(one thread: Q once per unit, K and Vt tiles of BN = 192 keys into a ring of 4 slots, full/empty
mbarriers), two consumer warpgroups of 64 query rows — with FP8 tiles: Q is 128 × 128 bytes and a K tile
192 × 128, one 128-byte-swizzled TMA box each; a Vt tile (128 rows of d × 192 keys) comes in three boxes
of 64 keys with the **64-byte** swizzle (a swizzled box row holds at most the swizzle's span: 128 keys
with the 128-byte one), and P V's descriptors say so (8-row atoms of 512 bytes, +32 bytes a k32 step
inside a 64-byte row, the next box after two steps). Q and the ring take 208 KiB. S = Q Kᵀ is 4 ×
`wgmma m64n192k32` (+32 bytes a step, as 05.04), O += P V 6 × `wgmma m64n128k32` with A from registers.

**Why 192 keys a tile**, not 05.05's 128: an FP8 tile's GEMMs take half the tensor-core time of a bf16
tile's, while the CUDA cores' fixed work per tile (barrier waits, wgmma fences and descriptors, the
masks' test, the rescale vote, the row max's shuffles) stays; a wider tile spreads it over more keys.
FA3 takes 224 for FP8 at d = 128, and 192 when V arrives column-major as here (176 for bf16: its
`tile_size.h`); 192 is the widest here whose S, O and P fit the
consumers' 240 registers with the overlap's two P buffers kept live (96 + 64 + 2 × 24) and whose Vt
tile is whole 64-key boxes.

**The overlap.** S_j = Q K_jᵀ and O += P_{j−1} V_{j−1} are issued together; the softmax of S_j runs
while P V_{j−1} is on the tensor core. P V_{j−1} is waited for only when O must change — when a max
moves and O is rescaled, or at the unit's end: `wgmma.wait_group 1` for S_j also retires P V_{j−2}, so
P lives in **two register buffers**, and P_j is packed into the one P V_{j−2} read, right after S_j's
exponentials. (05.05's bf16 kernel waits for P V_{j−1} at the top of the next iteration, behind the
barrier loops.) Written the obvious way — the wait right after the softmax — ptxas moves the
`wgmma.wait_group 0` up into the softmax (nothing in between touches O or P, one basic block holds both):
the machine code then has 17 of the tile's 96 `MUFU.EX2` between `WARPGROUP.DEPBAR.LE gsb0, 0x1` and
the next `gsb0, 0x0`; the reference has all 96 there. The tests compile both forms and count
(tests/test_ch05_flash3_fp8.py). The ring has 4 slots of 48 KiB (5 of 32 KiB at BN = 128). O's rescale
is **lazy**: the running max moves, and O and l are rescaled, only when a row's new max exceeds it by
more than log2(448/256) = 0.807 — P then stays ≤ 448, still an e4m3 number (FA4's conditional
rescaling, made safe by P's headroom); the decision is a warp vote, on each lane's own max (a row's max
exceeds the bound iff one of its lanes' does), and the quad's shuffles for the row max run only when the
vote says it moves.

**Every instruction of a tile counts** (the speed section shows why): what depends only on the running
max — the vote's threshold, the exponent's offset, the rescale factors — is computed when the max moves,
not every tile; the tiles that need a mask are known once a unit (`n_full`); the row max's four chains
start at their first score and the row sums stay in their four chains across the unit's tiles (summed
in the epilogue); the barriers' addresses and the descriptors are computed once, the ring's slots and
phases carried from tile to tile. Counted in the machine code (NVRTC 13.0,
`dev/ch05_hopper/fp8attn_hotpath.py`), a warp's instructions on a 192-key tile's common path (no mask, no rescale): 557, of which the
softmax's own 96 FFMA (scale and subtract in one), 96 `MUFU.EX2`, 96 FADD (sums), 94 FMNMX (max) and
48 F2FP (two e4m3 a conversion) — 609 before these cuts.

Switches, for the ablation: LAZY (0: rescale whenever a row's max moves), TREE (the row max and sum in
four independent chains), STAGES (the ring), BN (128: 05.05's tiles), POLY (of every 8 exponentials,
that many computed with 05.06's cubic on the FMA units: FA4's split of the exponentials between MUFU and
the FMA pipes; the cubic's 10⁻⁴ relative error is far below e4m3's 2⁻⁴). PINGPONG is in the type but
not built (a `static_assert`): with 05.05's late wait ptxas serialized the ping-pong kernel's wgmmas (its
C7519, "WG.AR in divergent path"), and it measured 3–4 points slower than without. The reference
is `F8<0, 1, 1>` (192-key tiles, ring of 4, lazy rescale, every exponential on MUFU).

### Exercise (about 4 lines in three places)

1. The unit's scale of S: `sc_log2` from `scale_log2` and the unit's two descales `qd[w.qh]`, `kd[w.kh]`; 1 line.
2. `to_a_fragment`: register a[h] of k32 step kk, `p[4kk + h]`, from `x = s_acc + 16kk` in Vt's key order
   (above): `course::pack_e4m3x2(lo, hi)` rounds two floats to an e4m3 pair, lo in the low byte; 2 lines.
3. The epilogue's factor of row r: O · vd / l (0 for a row without keys); 1 line.
"""),
        solution(cell("flash3_fp8_cell.cu"), "v_flash3_fp8"),
        code(r"""
# The launch encodes Q's and K's maps as 05.05's (boxes of 128 bytes × 128 or 192 rows of one head) and
# Vt's as (B·Hkv, 128, Sk_pad), boxes of 64 keys with the 64-byte swizzle; one CTA per SM, units of 128
# query rows.
launch_f8 = P.flash3_fp8_launch(f8["flash3_fp8<F8<0, 1, 1>>"])
print("flash3_fp8<F8<0, 1, 1>> launches with", f8["flash3_fp8<F8<0, 1, 1>>"].launch_shape)
""", "launch_flash3_fp8"),
        md(r"""
### Graded without a GPU: the machine code

The kernel holds FP8 wgmma in both forms — shared-memory A for Q Kᵀ over 192 keys
(`QGMMA.64x192x32.F32.E4M3.E4M3 R…, gdesc[…]`) and register A for P V (`QGMMA.64x128x32… R…, R…, gdesc[…]`) — no
bf16 wgmma or mma, the e4m3 conversions (`F2FP`), 3-D TMA loads, mbarrier waits, no local memory; no serialized wgmmas, no wait leaving more than
one group; setmaxnreg in effect. A kernel that packs P in the wrong order still passes this (the same
instructions, other operands): only running it shows it wrong.
"""),
        tests(r"""
import re

kern = "flash3_fp8<F8<0, 1, 1>>"
r = sass.require(f8, kern, present=["QGMMA.64x192x32.F32.E4M3.E4M3", "UTMALDG.3D", "SYNCS.PHASECHK", "F2FP"],
                 absent=["HGMMA", "HMMA", "LDL", "STL"], no_spills=True)
if not re.search(r"QGMMA\.64x128x32\.F32\.E4M3\.E4M3 R\d+, R\d+, gdesc", sass.disassemble(f8, kern)):
    raise sass.RubricFailed(f"{kern}: not implemented yet: the cell still holds `{sass.STUB}`." if sass.STUB in f8.source
                            else f"{kern}: no FP8 wgmma with A from registers (P V must take P from registers)")
sass.require_wgmma(f8, kern, max_pending=1)
regs = sass.require_setmaxnreg(f8, kern, threads=384)
print(f"✓ {kern}: QGMMA (shared and register A), F2FP, UTMALDG.3D, mbarriers; setmaxnreg in effect "
      f"({regs['registers']} registers at entry); no spills")
""", "test_flash3_fp8_sass", 2),
        md(r"""
### On a GPU: correct

The sizes of 05.05 at d = 128 — one query; causal and not; ragged S; Sq ≠ Sk both ways (Sk = 65 and
1001: Vt's zero padding shares the last group of 16 with real keys, in the last 192-key tile); GQA; integer
q and k in ±4 ("peaked": one key carries most rows, so a probability in the wrong lane moves it); a max that grows
along the keys; values near 10⁴; **outlier features**; no keys — each prepared as above (rotated,
quantized per head).

**The reference and the tolerance.** The reference is float64 of the **decoded** inputs — the values the
kernel is given — so FP8's input rounding is not the kernel's error (the accuracy study below measures
that). What the kernel adds is P rounded to e4m3 before P V: each probability within 2⁻⁴ of itself
(3 mantissa bits, round to nearest), so |ΔO| ≤ 2⁻⁴ · Σ p_j |v_j| / Σ p_j ≤ **2⁻⁴ · max |v|**, plus 2⁻¹⁸ · max |v|
per key for probabilities under 2⁻¹⁴ of the max (subnormal), plus one bf16 rounding of O (rtol 2⁻⁷).
And the scores: FP8 wgmma does not add in full fp32 (DeepSeek-V3's report: about 14 bits kept), so a
score is off by up to ε·Σᵢ|qᵢkᵢ| ≤ ε·‖q‖·‖k‖, ε = 2⁻¹³; Δ in log2 units moves every weight by a factor
within 2^±2Δ, and the bound becomes max|v|·(2^2Δ·(1 + 2⁻⁴) − 1). The judge taught us that term: with
chapter 04's integer logits of ±300 (‖q‖·‖k‖ near 10⁴), two keys 0.18 apart in log2 units weighed as if
0.42 apart, and one output in 791,808 left the P-only bound (H100, 2026-11-25). Logits that large are
no case for FP8; the peaked inputs here give logits of a few tens at most.
It is a bound, not a fit: a forgotten descale misses by factors of 100, a P in the wrong places by the
size of O itself on the peaked rows.
"""),
        tests(r"""
grader.check(launch_f8, P.flash3_fp8)
""", "test_flash3_fp8_visible", 2),
        tests(r"""
grader.check(launch_f8, P.flash3_fp8, sizes=[Attn(1, 2, 333, 128, causal=True, kind="growing")])
### BEGIN HIDDEN TESTS
grader.check(launch_f8, P.flash3_fp8, hidden=True)
### END HIDDEN TESTS
""", "test_flash3_fp8_hidden", 2),
        md(r"""
## Accuracy: what the rotation buys

Against float64 of the **unrounded** q, k, v, on the GPU: rms(O − O_exact) / rms(O_exact) for cuDNN's
SDPA in bf16, this kernel on FP8 inputs prepared without the rotation, and with it, as the outlier
features (4 of 128 columns of Q and K, the same in every head) grow.

**The bound, from the format.** A normal e4m3 number is within 2⁻⁴ of the value it rounds (half of its
2⁻³ step); as a uniform error its rms is 2⁻⁴/√3. A score Σᵢ qᵢ kᵢ / √d sums d products each off by two
such errors: its error's rms is 2⁻⁴·√(2/3) · rms(qᵢkᵢ) — the error of the sum grows as √d, and so does
the sum's spread when no feature dominates: **the √d cancels**, and each score is off by about 5% of
the scores' spread at any d. P inherits that, V and P add 2⁻⁴/√3 each: rms(ΔO) ≲ 2⁻⁴·√(2/3 + 1/3 + 1/3)
= **7.2%** of rms(O) (`P.ACCURACY_BOUND`). With outlier features and no rotation, four columns carry
the products' rms and the one scale per head leaves every other column at a fraction of e4m3's range:
no averaging, and the bound fails. The rotation makes every column a mixture of all 128 — the products'
rms is the scores' spread again.

**Measured** (H100, 2026-11-25, `dev/ch05_hopper/fp8attn_gpu.sh`, results/ch05/fp8attn_gpu_h100_2026-11-25_run6.log,
this cell's reference; B = 1, H = 4, S = 1024, rms error in % of rms O):

| outliers × | 1 | 3 | 10 | 30 | 100 |
|---|---|---|---|---|---|
| bf16 (cuDNN SDPA) | 0.36 | 0.33 | 0.57 | 1.20 | 1.91 |
| FP8 without the rotation | 5.14 | 4.47 | **7.95** | **15.5** | **25.0** |
| FP8 with the rotation | 5.27 | 4.10 | 4.07 | 5.02 | **9.26** |

Within the 7.2% bound with the rotation up to 30× outliers, out of it without from 10×. At 100× the
rotation is not enough either: 4 outliers of 100× spread over 128 columns still give every column a
component 100·2/√128 ≈ 18 times an ordinary feature — per-block scales (FA3's) or a smaller outlier
budget are the next step. FP8 errs 10–15 times more than bf16 everywhere: 3 mantissa bits against 7.
"""),
        code(r"""
# On a Hopper GPU: the table above, measured now (needs torch; about 10 s). The check: FP8 with the
# rotation within the bound up to 30× outliers, FP8 without it outside at 30×.
from grader.check import not_here

if not_here(P.flash3_fp8) is None:
    factors = (1.0, 10.0, 30.0)
    acc = P.accuracy(launch_f8, factors=factors)
    for lab in ("bf16 (SDPA)", "FP8 without the rotation", "FP8 with the rotation"):
        print(f"{lab:26s}", "  ".join(f"{f:4g}×: {100 * acc[(lab, f)]:5.2f}%" for f in factors))
    assert all(acc[("FP8 with the rotation", f)] <= P.ACCURACY_BOUND for f in factors)
    assert acc[("FP8 without the rotation", 30.0)] > P.ACCURACY_BOUND
    print(f"✓ with the rotation within {100 * P.ACCURACY_BOUND:.1f}%, without it not at 30×")
else:
    print("accuracy not measured:", not_here(P.flash3_fp8))
""", "accuracy_flash3_fp8"),
        md(r"""
## Speed (graded)

B = 4, H = 32, S = 4096, d = 128, non-causal and causal, against **cuDNN's SDPA in bf16** on the same
values (decoded, still rotated: the same scores) in the same run — the peer 05.05 uses. **Full points at
78% of it**, nothing at 7.8%: the curriculum's learner figure (60%) times the FP8 goal (1.3× the bf16
kernel) — an FP8 kernel 1.3 times as fast as what earns 05.05's bf16 points in full.

**What binds: Nsight Compute** (H100, 2026-11-25, `dev/ch05_hopper/fp8attn_ncu.sh`, one launch each,
non-causal; results/ch05/fp8attn_ncu_h100_2026-11-25.txt). The cell's previous form (128-key tiles, P
moved by quad shuffles, 702.8 TFLOP/s = 1.11× the bf16 kernel in the session before), 05.05's bf16
kernel, and the 192-key form (the bold row of the first table below, before the instruction cuts of
"The kernel"):

| | bf16 (05.05) | FP8, 128-key form | FP8, 192-key form |
|---|---|---|---|
| tensor pipe active | 69% | 37% | 45% |
| MUFU (ex2) issue, % of its peak | 36% | 39% | 47% |
| issue slots busy | 40% | 46% | 43% |
| cycles with no eligible warp | 60% | 54% | 57% |
| warp instructions per 128 × 128 block of scores | 5181 | 5572 | 4408 |
| of them SHFL + PRMT + SEL (P's move) | 49 | 698 | 208 |

Neither the tensor core nor MUFU is near its peak in FP8, nor are the issue slots: with two consumer
warps per scheduler, a warp issues once every ~5 cycles, and the top stall reasons are the fixed
latencies between dependent instructions (34–36% of the samples) and issuing itself (20–21%). The time is the **length of
each softmax's instruction stream**, per 128 × 128 block ~8.6 instructions per score against the ~4.8
that the scale, max, exponential, sum and conversion need. Each fix below removes instructions per
score: P packed in place instead of moved (−490 SHFL/PRMT/SEL a block), 192-key tiles (the per-tile
barrier waits, fences, descriptors, masks and votes over 1.5 times the keys), the lazy rescale (fewer
rescales of O), then the cuts of "The kernel" (bookkeeping, and what waits for the max to move). One
that removed more instructions lost: the row sums taken from the tensor core (P · [V | 1], `m64n136k32`,
no FADD per score: 3762 instructions a block) ran 6% slower, its longer P V keeping S's softmax waiting
(results/ch05/fp8attn_v3_h100_2026-11-25_run2.log). And the count is not all: the row sums' four chains
merged and added to l at each tile's end (the same number of instructions as keeping them across tiles)
cost 1.5–2 points — four dependent additions a row at the tail of a softmax whose warp issues every
few cycles (results/ch05/fp8attn_v5_h100_2026-11-25_run2.log).

**Measured, the variants** (H100, 2026-11-25, `dev/ch05_hopper/fp8attn_v3.sh`, each checked first, then
grader.measure beside the bf16 kernel in one process; results/ch05/fp8attn_v3_h100_2026-11-25_run2.log;
run 1, the same kernels, in brackets), × 05.05's bf16 kernel (631.1 TFLOP/s non-causal, 527.1 causal):

| FP8 variant | non-causal | causal |
|---|---|---|
| previous form: 128-key tiles, P by quad shuffles, eager rescale | 1.12 (1.08) | 1.20 (1.17) |
| + lazy rescale | 1.15 (1.11) | 1.23 (1.21) |
| 192-key tiles, P by quad shuffles, eager rescale | 1.20 (1.16) | 1.30 (1.28) |
| P packed in place (Vt in the accumulator's key order), 128-key tiles | 1.13 (1.11) | 1.24 (1.20) |
| P in place, lazy rescale | 1.19 (1.16) | 1.28 (1.24) |
| P in place, 192-key tiles, eager rescale | 1.24 (1.20) | 1.44 (1.39) |
| **P in place, 192-key tiles, lazy rescale, ring of 4** | **1.31, 1.30** (1.26, 1.25) | **1.41, 1.42** (1.37, 1.39) |
| the same, ring of 3 | 1.28 (1.23) | 1.39 (1.37) |
| the same + row sums from the tensor core | 1.23 | 1.33 |

The bf16 kernel itself measured 631.1 and 646.7 TFLOP/s in the two runs: the run-to-run spread of the
ratio is about 4 points, as large as some of the steps. So the bold row's 1.3× was at the goal within
that spread (1.29× through the judge), and the instruction cuts of "The kernel" came next.

**Measured, the cuts** (H100, 2026-11-25, `dev/ch05_hopper/fp8attn_v5.sh`, three runs, each kernel
checked, then 5 rounds interleaved beside the bf16 kernel **and the bold row's kernel** in one process;
results/ch05/fp8attn_v5_h100_2026-11-25_run{1,2,3}.log), non-causal × the bf16 kernel, median of 5 (worst):

| FP8 variant | run 1 | run 2 | run 3 |
|---|---|---|---|
| the bold row above (the cell before) | 1.248 (1.232) | 1.258 (1.252) | 1.273 (1.271) |
| + barrier addresses and descriptors once, P in two buffers, the quad's max only when it moves | 1.289 (1.289) | 1.293 (1.290) | 1.305 (1.303) |
| + the mask test once a unit, the max-dependent work only when it moves | 1.289 (1.285) | | |
| + the chains seeded, the row sums kept across tiles | 1.313 (1.313) | 1.312 (1.311) | 1.330 (1.327) |
| the same, the row sums merged each tile | | 1.295 (1.292) | |
| **+ the ring's slots carried from tile to tile: this cell** | | | **1.335 (1.330)** |

Causal, run 3 (2 rounds): this cell 1.438, 1.411; the bold row's 1.391, 1.399. Bf16 kernel: 655.6,
649.2, 641.8 TFLOP/s non-causal in the three runs. **This cell's kernels are run 3's**, instruction for
instruction under NVRTC 13.0 (the device's): the switches, 1 round each, non-causal (causal) × bf16:
`F8<0, 0, 1>` eager rescale 1.290 (1.437), `F8<0, 1, 0>` one chain 1.255 (1.383), `F8<0, 1, 1, 3>`
ring of 3 1.299 (1.427), `F8<0, 1, 1, 0, 0, 128>` 128-key tiles 1.257 (1.368). In the problem's own contract (its preparation and launch), in each run:
right at every visible and hidden size with 2–3 rounds of fresh random seeds and at a dozen more sizes
(ragged, causal, GQA, Sk ≠ Sq, no key), the switches too, the three wrong kernels caught. **1.3× the bf16
kernel non-causal: reached**, 1.335× (worst round 1.330; its loop without the carried slots 1.313, 1.312,
1.330 in the three runs); causal 1.41–1.44×. Through the judge (the chapter's run of 2026-11-25 04:29,
`results/scoreboard_ch05.log`, 12/12 points): 861.6 TFLOP/s = 123.3% of cuDNN bf16 non-causal, 755.9 =
123.2% causal; 05.05's bf16 kernel in the same run 640.3 / 540.7 TFLOP/s, so **1.35× / 1.40×**.

Earlier forms, for the record (H100, 2026-11-24/25, results/ch05/fp8attn_variants_h100_2026-11-24_run3.log
and fp8attn_gpu_h100_2026-11-25_run5.log): ping-pong cost 3–4 points (in bf16 it was worth nothing:
with FP8 GEMMs half as long, a consumer waited for its turn longer than it saved); 1 or 2 of 8
exponentials on the FMA units lost 6 and 10 points (MUFU is not what binds); 05.05's overlap fix bought
nothing at 128-key tiles.
"""),
        tests(r"""
grader.speed(launch_f8, P.flash3_fp8, points=3)
""", "speed_flash3_fp8", 3),
        tests(r"""
grader.speed(launch_f8, P.flash3_fp8_causal, points=3)
""", "speed_flash3_fp8_causal", 3),
        md(r"""
## Stretch goals (no points)

- **V transposed in the kernel** instead of in the input format: the producer warpgroup loads V (keys, d)
  and writes Vᵀ into the ring with `ldmatrix.trans` / `stmatrix` (FA3's way), for a cache stored as usual.
- **Block scales** for Q and K (one per 128 × 128 tile, 05.04's), applied per tile in the softmax's scale:
  the 100× outliers of the table.
- **Exponentials on the FMA units**: the cell's POLY switch does the split; find the fraction that pays
  (FA4 tunes it per GPU), and a cheaper range reduction than the cubic's.
- d = 64 (a 64-byte swizzle for Q and K) and d = 256 (two boxes a row).
"""),
    ]
