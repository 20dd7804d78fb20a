"""04.01 naive attention: QKᵀ, softmax and PV as three Numba kernels, and the N² wall measured."""
from tools.nbbuild import code, md, solution, tests

NAME = "01_naive_attention.ipynb"


def cells():
    return [
        md(r"""
# 04.01 Naive attention: three kernels and the N² wall

**What you will learn**
- attention, $O = \mathrm{softmax}(QK^\top/\sqrt d)\,V$, as three kernels you already know how to write:
  a product of two matrices (03.01), a row softmax (02.03), and another product;
- the causal mask (a query sees only the keys at or before it) and why the row max is subtracted;
- the **N² wall**: the scores of every query against every key are an S × S matrix per head. You will
  measure the device memory it takes and the time the three kernels spend, against S, beside the
  napkin math — and find the S at which the buffer no longer fits on the GPU.

**Builds on:** 02.03 (softmax, warp shuffles), 03.01 (a naive matrix product). Numba, fp32. Without a
GPU the kernels run in Numba's CUDA simulator at tiny sizes and are graded for correctness; the wall
is then measured in the simulator's memory (bytes) only.
"""),
        code(r"""
import grader
import math
import numpy as np
from numba import cuda, float32
from grader.check import run_case
from grader.plot import subplots
from grader.problems import attention as P

FULL = 0xFFFFFFFF
print(grader.mode())
""", "setup"),
        md(r"""
## The idea

For each batch b and head h, with q, k, v rows of length d:

$$s_{ij} = \frac{q_i \cdot k_j}{\sqrt d}, \qquad p_{ij} = \frac{e^{s_{ij} - m_i}}{\sum_{j'} e^{s_{ij'} - m_i}}, \quad m_i = \max_j s_{ij}, \qquad o_i = \sum_j p_{ij}\, v_j .$$

Causal (a language model's self-attention): query i sees keys j ≤ i only, so $s_{ij} = -\infty$ for
j > i. Subtracting the row max $m_i$ changes nothing mathematically and keeps `exp` from overflowing:
the tests include logits of ±300 (fp32 `exp` overflows above 88.7).

Three kernels, each simple, with the whole S × S matrix in device memory between them:

| kernel | threads | reads | writes |
|---|---|---|---|
| `scores` | one per (i, j) | q row i, k row j (d each) | s[i, j] |
| `softmax_rows` | one **warp** per row i | row i of s, three times (max, sum, normalize) | row i of p, in place |
| `pv` | one per (i, c) | row i of p, column c of v (S each) | o[i, c] |

**Napkin math** (fp32, B·H = 32 heads, d = 64): the buffer is 4·B·H·S² bytes — 2 GiB at S = 4096,
128 GiB at S = 32768, more than an H100's 80 GB. Time: the FLOPs are 4·S²·d per head (two products),
and the buffer is written once, read three times and written again by the softmax, and read once per
16 columns of d by `pv` (d/16 = 4 times at d = 64; some of it from L2): about 24·S² bytes per head
against 256·S² FLOPs, ~10 FLOP/B, below an H100's fp32 ridge (67 TFLOP/s ÷ 3.35 TB/s ≈ 20 FLOP/B).
Both grow like S²; the memory is the wall you hit first. Lesson 02 removes the buffer.
"""),
        md(r"""
## Exercise: three kernels and the launch

All arrays are fp32 and contiguous: q, k, v, o (B, H, S, d), the buffer s (B, H, S, S).

- `scores`: thread (x = j, y = i, block z = b·H + h) writes `s[b, h, i, j] = scale · q[b,h,i] · k[b,h,j]`.
  Neighbouring threads in x take neighbouring keys, so a warp's stores are contiguous. About 6 lines.
- `softmax_rows`: one warp per row (`ROWS` rows per block), as in 02.03: the row max with
  `cuda.shfl_xor_sync`, the sum of `exp(s − max)`, then `p = exp(s − max) / sum` in place; a causal
  row sums only `j ≤ i` and writes 0 after it. About 16 lines.
- `pv`: thread (x = c, y = i, z = b·H + h) writes `o[b, h, i, c] = Σ_j p[b,h,i,j] · v[b,h,j,c]`. About 6 lines.
- `launch_naive`: allocate s with `cuda.device_array`, launch the three kernels. About 5 lines.
"""),
        solution(r"""
TILE = 16          # 16 × 16 threads per block for `scores` and `pv`
ROWS = 4           # rows (one warp each) per block of `softmax_rows`


@cuda.jit
def scores(q, k, s, scale):
    # q, k (B, H, S, d) fp32 -> s (B, H, S, S) fp32
    # about 6 lines
    ### BEGIN SOLUTION
    j, i = cuda.grid(2)                      # x: key j (neighbouring threads: neighbouring scores)
    bh = cuda.blockIdx.z                     # y: query i; z: (batch, head)
    H, S, d = q.shape[1], q.shape[2], q.shape[3]
    if i < S and j < S:
        b, h = bh // H, bh % H
        acc = float32(0.0)
        for c in range(d):
            acc += q[b, h, i, c] * k[b, h, j, c]
        s[b, h, i, j] = acc * scale
    ### END SOLUTION


@cuda.jit
def softmax_rows(s, causal):
    # one warp per row (b, h, i) of s (B, H, S, S), in place; causal: keys j > i get p = 0
    # about 16 lines
    ### BEGIN SOLUTION
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * ROWS + cuda.threadIdx.x // 32
    B, H, S = s.shape[0], s.shape[1], s.shape[2]
    if row >= B * H * S:
        return                                # the whole warp leaves together
    b, h, i = row // (H * S), (row // S) % H, row % S
    n = i + 1 if causal else S                # keys this row sees
    m = float32(-math.inf)
    for j in range(lane, n, 32):              # pass 1: the row max
        m = max(m, s[b, h, i, j])
    for k in range(5):
        m = max(m, cuda.shfl_xor_sync(FULL, m, 16 >> k))
    total = float32(0.0)
    for j in range(lane, n, 32):              # pass 2: the sum of exp(s - max)
        total += math.exp(s[b, h, i, j] - m)
    for k in range(5):
        total += cuda.shfl_xor_sync(FULL, total, 16 >> k)
    inv = float32(1.0) / total
    for j in range(lane, S, 32):              # pass 3: normalize (and zero the future)
        s[b, h, i, j] = math.exp(s[b, h, i, j] - m) * inv if j < n else float32(0.0)
    ### END SOLUTION


@cuda.jit
def pv(p, v, o):
    # p (B, H, S, S), v (B, H, S, d) -> o (B, H, S, d)
    # about 6 lines
    ### BEGIN SOLUTION
    c, i = cuda.grid(2)                      # x: column c of o (coalesced), y: query i
    bh = cuda.blockIdx.z
    H, S, d = v.shape[1], v.shape[2], v.shape[3]
    if i < S and c < d:
        b, h = bh // H, bh % H
        acc = float32(0.0)
        for j in range(S):
            acc += p[b, h, i, j] * v[b, h, j, c]
        o[b, h, i, c] = acc
    ### END SOLUTION


def launch_naive(q, k, v, causal, o):
    # q, k, v, o (B, H, S, d) fp32 device arrays; causal 0 or 1
    # about 5 lines
    ### BEGIN SOLUTION
    B, H, S, d = q.shape
    s = cuda.device_array((B, H, S, S), np.float32)        # the N² buffer
    scores[((S + TILE - 1) // TILE, (S + TILE - 1) // TILE, B * H), (TILE, TILE)](q, k, s, np.float32(1 / math.sqrt(d)))
    softmax_rows[(B * H * S + ROWS - 1) // ROWS, 32 * ROWS](s, causal)
    pv[((d + TILE - 1) // TILE, (S + TILE - 1) // TILE, B * H), (TILE, TILE)](s, v, o)
    ### END SOLUTION
""", "v1_naive"),
        md(r"""
### Checks

Fresh random inputs at every call, a float64 reference, outputs poisoned with NaN. Sizes include one
token, lengths that are no multiple of 16 or 32, causal and not, logits of ±300 (`kind="large"`: a
softmax without the max subtracted gives inf/NaN), and hidden sizes and seeds.
"""),
        tests(r"""
grader.check(launch_naive, P.attention_naive)
""", "test_naive_visible", 2),
        tests(r"""
grader.check(launch_naive, P.attention_naive, sizes=[P.Attn(1, 1, 9, 4, causal=True, kind="large")])
### BEGIN HIDDEN TESTS
grader.check(launch_naive, P.attention_naive, hidden=True)
### END HIDDEN TESTS
""", "test_naive_hidden", 2),
        md(r"""
## The N² wall, measured

For each S, `run_case` (the first half of `grader.check`) runs `launch_naive` once and reports the
device memory it allocated beside its inputs and outputs (`grader.memory` counts every Numba
allocation); `grader.measure` times it (GPU only). Then, on a GPU, the S × S buffer for the same
number of heads is allocated at ever larger S until the device refuses: that S is where this
algorithm stops working at all, whatever its speed.
"""),
        code(r"""
on_gpu = not grader.SIMULATOR
heads, d = (32, 64) if on_gpu else (2, 8)
lengths = [256, 512, 1024, 2048, 4096] if on_gpu else [4, 8, 16, 32]
wall = []                                          # (S, bytes allocated, seconds or nan)
for S in lengths:
    size = P.Attn(1, heads, S, d)
    inputs = P.attention_naive.make_inputs(np.random.default_rng(S), size)
    allocated = run_case(launch_naive, P.attention_naive, size, inputs).scratch_bytes
    m = grader.measure(launch_naive, P.attention_naive, f"S={S}", size=size, peer=None)
    wall.append((S, allocated, m.median_s))
    print(f"S = {S:5d}: allocated {grader.memory.human(allocated):>10}  (napkin 4·{heads}·S² = "
          f"{grader.memory.human(4 * heads * S * S)});  {m}")

no_fit = None                                      # the first S whose buffer the GPU refuses
if on_gpu:
    free, total = cuda.current_context().get_memory_info()
    S = lengths[-1]
    while no_fit is None and S <= 1 << 20:
        S *= 2
        try:
            buffer = cuda.device_array((1, heads, S, S), np.float32)
            del buffer
        except Exception as e:                     # CUDA_ERROR_OUT_OF_MEMORY
            no_fit = S
            print(f"S = {S}: {grader.memory.human(4 * heads * S * S)} refused ({type(e).__name__}); "
                  f"the GPU has {grader.memory.human(total)} ({grader.memory.human(free)} free)")
""", "wall"),
        code(r"""
peaks = grader.device.info().published or grader.device.published_peaks("H100 SXM")
S_all = np.array([w[0] for w in wall] + ([no_fit] if no_fit else []), dtype=float)
fig, (ax_mem, ax_t) = subplots(1, 2, figsize=(11, 4))
ax_mem.loglog([w[0] for w in wall], [w[1] for w in wall], "o", ms=7, label="allocated by launch_naive (measured)")
ax_mem.loglog(S_all, 4 * heads * S_all ** 2, "k--", lw=1, label=f"napkin: 4 B × {heads} heads × S²")
if no_fit:
    ax_mem.axhline(total, color="tab:red", lw=1, label=f"device memory ({grader.memory.human(total)})")
    ax_mem.plot([no_fit], [4 * heads * no_fit ** 2], "x", color="tab:red", ms=10, mew=2,
                label=f"S = {no_fit}: allocation refused")
ax_mem.set_xlabel("sequence length S"); ax_mem.set_ylabel("bytes"); ax_mem.legend(fontsize=7)
ax_mem.set_title(f"device memory, {heads} heads, d = {d}", fontsize=10)
if on_gpu:
    S_t = np.array([w[0] for w in wall], dtype=float)
    flops_floor = 4 * heads * S_t ** 2 * d / (peaks["fp32"] * 1e12)
    bytes_floor = 24 * heads * S_t ** 2 / (peaks["mem_GBps"] * 1e9)
    ax_t.loglog(S_t, [w[2] * 1e3 for w in wall], "o-", label="three kernels (measured)")
    ax_t.loglog(S_t, flops_floor * 1e3, "k:", lw=1, label=f"napkin: FLOPs at {peaks['fp32']} TFLOP/s")
    ax_t.loglog(S_t, bytes_floor * 1e3, "k--", lw=1, label=f"napkin: 24·S² B/head at {peaks['mem_GBps']} GB/s")
    ax_t.set_xlabel("sequence length S"); ax_t.set_ylabel("ms"); ax_t.legend(fontsize=7)
    ax_t.set_title(f"time on {grader.device.info().name}", fontsize=10)
else:
    ax_t.text(0.5, 0.5, "time: measured on a GPU", ha="center", va="center"); ax_t.axis("off")
fig.tight_layout()
fig
""", "wall_plot"),
        md(r"""
Both axes are logarithmic: a slope of 2 is S². The bytes sit exactly on the napkin line — the buffer
is all the memory this algorithm needs beyond its inputs, and it alone decides the longest sequence
that runs. Long before that, the time is spent streaming the buffer through memory, not multiplying.

**Measured on an H100** (2026-11-24, this notebook through the grader, 32 heads, d = 64): the
buffer is exactly 4·32·S² bytes at every S (8 MiB at 256 … 2 GiB at 4096); S = 32768 asks for
128 GiB and is refused on a GPU of 79.2 GiB. The three kernels run at 0.98 TFLOP/s at every S —
0.58 ms at S = 256, 140 ms at S = 4096, ×4 per doubling — about 1.5% of the fp32 peak: the buffer's
traffic, not the arithmetic, sets the time. In lesson 02 these kernels are the peer flash attention
must beat (`results/ch04/`).

## Stretch goals (no points)

- Fuse `pv` into `softmax_rows`: each warp normalizes its row and immediately forms
  `o[i] = Σ_j p_ij v_j`. How many passes over the buffer remain? Measure it.
- Store s in bf16 (uint16 bits, `grader.bf16`): half the bytes, and the wall moves by √2. Where?
- Causal attention computes and stores scores it then throws away (j > i): skip the blocks of
  `scores` above the diagonal. What fraction of the time does that save at S = 4096?
"""),
    ]
