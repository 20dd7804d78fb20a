"""04.02 flash attention on CUDA cores (Numba): K/V tiles, the online (m, l) recurrence, no N² buffer."""
from tools.nbbuild import code, md, solution, tests

NAME = "02_flash_attention_cuda_cores.ipynb"


def cells():
    return [
        md(r"""
# 04.02 Flash attention on CUDA cores

**What you will learn**
- attention in **one** kernel with no S × S buffer: keys and values stream through shared memory in
  tiles, and each query row carries its softmax state from tile to tile;
- the online softmax of 02.03, extended to an output vector: when the row max grows, the sum **and
  the running output** are rescaled by $e^{m_{old} - m_{new}}$;
- the causal mask inside a tile, and skipping the tiles a block never needs;
- memory that grows like the inputs, O(S·d) instead of O(S²) — measured by the grader, which fails a
  launch that allocates an S × S buffer — and a kernel faster than lesson 01's three.

**Builds on:** 02.03 (the online softmax state (m, l) and its merge), 04.01 (the three kernels).
Numba, fp32. Without a GPU it runs in the simulator at tiny sizes and is graded for correctness
(and for its memory); speed needs a GPU.
"""),
        code(r"""
import grader
import math
import numpy as np
from numba import cuda, float32
from grader.plot import subplots
from grader.problems import attention as P
from grader.problems.attention_naive import launch as launch_lesson01   # lesson 01's reference

NEG_INF = float32(-math.inf)
print(grader.mode())
""", "setup"),
        md(r"""
## The idea

Lesson 01 materialized every score. But a query row only ever needs three things from the keys it
has seen so far: the largest score **m**, the sum **l** of `exp(score − m)`, and the weighted sum of
values **acc** = Σ exp(score − m)·v. Keys arrive in tiles of BC; for a tile with scores $s_j$:

$$m' = \max(m, \max_j s_j), \quad \alpha = e^{m - m'}, \quad l' = \alpha\, l + \sum_j e^{s_j - m'}, \quad
\mathrm{acc}' = \alpha\,\mathrm{acc} + \sum_j e^{s_j - m'}\, v_j .$$

This is 02.03's merge of two partial states, (m, l) with (max of the tile, its sum), plus the output
vector, which is rescaled by the same α. After the last tile, $o = \mathrm{acc} / l$. Start from the
empty state (−∞, 0, 0); α = e^{−∞} = 0 makes the first tile right by itself (but −∞ − (−∞) is NaN:
skip the update while a row has seen no key, as a causal row past its keys would).

The picture follows one query row over 8 tiles of 32 keys whose scores drift upwards: each time the
tile's max beats m, α < 1 shrinks what was accumulated, so that every term ends up measured against
the final max.
"""),
        code(r"""
rng = np.random.default_rng(3)
S, BC_demo = 256, 32
s_row = rng.standard_normal(S) + np.linspace(0, 4, S)             # scores of one query row
v_row = rng.standard_normal(S)                                     # one column of V
m, l, acc, trace = -np.inf, 0.0, 0.0, []
for j0 in range(0, S, BC_demo):
    tile = s_row[j0:j0 + BC_demo]
    m_new = max(m, tile.max())
    alpha = math.exp(m - m_new)
    p = np.exp(tile - m_new)
    l, acc, m = alpha * l + p.sum(), alpha * acc + p @ v_row[j0:j0 + BC_demo], m_new
    trace.append((j0 + BC_demo, m, l, alpha, acc / l))
exact = np.exp(s_row - s_row.max()) @ v_row / np.exp(s_row - s_row.max()).sum()
ends, ms, ls, alphas, outs = (np.array(c) for c in zip(*trace))
fig, (ax1, ax2) = subplots(1, 2, figsize=(11, 3.4))
ax1.plot(s_row, ".", color="0.75", ms=3, label="scores of the row")
ax1.step(ends, ms, where="post", label="m after each tile")
ax1.bar(ends - BC_demo / 2, alphas * 2, width=BC_demo * 0.8, alpha=0.3, color="tab:red", label="α of the tile (× 2)")
ax1.set_xlabel("keys seen"); ax1.legend(fontsize=7); ax1.set_title("the running max and the rescale factor", fontsize=10)
ax2.plot(ends, ls, "o-", label="l: Σ exp(s − m) (left axis)")
ax2.set_ylabel("l")
ax3 = ax2.twinx()
ax3.plot(ends, outs, "s-", color="tab:orange", label="acc / l: the output so far (right axis)")
ax3.axhline(exact, color="k", ls="--", lw=1, label="exact softmax · v")
ax2.set_xlabel("keys seen"); ax2.set_title("the state after each tile", fontsize=10)
(h2, l2), (h3, l3) = ax2.get_legend_handles_labels(), ax3.get_legend_handles_labels()
ax2.legend(h2 + h3, l2 + l3, fontsize=7, loc="lower right")
fig.tight_layout()
fig
""", "picture"),
        md(r"""
## The kernel and its napkin math

A block owns BR = 128 query rows of one (batch, head), one thread per row. The thread keeps its row
of Q (times 1/√d), its running output `acc` (d floats) and (m, l). The block walks the keys in tiles
of BC = 32: all 128 threads copy the tile's K and V into shared memory (coalesced), wait at a
barrier, and each thread then scores its row against the 32 keys, updates its state, and accumulates
P·V from shared memory — every K and V element read from global memory once per block, then 128
times from shared memory (a broadcast: all threads of a warp read the same address). Causal: a block
whose last row is r stops at key r; keys past the diagonal (and past the end) get a score of −∞.

Memory beyond the inputs: none. FLOPs as in lesson 01 (4·S²·d per head), but the bytes of the S × S
buffer are gone: K and V are read S / BR times per head from global memory (often from L2). With
d = 64 the kernel is bound by the shared-memory loads that feed its FMAs (one 4-byte load per FMA on
CUDA cores), not by DRAM. The head dimension d is a compile-time constant of the kernel (`flash_kernel(d)`
builds one per d), so each thread's row of Q and of the output has a fixed size.

### Exercise: one tile of one row (about 25 lines)

Inside `if i < S:` for the tile starting at key `j0` (its K and V are in `ks`, `vs`):
1. the BC scores `sc[jj] = qi · ks[jj]` (loop over c outside, over jj inside: each `qi[c]` read once);
2. mask: `sc[jj] = −∞` for keys past the end (`j0 + jj ≥ S`) and, causal, in the future (`j > i`);
3. the tile's max, m', α; then `sc[jj] = exp(sc[jj] − m')` and l;
4. `acc[c] = α·acc[c] + Σ_jj sc[jj]·vs[jj, c]`; m = m'. Skip 3–4 while m' is −∞.
"""),
        solution(r"""
BR = 128       # query rows per block, one thread each
BC = 32        # keys per tile
_kernels = {}


def flash_kernel(d):
    # the kernel for head dimension d (a compile-time constant: fixed-size per-thread rows)
    if d in _kernels:
        return _kernels[d]

    @cuda.jit
    def flash(q, k, v, causal, o):
        # q, k, v, o (B, H, S, d) fp32; a block: BR query rows of one (batch, head)
        tid = cuda.threadIdx.x
        i = cuda.blockIdx.x * BR + tid                # this thread's query row
        bh = cuda.blockIdx.y
        H, S = q.shape[1], q.shape[2]
        b, h = bh // H, bh % H
        ks = cuda.shared.array((BC, d), float32)      # (BC, d): the keys of one tile
        vs = cuda.shared.array((BC, d), float32)      # (BC, d): their values
        qi = cuda.local.array(d, float32)             # (d,) this row of Q, times 1/√d
        acc = cuda.local.array(d, float32)            # (d,) the running output row, unnormalized
        sc = cuda.local.array(BC, float32)            # (BC,) this tile's scores, then exp(score − m)
        scale = float32(1.0 / math.sqrt(d))
        for c in range(d):
            qi[c] = q[b, h, i, c] * scale if i < S else float32(0.0)
            acc[c] = float32(0.0)
        m = NEG_INF                                   # the row's running max
        l = float32(0.0)                              # Σ exp(score − m) so far
        row_end = min(S, (cuda.blockIdx.x + 1) * BR)  # causal: no row of this block sees key row_end
        n_keys = row_end if causal else S
        for j0 in range(0, n_keys, BC):
            for e in range(tid, BC * d, BR):          # the block copies one K/V tile, coalesced
                r, c = e // d, e % d
                if j0 + r < S:
                    ks[r, c] = k[b, h, j0 + r, c]
                    vs[r, c] = v[b, h, j0 + r, c]
                else:
                    ks[r, c] = float32(0.0)
                    vs[r, c] = float32(0.0)
            cuda.syncthreads()                        # the tile is in shared memory
            if i < S:
                # about 25 lines
                ### BEGIN SOLUTION
                for jj in range(BC):                  # 1. scores, BC at a time
                    sc[jj] = float32(0.0)
                for c in range(d):
                    qc = qi[c]
                    for jj in range(BC):
                        sc[jj] += qc * ks[jj, c]
                m_tile = NEG_INF
                for jj in range(BC):                  # 2. mask the end and (causal) the future
                    j = j0 + jj
                    if j >= S or (causal and j > i):
                        sc[jj] = NEG_INF
                    m_tile = max(m_tile, sc[jj])
                m_new = max(m, m_tile)
                if m_new != NEG_INF:                  # the row has seen a key
                    alpha = math.exp(m - m_new)       # 3. rescale what was summed against the old max
                    l *= alpha
                    for jj in range(BC):
                        sc[jj] = math.exp(sc[jj] - m_new)
                        l += sc[jj]
                    for c in range(d):                # 4. acc = α·acc + P·V
                        a = acc[c] * alpha
                        for jj in range(BC):
                            a += sc[jj] * vs[jj, c]
                        acc[c] = a
                    m = m_new
                ### END SOLUTION
            cuda.syncthreads()                        # everyone is done with this tile
        if i < S:
            inv = float32(1.0) / l if l > float32(0.0) else float32(0.0)
            for c in range(d):
                o[b, h, i, c] = acc[c] * inv

    _kernels[d] = flash
    return flash


def launch_flash(q, k, v, causal, o):
    B, H, S, d = q.shape
    flash_kernel(d)[((S + BR - 1) // BR, B * H), BR](q, k, v, causal, o)
""", "v1_flash"),
        md(r"""
### Checks: correct, and no N² buffer

The same float64 reference and sizes as lesson 01, plus tiles that matter: several tiles with a max
that keeps growing (`kind="growing"`: an output that is not rescaled fails), logits of ±300, ragged
last tiles. While the launch function runs, `grader.check` counts the device memory it allocates
(`grader.memory`); this problem allows 16·B·H·S·(d + 4) bytes — four fp32 copies of the inputs, with
room for per-row statistics — so an S × S buffer fails as soon as S > 4·(d + 4) (S = 65 at d = 4 in
the simulator; every GPU size from S = 300 up).
"""),
        tests(r"""
grader.check(launch_flash, P.flash_attention)
""", "test_flash_visible", 3),
        tests(r"""
grader.check(launch_flash, P.flash_attention, sizes=[P.Attn(1, 1, 40, 8, causal=True, kind="growing")])
### BEGIN HIDDEN TESTS
grader.check(launch_flash, P.flash_attention, hidden=True)
### END HIDDEN TESTS
""", "test_flash_hidden", 3),
        md(r"""
Lesson 01's three kernels give the right values — and fail here, for their memory:
"""),
        code(r"""
try:
    grader.check(launch_lesson01, P.flash_attention, sizes=[P.Attn(1, 1, 65, 4)], quiet=True)
except grader.CheckFailed as e:
    print(str(e).splitlines()[1])
"""),
        md(r"""
## Speed (graded): faster than lesson 01, in the same run

The speed cell times `launch_flash` at B = 2, H = 16, S = 4096, d = 64 and, on the same inputs in the
same run, lesson 01's three kernels (the grader's own copy of that lesson's reference, with its S × S
buffer allocated outside the timed region). **Full points at 1.0× the three kernels**, nothing at
0.25×. The course's goal for its reference solution is 3×.

**Measured on an H100** (2026-11-24, this notebook through the grader): 12.0 TFLOP/s against 0.97 for
the three kernels in the same run — **12.3×** (11.4 ms against 141 ms).
"""),
        tests(r"""
grader.speed(launch_flash, P.flash_attention, points=2)
""", "speed_flash", 2),
        md(r"""
## Closing plot

The kernel as a multiple of lesson 01's three kernels (measured now; without a GPU, the reference's
recorded run).
"""),
        code(r"""
grader.ladder_plot({"v1 flash: one thread per query row, K/V tiles of 32": launch_flash}, P.flash_attention,
                   extra=[("lesson 01: three kernels and the S × S buffer", 1.0)],
                   title="attention fp32, B·H = 32, S = 4096, d = 64: × lesson 01 (same run)")
"""),
        md(r"""
## Stretch goals (no points)

- Two query rows per thread: every shared-memory load then feeds two FMAs. How close does it get to
  the fp32 FMA peak?
- The causal blocks near the top do 1/32 of the work of the last ones; launch the longest first
  (reverse `blockIdx.x`) and measure at S = 4096.
- Split d across a few threads per row (with a shuffle to finish each score): fewer registers per
  thread, more threads per block.
- Lesson 03 does the same on tensor cores, with P never leaving registers.
"""),
    ]
