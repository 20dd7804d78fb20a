"""Chapter 04 (attention): wrong kernels that grader.check must catch (tests/test_ch04_attention.py).

* Lessons 01–02 (Numba): the notebooks' own reference cells with one mistake each (text replaced,
  as tests/wrong/ch03_gemm.py does), run in the simulator.
* Lessons 03–05 (CUDA C++): the notebooks' %%cuda cells with one mistake each (text replaced). They
  compile anywhere; the proof that the checks catch them runs on a GPU (tests marked ``gpu``).
* Numba stand-ins of the C++ mistakes, for the simulator: a plain attention kernel and a plain
  split-KV decode with a flag per mistake, right without flags, so the problems' inputs are proven
  to catch each mistake on any machine.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32
from numba.core.types import float16

from grader.bf16 import from_float, to_float

CHAPTER = "04_attention"

# ---------------------------------------------------------------- lessons 01-02: one mistake each
NAIVE_MISTAKES = {     # in solutions/04_attention/01_naive_attention.ipynb, cell v1_naive
    # the softmax without the row max subtracted: exp overflows on logits of ±300
    "no_max": [("total += math.exp(s[b, h, i, j] - m)", "total += math.exp(s[b, h, i, j])"),
               ("math.exp(s[b, h, i, j] - m) * inv", "math.exp(s[b, h, i, j]) * inv")],
    # a causal row also sees the key just after it
    "causal_off_by_one": [("n = i + 1 if causal else S", "n = min(i + 2, S) if causal else S")],
}
FLASH_MISTAKES = {     # in solutions/04_attention/02_flash_attention_cuda_cores.ipynb, cell v1_flash
    "no_max": [("alpha = math.exp(m - m_new)", "alpha = float32(1.0)"),
               ("sc[jj] = math.exp(sc[jj] - m_new)", "sc[jj] = math.exp(sc[jj])")],
    "causal_off_by_one": [("(causal and j > i)", "(causal and j > i + 1)")],
    # the running output is not rescaled when the max grows (l still is)
    "no_rescale": [("a = acc[c] * alpha", "a = acc[c]")],
    # keys past the end of a ragged last tile are not masked (their zero-filled scores count)
    "kv_past_end": [("if j >= S or (causal and j > i):", "if causal and j > i:")],
}


def lesson_variant(notebook: str, cell_id: str, replacements: list, launch: str, extra_cells=()):
    """The launch function ``launch`` of a notebook cell with text replaced (each old text once)."""
    from grader.notebooks import cell_source
    from tests.conftest import lesson, solution

    ns = lesson(CHAPTER, notebook, list(extra_cells))
    src = cell_source(solution(CHAPTER, notebook), cell_id)
    for old, new in replacements:
        assert src.count(old) == 1, f"{notebook}:{cell_id} changed: {old!r} not found once"
        src = src.replace(old, new)
    src = src.replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", "")
    exec(compile(src, f"{cell_id}-variant", "exec"), ns)
    return ns[launch]


def naive_with(mistake: str):
    return lesson_variant("01_naive_attention.ipynb", "v1_naive", NAIVE_MISTAKES[mistake], "launch_naive")


def flash_with(mistake: str):
    return lesson_variant("02_flash_attention_cuda_cores.ipynb", "v1_flash", FLASH_MISTAKES[mistake], "launch_flash")


def flash_plus_n2_buffer(launch_flash):
    """Lesson 02's right kernel, launched by a function that also allocates an S × S scratch buffer
    (values right, memory O(S²)): the memory bound must catch it."""
    def launch(q, k, v, causal, o):
        B, H, S, _ = q.shape
        scratch = cuda.device_array((B, H, S, S), np.float32)      # never needed
        assert scratch.shape[3] == S
        launch_flash(q, k, v, causal, o)
    return launch


# ---------------------------------------------------------------- lessons 03-05: C++ mistakes
# (notebook, cell, {mistake: [(old, new), ...]}); every old text must occur exactly once.
_F16_HELPERS = r"""
// ---- wrong-kernel helpers: fp16 math for the P·V product ---------------------------------------
__device__ __forceinline__ unsigned f16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ float f16_lo(unsigned v) {
  float f;
  asm("{ .reg .f16 h; mov.b32 {h, _}, %1; cvt.f32.f16 %0, h; }\n" : "=f"(f) : "r"(v));
  return f;
}
__device__ __forceinline__ float f16_hi(unsigned v) {
  float f;
  asm("{ .reg .f16 h; mov.b32 {_, h}, %1; cvt.f32.f16 %0, h; }\n" : "=f"(f) : "r"(v));
  return f;
}
__device__ __forceinline__ unsigned bf16x2_as_f16x2(unsigned v) {
  return f16x2(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
}
__device__ __forceinline__ void mma_f16_acc16(unsigned (&d)[2], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};\n"
      : "+r"(d[0]), "+r"(d[1]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
"""

# P·V in fp16: the running output converted to fp16 before the P·V loop (_PV16_BEFORE), V's fragments
# reinterpreted as fp16, mma.sync with fp16 accumulators, and converted back after it (_PV16_AFTER)
_PV16_BEFORE = """unsigned acc16[MT][DT][2];                               // wrong: the running output in fp16
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int n = 0; n < DT; ++n)
        acc16[i][n][0] = f16x2(acc[i][n][0], acc[i][n][1]), acc16[i][n][1] = f16x2(acc[i][n][2], acc[i][n][3]);
#pragma unroll
    for (int kk = 0; kk < KC; ++kk)"""
_PV16_AFTER = """
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int n = 0; n < DT; ++n) {
        acc[i][n][0] = f16_lo(acc16[i][n][0]), acc[i][n][1] = f16_hi(acc16[i][n][0]);
        acc[i][n][2] = f16_lo(acc16[i][n][1]), acc[i][n][3] = f16_hi(acc16[i][n][1]);
      }"""
_V_LD = "course::ldmatrix_x4_trans(vb[0], vb[1], vb[2], vb[3], rd + ((v_ld + kk * 16 * D * 2) ^ (dd * 32)));"
_PV_LAST = "mma_bf16(acc[i][2 * dd + 1], pa[i][kk], vb[2], vb[3]);\n        }\n      }"

FA2_KERNEL_HEAD = "template <class C>\n__global__ void __launch_bounds__(C::THREADS, C::MINB)\nfa2("

CPP_MISTAKES = {
    "fa2": ("03_fa2_tensor_cores.ipynb", "v_fa2", {
        # p = 2^(s·scale·log2 e) with no max subtracted: overflows on logits of ±300
        "no_max": [("const float ref = ref_point(m_run[i][hh]);", "const float ref = 0.f;")],
        "causal_off_by_one": [("(causal && col > row)", "(causal && col > row + 1)")],
        # the running output is not rescaled when the row max grows (l still is)
        "no_rescale": [("for (int n = 0; n < DT; ++n) acc[i][n][2 * hh] *= alpha, acc[i][n][2 * hh + 1] *= alpha;",
                        "(void)acc;")],
        # keys past Sk in a ragged last tile are not masked (their zero-filled scores count)
        "kv_past_end": [("if (col >= Sk || (causal && col > row))", "if (causal && col > row)")],
        # P·V accumulated in fp16 (P packed as fp16, the running output passed through fp16 each tile)
        "fp16_pv": [(FA2_KERNEL_HEAD, _F16_HELPERS + FA2_KERNEL_HEAD),
                    ("pa[i][n / 2][(n % 2) * 2 + hh] = pack_bf16(p0, p1);", "pa[i][n / 2][(n % 2) * 2 + hh] = f16x2(p0, p1);"),
                    ("#pragma unroll\n    for (int kk = 0; kk < KC; ++kk)", _PV16_BEFORE),
                    (_V_LD, _V_LD + "\n#pragma unroll\n        for (int e = 0; e < 4; ++e) vb[e] = bf16x2_as_f16x2(vb[e]);"),
                    ("mma_bf16(acc[i][2 * dd], pa[i][kk], vb[0], vb[1]);",
                     "mma_f16_acc16(acc16[i][2 * dd], pa[i][kk], vb[0], vb[1]);"),
                    (_PV_LAST, _PV_LAST.replace("mma_bf16(acc[", "mma_f16_acc16(acc16[") + _PV16_AFTER)],
    }),
    "decode": ("04_decoding.ipynb", "v_decode", {
        # query head g of KV head j taken as g·Hkv + j (interleaved) instead of j·G + g
        "gqa_head": [("h = kvh * G + gi;", "h = gi * Hkv + kvh;")],
        # the split-KV chunks averaged, without their log-sum-exp weights
        "combine_no_lse": [("const float w = __expf(__ldcg(lse_row + s) - ref);", "const float w = 1.f + 0.f * ref;")],
        # the block table ignored: sequence b's pages assumed at b·max_pages + i
        "page_ignored": [("const int page = __ldg(block_table + (size_t)b * (cap >> page_shift) + (tk >> page_shift));",
                          "const int page = b * (cap >> page_shift) + (tk >> page_shift);")],
        # tokens past L_b read and not masked (the last tile of a chunk taken as full)
        "kv_past_end": [("const bool full = (j + 1) * BN <= ntok;", "const bool full = true;"),
                        ("if ((j + 1) * BN > ntok) {", "if (false) {")],
    }),
}

# The same cells with ldmatrix and cp.async replaced by plain shared-memory code (compiles, and the
# SASS rubric must then fail: no LDSM, no LDGSTS).
_PLAIN_HELPERS = r"""
// ---- rubric test: ldmatrix / cp.async replaced by plain loads and stores ----------------------------
__device__ __forceinline__ void plain_copy_16(unsigned saddr, const void* g) {
  *reinterpret_cast<uint4*>(__cvta_shared_to_generic(saddr)) = *reinterpret_cast<const uint4*>(g);
}
__device__ __forceinline__ void plain_copy_16z(unsigned saddr, const void* g, unsigned n) {
  *reinterpret_cast<uint4*>(__cvta_shared_to_generic(saddr)) = n ? *reinterpret_cast<const uint4*>(g) : make_uint4(0, 0, 0, 0);
}
__device__ __forceinline__ void plain_ldsm_x4(unsigned (&r)[4], unsigned saddr) {
  const unsigned* p = reinterpret_cast<const unsigned*>(__cvta_shared_to_generic(saddr));
  r[0] = p[0], r[1] = p[1], r[2] = p[2], r[3] = p[3];
}
__device__ __forceinline__ void plain_ldsm_x4_trans(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, unsigned saddr) {
  const unsigned* p = reinterpret_cast<const unsigned*>(__cvta_shared_to_generic(saddr));
  r0 = p[0], r1 = p[1], r2 = p[2], r3 = p[3];
}
"""
PLAIN = [("course::ldmatrix_x4_trans(", "plain_ldsm_x4_trans("), ("course::ldmatrix_x4(", "plain_ldsm_x4("),
         ("course::cp_async_16(", "plain_copy_16("), ("cp_async_16z(", "plain_copy_16z(")]


def cpp_variant(source: str, replacements: list) -> str:
    """A %%cuda cell's source with each (old, new) applied; each old must occur exactly once."""
    for old, new in replacements:
        assert source.count(old) == 1, f"the cell changed: {old[:70]!r} occurs {source.count(old)} times"
        source = source.replace(old, new)
    return source


