"""Chapter 05 (Hopper): wrong kernels that the lesson's checks must catch (tests/test_ch05_hopper.py).

* 05.01's %%cuda cell with one mistake each (text replaced, as tests/wrong/ch04_attention.py does).
  They compile anywhere; the SASS rubric catches the missing proxy fence on any machine, and the
  values (or the GPU timeout) catch the others on a GPU (tests marked ``gpu``).
* A transpose with the same name and type moved by plain loads and stores: the rubric must fail it.
* A host-side mistake: the tensor maps encoded without the swizzle the kernel assumes.
"""
from __future__ import annotations

CHAPTER = "05_hopper_blackwell"
NOTEBOOK, CELL = "01_tma.ipynb", "v_tma"

TMA_MISTAKES = {
    # the wait names the parity of the phase before: a barrier answers that at once, before the box
    # lands; the leader then arms the slot again while its phase is still pending, the barrier's
    # counts go wrong, and a later wait hangs (on an H100, 2026-11-24: a 1000 × 4 transpose hung)
    "wrong_parity": [("course::mbar_wait(&full[s], (i / S) & 1);",
                      "course::mbar_wait(&full[s], ((i / S) & 1) ^ 1);")],
    # expect-tx counts the box twice: the phase waits for 4 KiB that never come (a hang, stopped by
    # the grader's GPU timeout)
    "expect_tx_bytes": [("course::mbar_arrive_expect_tx(&full[s], Cfg::BOX_BYTES);",
                         "course::mbar_arrive_expect_tx(&full[s], 2 * Cfg::BOX_BYTES);")],
    # the TMA store may read the box before the threads' st.shared are visible to the async proxy
    "no_proxy_fence": [("    course::fence_proxy_async();\n", "")],
    # the store's coordinates in a's order ({row, column} of t swapped): boxes land in the wrong place
    "coords_swapped": [("course::tma_store_2d(&t_map, t_box, (first + i) * BOX, n0);",
                        "course::tma_store_2d(&t_map, t_box, n0, (first + i) * BOX);")],
    # a's box read as if TMA had stored it plainly (row-major), ignoring the 128-byte swizzle
    "unswizzled_read": [("t_box[swz(c, r)] = a_box[swz(r, c)];", "t_box[swz(c, r)] = a_box[r * 32 + c];")],
}
# run in a subprocess: a kernel that never returns leaves the process's GPU unusable, so these are
# checked one per process, with a short GPU timeout (GRADER_GPU_TIMEOUT) that must end them with a message
HANGS = {"expect_tx_bytes", "wrong_parity"}
MUST_TIME_OUT = {"expect_tx_bytes"}       # always a hang: bytes that never come
RUBRIC_CATCHES = {"no_proxy_fence": "FENCE.VIEW.ASYNC.S"}


def cpp_variant(source: str, replacements: list) -> str:
    """A %%cuda cell's source with each (old, new) applied; each old must occur exactly once."""
    for old, new in replacements:
        assert source.count(old) == 1, f"the cell changed: {old[:70]!r} occurs {source.count(old)} times"
        source = source.replace(old, new)
    return source


# The same kernel name and configuration type, moved by plain loads and stores (01.03's padded tile):
# right on a GPU, but the rubric must fail it (no UTMALDG/UTMASTG, LDG and STG present).
PLAIN_LOADS = r'''%%cuda tp -k "tma_transpose<Tp<8, 2>>"
#include "course.cuh"
template <int TILES_, int STAGES_>
struct Tp {
  static constexpr int BOX = 32, TILES = TILES_, STAGES = STAGES_, THREADS = 128;
  static constexpr int TILE_M = BOX * TILES, TILE_N = BOX, SMEM_BYTES = 0;
};
template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
tma_transpose(const float* __restrict__ a, float* __restrict__ t, int M, int N) {
  __shared__ float tile[32][33];
  const int n0 = blockIdx.x * 32;
  for (int m0 = blockIdx.y * Cfg::TILE_M; m0 < min(M, (blockIdx.y + 1) * Cfg::TILE_M); m0 += 32) {
    for (int r = threadIdx.x / 32; r < 32; r += Cfg::THREADS / 32)
      if (m0 + r < M && n0 + threadIdx.x % 32 < N) tile[r][threadIdx.x % 32] = a[(m0 + r) * (long)N + n0 + threadIdx.x % 32];
    __syncthreads();
    for (int r = threadIdx.x / 32; r < 32; r += Cfg::THREADS / 32)
      if (n0 + r < N && m0 + threadIdx.x % 32 < M) t[(n0 + r) * (long)M + m0 + threadIdx.x % 32] = tile[threadIdx.x % 32][r];
    __syncthreads();
  }
}
'''
