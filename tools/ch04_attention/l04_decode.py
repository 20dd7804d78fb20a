"""04.04 decoding (CUDA C++): GQA/MQA head packing, split-KV with a log-sum-exp merge, a paged cache."""
from tools.ch04_attention import cell
from tools.nbbuild import code, md, solution, tests

NAME = "04_decoding.ipynb"


def cells():
    return [
        md(r"""
# 04.04 Decoding: GQA, split-KV and a paged KV cache

**What you will learn**
- why generating one token is a **memory** problem: each step reads the whole KV cache to do a few
  FLOPs per byte, so the measure is the copy bandwidth, not TFLOP/s;
- **GQA/MQA head packing**: the G = Hq / Hkv query heads that share a KV head become the rows of one
  m16 tensor-core tile, so each K/V byte is read once for all of them (the GQA-unaware path, K and V
  repeated to Hq heads, reads G times as much);
- **split-KV** ("flash decoding"): too few (sequence, KV head) pairs to fill the GPU, so the keys are
  cut into chunks, one block each, and the partial results are merged with their **log-sum-exp** weights;
- a **paged** KV cache (vLLM's PagedAttention): the cache in fixed-size pages in any order, found
  through a block table.

**Builds on:** 02.03 (merging softmax states), 04.03 (mma.sync attention tiles). CUDA C++; runs on a
GPU, graded on its machine code without one.
"""),
        code(r"""
import grader
import numpy as np
from grader.cuda import sass
from grader.problems import attention as P

print(grader.mode(), "| compiling for", grader.cuda.default_arch())
""", "setup"),
        md(r"""
## The idea

One new token per sequence: q is (B, Hq, d), and it attends to the L_b cached keys and values of
its sequence, K, V (B, Hkv, CAP, d). Query head h reads KV head h / G with G = Hq / Hkv (Llama-3 8B:
32 query heads, 8 KV heads, G = 4; Hkv = 1 is MQA).

**Napkin math** (B = 8, L = 8192, Hq = 32, Hkv = 8, d = 128): K and V are 2·8·8·8192·128·2 B = 268 MB;
q and o 131 kB. FLOPs: 4·B·Hq·L·d = 1.07·10⁹ — 4 FLOP/B. At the measured copy bandwidth of an H100
(3.0 TB/s) the floor is **89.5 µs**, whatever the FLOPs. The GQA-unaware path reads K and V once per
query head, 4× the bytes: 358 µs.

**Head packing.** A block takes one (sequence, KV head) and its G ≤ 16 query heads as the rows of one
m16 tile (rows ≥ G are zeros): the mma that computes S = q Kᵀ for 16 heads costs what it costs for 1.

**Split-KV.** B·Hkv = 64 blocks cannot fill 132 SMs. Cut each sequence into chunks (here 4 of 2048
tokens: 256 blocks, 2 per SM); each block leaves its chunk's normalized output O_s and its log-sum-exp
lse_s = m_s + log l_s (02.03's state (m, l) in one number). The merge is 02.03's, with O:

$$O = \frac{\sum_s w_s O_s}{\sum_s w_s}, \qquad w_s = e^{\,\mathrm{lse}_s - \max_{s'} \mathrm{lse}_{s'}} .$$

Either a second kernel merges (`combine`, one block per (head, sequence)), or the **last block** of
each (sequence, KV head) to finish does it: every block writes its partials, fences, and bumps a
counter; the one that sees count = chunks − 1 merges (and resets the counter).

**Paged cache.** The cache lives in pages of P tokens, (num_pages, P, Hkv, d), in any order;
`block_table[b, i]` is the page holding tokens iP … iP + P − 1 of sequence b. Each `cp.async` row
looks its page up (the table is small and stays in L1); the rest of the kernel is unchanged.

The roofline below places each case by its intensity (napkin, no measurement): decode sits far left
of the ridge, GQA-packed decode G times further right than the repeated path, MLA (lesson 05) further
still, and prefill (lesson 03) far past the ridge.
"""),
        code(r"""
from grader.plot import subplots

peaks = grader.device.info().published or grader.device.published_peaks("H100 SXM")
bw, peak = peaks["mem_GBps"], peaks["bf16"] * 2 / 3 * 1e3     # GB/s; GFLOP/s of mma.sync (≈ 2/3 of the bf16 peak)
cases = [("decode, K/V repeated to 32 heads (GQA-unaware)", 1.0), ("decode MHA (G = 1)", 1.0),
         ("decode GQA 32/8, heads packed", 4.0), ("decode MQA 32/1, heads packed", 32.0),
         ("MLA decode, 16 heads (lesson 05)", 2 * 16 * 1088 / 1152), ("MLA decode, 128 heads", 2 * 128 * 1088 / 1152),
         ("prefill, S = 4096 (lesson 03)", 2048.0)]
fig, ax = subplots(figsize=(8, 4.2))
xs = np.logspace(-0.5, 3.7, 200)
ax.loglog(xs, np.minimum(xs * bw, peak), "k-", lw=1.5)
ax.axvline(peak / bw, color="0.6", ls=":", lw=1)
ax.text(peak / bw * 1.1, peak * 0.45, f"ridge ≈ {peak / bw:.0f} FLOP/B", fontsize=8, color="0.35")
for (label, i), marker in zip(cases, "ovs^Dd*"):
    ax.plot([i], [min(i * bw, peak)], marker, ms=8, label=f"{label}: {i:.0f} FLOP/B")
ax.set_xlabel("FLOP per byte of K/V (or Q, K, V, O) read"); ax.set_ylabel("attainable GFLOP/s")
ax.set_title(f"attention on the roofline of an {peaks['model']} (napkin, not measured)", fontsize=10)
ax.legend(fontsize=7, loc="lower right"); ax.grid(True, which="both", alpha=0.2)
fig.tight_layout()
fig
""", "roofline"),
        md(r"""
## The kernel

`decode<Cfg>`: grid (chunks, Hkv, B), 4 warps; K/V tiles of 64 tokens stream through 3 shared-memory
stages (cp.async, zero-filled past the end of the chunk); the 4 warps split each tile's 64 tokens
(16 each), keep their own online-softmax state over 16 heads, and merge through shared memory at
the end. With one chunk the block writes O; with several, its O_s and lse_s (fp32). `combine<Cfg>`
merges as a second launch. The types: `Dec<D>` (contiguous cache), `Paged<D>`, `Comb<D>`.

### Exercise (about 18 lines in three places)

1. `head_of(gi)`: the query head of packed row gi of this block (KV head `kvh`, G per KV head): 1 line.
2. `row_off(tok)`, paged branch: the element offset of token `t0 + tok` of sequence b in the K (or V)
   pages — its page from `block_table[b, tk / P]` (`__ldg`; P = 2^`page_shift`; the table has
   `cap >> page_shift` entries per sequence), its row `tk % P`, then `((page·P + row)·Hkv + kvh)·D`: 3 lines.
3. `merge_partials`: columns c4 … c4 + 3 of one head from its `ns` partials: the max lse, the weights,
   the weighted sum, the division, and the bf16 store (`pack_bf16`; read the partials with `__ldcg`:
   other blocks wrote them): about 14 lines.
"""),
        solution(cell("decode_cell.cu"), "v_decode"),
        code(r"""
# Block size, shared memory, tiles and head dim come from each kernel's Config; the launch functions
# choose the chunks from the cache's capacity (so that chunks × sequences × KV heads fill the GPU twice).
kernels = [dec["decode<Dec<128>>"], dec["decode<Dec<64>>"]]
launch_v1 = P.decode_launch(*kernels, merge="none")                       # one block per (sequence, KV head)
launch_v2 = P.decode_launch(*kernels, combine=[dec["combine<Comb<128>>"], dec["combine<Comb<64>>"]], merge="kernel")
launch_decode = P.decode_launch(*kernels, merge="fused")                  # v3: the last block merges
launch_paged = P.paged_decode_launch(dec["decode<Paged<128>>"], dec["decode<Paged<64>>"], merge="fused")
print("decode<Dec<128>> launches with", dec["decode<Dec<128>>"].launch_shape)
""", "launch"),
        md(r"""
### Graded without a GPU: the machine code

Both decode kernels (d = 128) hold the tensor-core mma, `ldmatrix` (plain for q and K, transposed for
V), `cp.async`, and no local memory; the merge weighs each chunk with an exponential (`MUFU.EX2`).
"""),
        tests(r"""
for kernel in ("decode<Dec<128>>", "decode<Paged<128>>"):
    sass.require(dec, kernel, present=["HMMA.16816.F32.BF16", "LDSM.16.M88.4", "LDSM.16.MT88.4", "LDGSTS"],
                 absent=["LDL", "STL"], no_spills=True)
sass.require(dec, "combine<Comb<128>>", present=["MUFU.EX2"], absent=["LDL", "STL"], no_spills=True)
print("✓ the machine code holds HMMA, LDSM, LDSM.MT, LDGSTS, the merge's EX2, and no spills")
""", "test_decode_sass", 2),
        md(r"""
### On a GPU: correct

Ragged batches (L_b of 0, 1, 63, 64, 65, 777, 1031 …: the cache is NaN after each sequence's end, so a
read past it cannot pass; L_b = 0 gives O = 0), G of 1, 4 and 16 (MQA), d = 64 and 128, chunks that
split and chunks that do not. Paged: pages of 16, 32 and 64 tokens in shuffled order; unused pages
and table entries point at NaN.
"""),
        tests(r"""
grader.check(launch_decode, P.decode)
""", "test_decode_visible", 2),
        tests(r"""
grader.check(launch_decode, P.decode, sizes=[P.Decode((5, 2000), 12, 3)])
### BEGIN HIDDEN TESTS
grader.check(launch_decode, P.decode, hidden=True)
### END HIDDEN TESTS
""", "test_decode_hidden", 2),
        tests(r"""
grader.check(launch_paged, P.decode_paged)
""", "test_paged_visible", 1),
        tests(r"""
grader.check(launch_paged, P.decode_paged, sizes=[P.Decode((5, 2000), 12, 3, page=32)])
### BEGIN HIDDEN TESTS
grader.check(launch_paged, P.decode_paged, hidden=True)
### END HIDDEN TESTS
""", "test_paged_hidden", 1),
        md(r"""
## Speed (graded)

B = 8, L = 8192, 32 query heads over 8 KV heads, d = 128, against a device-to-device copy of as many
bytes (268.6 MB), in the same run. **Full points at 60% of copy**, nothing at 6%. Paged: the same
cache in shuffled pages of 16. The course's goals for its reference: ≥ 90% of copy and ≥ SDPA's best
backend on the same shape; paged ≥ 85%.

**Measured on an H100** (2026-11-24, this notebook through the grader, everything in the same run):
v3 103 µs = 2617 GB/s = **92.8% of copy** (a copy of the same 268.6 MB: 2819 GB/s); SDPA's best
backend (cuDNN, `enable_gqa`) 2517 GB/s: ours **1.04×**; SDPA on K/V repeated to 32 heads 745 GB/s
(26.5% of copy): ours **3.5×**; paged, pages of 16: **89.3%** (90% in the ladder, 90% with pages of
64). The goals are met. v1 (no split: 64 blocks, each with 3 stages of 32 KB) already reaches
90.5% and v2 (combine kernel) 91.7%: at this shape the merge is a few µs of a 103 µs kernel. The
kernel's time is the dev harness's (`dev/ch04_attention/NOTES.md`: 103.6 µs, 2.88 TB/s read from
DRAM); there a 1 GiB copy (3002 GB/s) made it 86%.
"""),
        tests(r"""
grader.speed(launch_decode, P.decode, points=3)
""", "speed_decode", 3),
        tests(r"""
grader.speed(launch_paged, P.decode_paged, points=2)
""", "speed_paged", 2),
        md(r"""
## The ladder

Each version as a share of the copy bandwidth, beside SDPA on the same q and cache in the same run:
its best backend with `enable_gqa`, and the GQA-unaware path (K and V repeated to 32 heads beforehand:
the kernel then reads 4× the bytes). Without a GPU: the reference's recorded run.
"""),
        code(r"""
versions = {"v1 one block per (sequence, KV head), no split": launch_v1,
            "v2 split-KV + combine kernel": launch_v2,
            "v3 split-KV, the last block merges": launch_decode}
extra = []
if not grader.SIMULATOR:
    versions["v3 split-KV, the last block merges"] = ours = grader.measure(launch_decode, P.decode, "v3 split-KV, the last block merges")
    best = grader.measure(launch_decode, P.decode, "v3 vs SDPA's best backend", peer=P.decode_sdpa_best)
    repeated = grader.measure(launch_decode, P.decode, "v3 vs the GQA-unaware path", peer=P.decode_sdpa_repeated)
    paged16 = grader.measure(launch_paged, P.decode_paged, "paged, pages of 16")
    paged64 = grader.measure(launch_paged, P.decode_paged, "paged, pages of 64", size=P.DECODE_BENCH._replace(page=64))
    for m in (best, repeated, paged16, paged64):
        print(m)
    extra = [("v3 paged, pages of 16", paged16.fraction), ("v3 paged, pages of 64", paged64.fraction),
             (best.peer_name, ours.fraction / best.fraction),
             (repeated.peer_name, ours.fraction / repeated.fraction)]
grader.ladder_plot(versions, P.decode, extra=extra,
                   title="decode B=8 L=8192 32/8 heads d=128: % of copy bandwidth (same run)")
""", "ladder"),
        md(r"""
## Stretch goals (no points)

- Pick the chunk count from the actual lengths (a sync the launch function here avoids): for a
  batch of very different L_b, how much does it matter?
- 32 query heads over 1 KV head (MQA) need two m16 tiles per block: add an `MT` to the Config.
- Store the cache in fp8 (e4m3) with a scale per page: half the bytes, and the floor halves.
- Speculative decoding verifies k tokens at once: q becomes (B, Hq, k, d). How does the intensity
  change, and where does the packing put the k × G rows?
"""),
    ]