def without_ldmatrix_and_cp_async(source: str) -> str:
    """The cell with every ldmatrix and cp.async replaced by plain loads and stores."""
    first, _, body = source.partition("\n")
    for old, new in PLAIN:
        body = body.replace(old, new)
    at = body.index("using namespace attn;")
    return first + "\n" + body[:at] + "using namespace attn;\n" + _PLAIN_HELPERS + body[at + len("using namespace attn;"):]


# ---------------------------------------------------------------- Numba stand-ins (simulator)
MAX_KEYS = 128          # the stand-ins keep one row's probabilities in a local array


@cuda.jit
def _attention_rows(q, k, v, causal, o, fp16_acc):
    # bf16 attention, one thread per query row: the max, then the probabilities, then P·V per column
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    bh = cuda.blockIdx.y
    H, S, d = q.shape[1], q.shape[2], q.shape[3]
    Hkv, Sk = k.shape[1], k.shape[2]
    if i >= S:
        return
    b, h = bh // H, bh % H
    hk = h // (H // Hkv)
    n = min(i + 1, Sk) if causal else Sk
    p = cuda.local.array(MAX_KEYS, float32)
    m = float32(-math.inf)
    for j in range(n):
        s = float32(0.0)
        for c in range(d):
            s += to_float(q[b, h, i, c]) * to_float(k[b, hk, j, c])
        p[j] = s / math.sqrt(d)
        m = max(m, p[j])
    total = float32(0.0)
    for j in range(n):
        p[j] = math.exp(p[j] - m)
        total += p[j]
    for c in range(d):
        if fp16_acc:
            acc16 = float16(0.0)
            for j in range(n):
                acc16 = float16(acc16 + float16(p[j] * to_float(v[b, hk, j, c])))
            acc = float32(acc16)
        else:
            acc = float32(0.0)
            for j in range(n):
                acc += p[j] * to_float(v[b, hk, j, c])
        o[b, h, i, c] = from_float(acc / total if n > 0 else float32(0.0))


def attention_standin(fp16_acc: bool = False):
    """A launch(q, k, v, causal, o) of bf16 attention; fp16_acc: P·V accumulated in fp16."""
    def launch(q, k, v, causal, o):
        B, H, S, _ = q.shape
        _attention_rows[((S + 31) // 32, B * H), 32](q, k, v, causal, o, fp16_acc)
    return launch


CHUNK = 4               # tokens per split of the decode stand-in (several splits at tiny sizes)


@cuda.jit
def _decode_partials(q, kc, vc, table, lens, page, o_part, lse_part, interleaved, past_end, ignore_table):
    # thread (b·Hq + h, split): its chunk's normalized output and log-sum-exp
    bh, sp = cuda.grid(2)
    B, Hq, d = q.shape
    if bh >= B * Hq or sp >= o_part.shape[2]:
        return
    b, h = bh // Hq, bh % Hq
    Hkv = kc.shape[2] if page else kc.shape[1]
    G = Hq // Hkv
    j = h % Hkv if interleaved else h // G
    L = lens[b]
    t0, t1 = sp * CHUNK, sp * CHUNK + CHUNK
    if not past_end:
        t1 = min(t1, L)
    m, l = float32(-math.inf), float32(0.0)
    for c in range(d):
        o_part[b, h, sp, c] = float32(0.0)
    for t in range(t0, t1):
        pg, r = b, t                             # where token t of KV head j lives
        if page:
            pg = b * table.shape[1] + t // page if ignore_table else table[b, t // page]
            r = t % page
        s = float32(0.0)
        for c in range(d):
            kk = to_float(kc[pg, r, j, c]) if page else to_float(kc[b, j, t, c])
            s += to_float(q[b, h, c]) * kk
        s /= math.sqrt(d)
        m_new = max(m, s)
        alpha = math.exp(m - m_new)
        pt = math.exp(s - m_new)
        l = l * alpha + pt
        for c in range(d):
            vv = to_float(vc[pg, r, j, c]) if page else to_float(vc[b, j, t, c])
            o_part[b, h, sp, c] = o_part[b, h, sp, c] * alpha + pt * vv
        m = m_new
    for c in range(d):
        o_part[b, h, sp, c] = o_part[b, h, sp, c] / l if l > 0 else float32(0.0)
    lse_part[b, h, sp] = m + math.log(l) if l > 0 else float32(-math.inf)


@cuda.jit
def _decode_merge(o_part, lse_part, lens, o, no_lse):
    bh = cuda.grid(1)
    B, Hq, d = o.shape
    if bh >= B * Hq:
        return
    b, h = bh // Hq, bh % Hq
    ns = min(o_part.shape[2], (lens[b] + CHUNK - 1) // CHUNK)
    M = float32(-math.inf)
    for s in range(ns):
        M = max(M, lse_part[b, h, s])
    for c in range(d):
        acc, W = float32(0.0), float32(0.0)
        for s in range(ns):
            w = float32(1.0) if no_lse else math.exp(lse_part[b, h, s] - M)
            acc += w * o_part[b, h, s, c]
            W += w
        o[b, h, c] = from_float(acc / W if W > 0 else float32(0.0))


def decode_standin(paged: bool = False, interleaved=False, no_lse=False, past_end=False, ignore_table=False):
    """A split-KV decode launch (contiguous or paged inputs) with the flagged mistakes."""
    def run(q, kc, vc, table, lens, o, cap, page):
        B, Hq, d = q.shape
        ns = max(1, (cap + CHUNK - 1) // CHUNK)
        o_part = cuda.device_array((B, Hq, ns, d), np.float32)
        lse_part = cuda.device_array((B, Hq, ns), np.float32)
        _decode_partials[((B * Hq + 15) // 16, ns), (16, 1)](q, kc, vc, table, lens, page, o_part, lse_part,
                                                             interleaved, past_end, ignore_table)
        _decode_merge[(B * Hq + 31) // 32, 32](o_part, lse_part, lens, o, no_lse)

    if paged:
        def launch(q, k_pages, v_pages, block_table, seq_lens, o):
            run(q, k_pages, v_pages, block_table, seq_lens, o, block_table.shape[1] * k_pages.shape[1], k_pages.shape[1])
    else:
        def launch(q, k_cache, v_cache, seq_lens, o):
            run(q, k_cache, v_cache, cuda.to_device(np.zeros((1, 1), np.int32)), seq_lens, o, k_cache.shape[2], 0)
    return launch
