"""05.06 Blackwell (CUDA C++, sm_100a): tcgen05.mma and tensor memory, UMMA descriptors checked on the
CPU, CTA pairs, block-scaled MXFP8 / NVFP4, FA4's exp2 on FMA units and conditional rescaling, one
kernel in the CuTe DSL. Graded everywhere by its machine code and its descriptors; run only on sm_100."""
from tools.ch05_hopper import cell
from tools.nbbuild import code, md, solution, tests

NAME = "06_blackwell.ipynb"

G1, G2 = "umma_gemm<G<1, 256, 4>>", "umma_gemm<G<2, 256, 6>>"


def cells():
    return [
        md(r"""
# 05.06 Blackwell: tcgen05, tensor memory, CTA pairs, block scaling, FA4's ideas

**What you will learn**
- Blackwell's fifth-generation tensor cores: **one thread** issues `tcgen05.mma`, the operands come
  from shared memory through **descriptors**, the accumulator lives in **tensor memory** (TMEM: 128
  lanes × 512 columns of 32 bits per SM), and completion is signalled with `tcgen05.commit` on an
  mbarrier — no registers hold the tile;
- the **UMMA descriptors** — a 64-bit shared-memory descriptor per operand and a 32-bit instruction
  descriptor — encoded by you in Python and checked on the CPU against where TMA put every byte;
- **CTA pairs** (`cta_group::2`): two SMs run one 256-row MMA, each holding half of A and half of B;
  the kernel must be launched in clusters of 2, and the launch function refuses it otherwise;
- **block-scaled** MXFP8 and NVFP4 MMAs, their scale factors held in tensor memory;
- two ideas of **FlashAttention-4**: 2^x computed on the FMA units with a cubic (the special-function
  unit is the bottleneck once the MMAs are this fast), and rescaling the softmax only when the row
  maximum grows by more than a threshold; and one kernel in the **CuTe DSL** (Python, JIT-compiled).

**Builds on:** 05.01 (TMA, the mbarrier and its parity), 03.04 (shared-memory swizzles, the launch
contract), 02.03 (the online softmax), 04.03 (flash attention).

**What runs where — read this first.** `tcgen05` exists only on datacenter Blackwell (B200/GB200:
compute capability 10.0, `sm_100a`). Hopper (`sm_90a`) and the RTX Blackwell GPUs (`sm_120a`) reject
it when compiling. So on **every** machine this lesson compiles its kernels for `sm_100a`, reads
their machine code (SASS) and checks your descriptors in Python: those cells earn points anywhere.
The correctness and speed cells of the Blackwell kernels run only on an sm_100 GPU; elsewhere they
say *"compiled and inspected only: running it needs a Blackwell GPU (B200/GB200, sm_100a)"* and earn
nothing. The exp2 kernel runs on any GPU from Ampere on.

**Honesty about this lesson's kernels.** They were written from the PTX ISA and CUTLASS's sources and
checked by compiling and disassembling them, and the descriptors by replaying their addressing on
the CPU — but the course's authors had **no Blackwell GPU** when writing it, so **none of the
tcgen05 kernels has been run yet**. A descriptor bug shows up only on the hardware, as a launch
failure, a hang or silent garbage; the CPU checker below catches the ones that can be caught from
the bits alone. The scale-factor layout of the block-scaled MMAs is the part most likely to need a
fix on first contact with a B200. The goal for the GEMM — at least 90% of cuBLAS on Blackwell —
**has not been measured**.
"""),
        code(r"""
import grader
import numpy as np
from grader.cuda import compile_cuda, sass, umma
from grader.plot import subplots
from grader.problems import blackwell as P

print(grader.mode(), "| this machine's GPU:", grader.cuda.toolchain.compute_capability() or "none",
      "| the Blackwell kernels compile for sm_100a")
""", "setup"),
        md(r"""
## What changed from Hopper

| | Hopper (`wgmma`, 05.02) | Blackwell (`tcgen05.mma`) |
|---|---|---|
| who issues | a warpgroup (128 threads) | **one thread** |
| A, B | shared memory (A may be registers) | shared memory through descriptors (A may be TMEM) |
| accumulator | registers of the warpgroup | **tensor memory**, allocated with `tcgen05.alloc` |
| largest tile of one instruction | 64 × 256 × 16 | 128 × 256 × 16 (one SM); 256 × 256 × 16 (a CTA pair) |
| completion | `wgmma.wait_group` | `tcgen05.commit` → an mbarrier arrival |
| results to registers | already there | `tcgen05.ld` (warp w reads lanes 32·(w mod 4) …) |

**Napkin math.** A 128 × 256 fp32 accumulator is 128 KiB: as registers it would be 256 per thread of
a 128-thread warpgroup — more than a thread may hold (255), and half the SM's register file (Hopper
splits such a tile over two warpgroups). In tensor memory it takes 256 of the SM's 512
columns, so two tiles fit (one accumulating while the other is read out), and the registers are free
for the epilogue. One `tcgen05.mma` of 128 × 256 × 16 is 1 MFLOP; a B200 does about 2.2 PFLOP/s of
dense bf16 over 148 SMs, ≈ 15 TFLOP/s per SM, so one such MMA every ≈ 70 ns per SM. A 128 × 256 tile
with K steps of 64 needs 48 KiB from memory per 4 MFLOP — 85 FLOP per byte, more than HBM's
≈ 8 TB/s can feed (2.2 P / 8 T ≈ 280 FLOP/B) without L2 reuse; a CTA pair computing 256 × 256 loads
half of B per SM: 128 FLOP per byte per SM.

### Tensor memory, allocated and given back

`tcgen05.alloc` (one whole warp) asks for a power of 2 of columns, 32 … 512, and writes the address
(lane in bits 31–16, column in 15–0) to shared memory; `tcgen05.relinquish_alloc_permit` says this
CTA will ask for no more (so another CTA on the SM may); `tcgen05.dealloc` gives the columns back —
**every allocation must be freed before the CTA exits**, or the next CTA on that SM waits forever
for columns. Between a tcgen05 operation in one thread and its use in another, the threads
synchronise with `tcgen05.fence::before_thread_sync` → barrier → `tcgen05.fence::after_thread_sync`.
"""),
        md(r"""
## Which machines accept tcgen05

The same few lines compiled for three targets: Hopper and RTX Blackwell refuse them in ptxas, the
datacenter Blackwell target builds them. This runs here, with no GPU needed.
"""),
        code(r"""
PROBE = r'''
#include "course.cuh"
#include "tcgen05.cuh"
extern "C" __global__ void probe(unsigned* out, unsigned long long a, unsigned long long b, unsigned idesc) {
  __shared__ unsigned taddr;
  __shared__ unsigned long long bar;
  if (threadIdx.x < 32) { course::tmem_alloc<1>(&taddr, 32); course::tmem_relinquish<1>(); }
  __syncthreads();
  if (threadIdx.x == 0) { course::umma_f16<1>(taddr, a, b, idesc, false); course::umma_commit(&bar); }
  unsigned v[16];
  course::tmem_ld16(taddr, v); course::tmem_wait_ld();
  out[threadIdx.x] = v[0];
  __syncthreads();
  if (threadIdx.x < 32) course::tmem_dealloc<1>(taddr, 32);
}
'''
for arch in ["sm_90a", "sm_120a", "sm_100a"]:
    try:
        m = compile_cuda(PROBE, name="probe", arch=arch)
        ops = sass.opcodes(m, "probe", full=True)
        print(f"{arch}: builds; tcgen05 opcodes:", ", ".join(sorted(o for o in ops if o.startswith(("UTC", "LDTM", "UVIRT")))))
    except grader.cuda.CompileError as e:
        print(f"{arch}: refused —", str(e).splitlines()[0])
""", "targets"),
        md(r"""
**What each instruction becomes.** Checked on this course's toolchain (NVRTC 13.5 and nvcc 13.0.88,
disassembled by cuobjdump/nvdisasm 13.5, no GPU), for `sm_100a`; the rubrics below ask for these:

| PTX | SASS |
|---|---|
| `tcgen05.mma.cta_group::1.kind::f16` (bf16/fp16; also `kind::tf32`) | `UTCHMMA` |
| `tcgen05.mma.cta_group::2.kind::f16` (a CTA pair) | `UTCHMMA.2CTA` |
| `tcgen05.mma…kind::f8f6f4`, and `kind::mxf8f6f4.block_scale` | `UTCQMMA` (block-scaled: two more `tmem[…]` operands, the scale factors) |
| `tcgen05.mma…kind::mxf4nvf4.block_scale.scale_vec::4X` (NVFP4) | `UTCOMMA.4X` (`scale_vec::2X` and `kind::mxf4`: `UTCOMMA`) |
| `tcgen05.mma…kind::i8` | `UTCIMMA` |
| `tcgen05.commit…mbarrier::arrive::one` / `cta_group::2…multicast` | `UTCBAR` / `UTCBAR.2CTA.MULTICAST` |
| `tcgen05.ld.32x32b.x1` / `.x16` | `LDTM` / `LDTM.x16` |
| `tcgen05.st.32x32b.x1` / `.x4` | `STTM` / `STTM.x4` |
| `tcgen05.cp.cta_group::1.32x128b.warpx4` / `.128x128b` | `UTCCP.T.S.4x32dp128bit` / `UTCCP.T.S.128dp128bit` |
| `tcgen05.alloc` (`cta_group::2`) | `UTCATOMSWS.FIND_AND_SET.ALIGN` (`UTCATOMSWS.2CTA.FIND_AND_SET.ALIGN`) |
| `tcgen05.dealloc` | `UTCATOMSWS.AND` |
| `tcgen05.relinquish_alloc_permit` | `UVIRTCOUNT.DEALLOC.SMPOOL` |
| `cp.async.bulk.tensor.2d.cta_group::2…` (a pair's TMA load) | `UTMALDG.2D.2CTA` |
| `tcgen05.fence::before/after_thread_sync`, `tcgen05.wait::ld` | no instruction of their own (ordering for the compiler and the scoreboard) |

Targets that are not `sm_100a`: `sm_100` (no `a`) refuses tcgen05 altogether; the family target
`sm_100f` (runs on 10.0 and 10.3) takes most of it but not `kind::i8`, `scale_vec::NX` or
`tcgen05.shift`; `sm_103a` takes all but `kind::i8`; `sm_110a` takes everything. The course grades
on `sm_100a`.
"""),
        md(r"""
## The descriptors

**The shared-memory descriptor** (64 bits) tells the MMA where an operand tile is and how it is laid
out. Addresses and offsets are stored in units of 16 bytes (the low 4 bits dropped):

| bits | field | for this lesson's tiles |
|---|---|---|
| 0–13 | start address ≫ 4 | the tile's address plus where this instruction's K slice starts |
| 16–29 | leading-dimension byte offset (LBO) ≫ 4 | K-major + swizzle: unused (16 B by convention); MN-major: the distance between two 128-byte-wide column boxes |
| 32–45 | stride-dimension byte offset (SBO) ≫ 4 | the distance between groups of 8 rows (K-major) or 8 K-rows (MN-major): 8 × 128 B = 1024 B |
| 46–48 | fixed `0b001` | Blackwell's version (Hopper's wgmma descriptor has 0 here: reusing one is an easy mistake) |
| 49–51 | base offset | 0 when the tile starts on a multiple of the swizzle's repeat (1024 B for 128B) |
| 52 | LBO mode | 0 (1 only for 48-byte K tiles) |
| 61–63 | swizzle | 0 none, 1 128B with 32B atoms, 2 **128B**, 4 64B, 6 32B |

Every instruction reads 32 bytes of K (16 bf16, 32 fp8, 64 fp4 values). **A** (M, K) row-major is
*K-major*: a TMA box of 128 rows × 128 bytes, row r at r·128 bytes, 16-byte chunks swizzled by
r mod 8. The next K slice is **32 bytes** further along the same rows: the start address moves by
32 (the swizzle then applies to the moved address, which is exactly what TMA did). **B** (K, N)
row-major is *MN-major*: boxes of 64 K-rows × 64 columns (128 bytes), one after the other along N;
the next K slice is 16 rows = **2 KiB** further on; LBO is the step from one 64-column box to the next.

**The instruction descriptor** (32 bits, `kind::f16`): D format in bits 4–5 (fp32 = 1), A and B
formats in 7–9 and 10–12 (bf16 = 1), transpose (MN-major) A in bit 15 and B in bit 16, N ≫ 3 in
bits 17–22, M ≫ 4 in bits 24–28. Legal shapes: one CTA M = 64 or 128, N = 8 … 256 in steps of 8; a
pair M = 128 or 256, N = 16 … 256 in steps of 16; K = 16 for bf16.

`grader.cuda.umma` decodes both, and `umma.check_smem(value, tile, k_step)` replays the addresses
the descriptor makes the MMA read — CUTLASS's canonical UMMA layouts — and compares each with where
the element really is in the tile (`umma.Tile`: rows, columns, type, major, swizzle, address),
naming the field that is wrong.

### Exercise 1: encode them (about 12 lines)

`smem_desc(start, lbo, sbo, swizzle_code)` packs the fields above (byte values in, shifted right by
4 inside; the version bits set); `idesc_f16(M, N, b_mn_major)` packs the instruction descriptor for
bf16 × bf16 → fp32 with A K-major; `gemm_offsets(n_cta)` returns `(a_lbo, a_sbo, b_lbo, b_sbo)` in
bytes for this lesson's tiles: A 128 × 64 bf16, K-major; B 64 K-rows × `n_cta` columns, MN-major,
in 64-column boxes; both with the 128-byte swizzle.
"""),
        solution(r"""
def smem_desc(start: int, lbo: int, sbo: int, swizzle_code: int = 2) -> int:
    ### BEGIN SOLUTION
    d = (start >> 4) & 0x3FFF
    d |= ((lbo >> 4) & 0x3FFF) << 16
    d |= ((sbo >> 4) & 0x3FFF) << 32
    d |= 1 << 46                                   # version 0b001: Blackwell
    d |= (swizzle_code & 7) << 61
    return d
    ### END SOLUTION


def idesc_f16(M: int, N: int, b_mn_major: bool = True) -> int:
    ### BEGIN SOLUTION
    d = 1 << 4                                     # D fp32
    d |= 1 << 7 | 1 << 10                          # A, B bf16
    d |= int(b_mn_major) << 16                     # B transposed (MN-major)
    d |= (N >> 3) << 17 | (M >> 4) << 24
    return d
    ### END SOLUTION


def gemm_offsets(n_cta: int = 256) -> tuple:
    ### BEGIN SOLUTION
    a_lbo, a_sbo = 16, 8 * 128                     # swizzled K-major: LBO unused; 8 rows of 128 B
    b_lbo, b_sbo = 64 * 128, 8 * 128               # next 64-column box: 64 K-rows of 128 B; 8 K-rows
    return a_lbo, a_sbo, b_lbo, b_sbo
    ### END SOLUTION
""", "v_desc"),
        md(r"""
### Graded without a GPU: your descriptors against the tiles

For every K slice of a stage (4 for A, 4 for B), your descriptor's addressing must reach exactly the
bytes TMA wrote; then the instruction descriptors must be legal for one CTA and for a pair.
"""),
        tests(r"""
A = umma.Tile(128, 64, "bf16", "K", "128B", address=0x400)
a_lbo, a_sbo, b_lbo, b_sbo = gemm_offsets(256)
for k in range(4):
    r = umma.check_smem(smem_desc(0x400 + 32 * k, a_lbo, a_sbo, 2), A, k)
    assert r.ok, f"A, K slice {k}:\n{r}"
for n_cta, addr in ((256, 0x4400), (128, 0x8400)):
    B = umma.Tile(n_cta, 64, "bf16", "MN", "128B", address=addr)
    b_lbo, b_sbo = gemm_offsets(n_cta)[2:]
    for k in range(4):
        r = umma.check_smem(smem_desc(addr + 2048 * k, b_lbo, b_sbo, 2), B, k)
        assert r.ok, f"B ({n_cta} columns), K slice {k}:\n{r}"
print("✓ A's and B's descriptors read every element of every K slice from where TMA put it")
""", "test_smem_desc", 2),
        tests(r"""
for M, N, group in ((128, 256, 1), (256, 256, 2), (128, 64, 1)):
    why = umma.check_instr(idesc_f16(M, N), "f16", group, a="bf16", b="bf16", a_major="K", b_major="MN", M=M, N=N)
    assert not why, f"M={M} N={N} cta_group::{group}: " + "; ".join(why)
assert umma.decode_instr(idesc_f16(128, 256), "f16").d == "f32", "D must be fp32 (bits 4–5 = 1)"
print("✓ instruction descriptors: kind::f16, bf16 × bf16 → fp32, B MN-major, legal M and N")
""", "test_instr_desc", 1),
        md(r"""
**The picture.** Shared memory around B's tile, one line per 128 bytes: green, what one K slice's
descriptor reads correctly; red, bytes it reads that hold other elements; orange, elements it should
have read. Left your descriptor, right the same with LBO = 1024 (the distance to the next *8 rows*
instead of the next *box*) — a mistake that compiles, launches, and computes garbage on a B200.
"""),
        code(r"""
B = umma.Tile(256, 64, "bf16", "MN", "128B", address=0x4400)
b_lbo, b_sbo = gemm_offsets(256)[2:]
good = umma.check_smem(smem_desc(0x4400 + 2048, b_lbo, b_sbo, 2), B, 1)
bad = umma.check_smem(smem_desc(0x4400 + 2048, 1024, b_sbo, 2), B, 1)
print(bad)
fig, (ax1, ax2) = subplots(1, 2, figsize=(8, 5))
umma.draw_smem(good, ax1)
umma.draw_smem(bad, ax2)
fig.tight_layout()
fig
""", "desc_picture"),
        md(r"""
## The kernel: a tcgen05 GEMM

`umma_gemm<G<CTA_GROUP, BN, STAGES>>` computes C = A·B (bf16 in, fp32 in tensor memory, bf16 out).
192 threads in four roles:

- **warp 0, lane 0 — the producer.** For each K tile of 64: wait until the slot is free (`empty[s]`),
  arm `full[s]` with the bytes expected, issue TMA loads of A's 128 × 64 box and B's 64 × 64 boxes.
- **warp 1 — tensor memory and the MMAs.** The whole warp allocates BN columns at the start and
  frees them at the end; its lane 0 waits for `full[s]`, issues four `tcgen05.mma` (K = 16 each),
  and `tcgen05.commit`s to `empty[s]`: the slot is handed back to the producer *when those MMAs have
  read it*, with no thread waiting. After the last K tile, one more commit to `acc_full`.
- **warps 2–5 — the epilogue.** They wait for `acc_full`, then each reads its quarter of TMEM's lanes
  (rows of the tile) with `tcgen05.ld.32x32b.x16` — 16 fp32 columns per thread per load — packs
  bf16 and stores C.

### Exercise 2 (about 9 lines in four places)

1. The MMA: A's descriptor with its start moved to this K slice (32 bytes per step), B's (2 KiB per
   step), `umma_f16` with accumulate off only for the very first MMA: 3 lines.
2. The commit that frees slot s (a pair: to both CTAs, mask `0b11`): 2 lines.
3. The epilogue's load of 16 columns from this warp's lanes, and the wait: 2 lines.
4. Give tensor memory back: 1 line.

The descriptor templates (start address 0) come from the host — yours, from exercise 1.
"""),
        solution(cell("umma_cell.cu"), "v_umma"),
        code(rf"""
def descriptors_for(kernel):
    # the kernel's instruction descriptor and A/B smem descriptors (start 0), from exercise 1
    s = kernel.launch_shape
    pair = max(s.cluster, 1)
    a_lbo, a_sbo, b_lbo, b_sbo = gemm_offsets(s.tile_n // pair)
    return idesc_f16(128 * pair, s.tile_n), smem_desc(0, a_lbo, a_sbo, 2), smem_desc(0, b_lbo, b_sbo, 2)


launch_v1 = P.umma_gemm_launch(um["{G1}"], descriptors_for(um["{G1}"]))
launch_v2 = P.umma_gemm_launch(um["{G2}"], descriptors_for(um["{G2}"]))
for k in ("{G1}", "{G2}"):
    print(k, "launches with", um[k].launch_shape)
""", "launch"),
        md(r"""
### Graded without a GPU: the machine code

One CTA: the MMA (`UTCHMMA`), its commit (`UTCBAR`), the TMEM loads (`LDTM`), TMA loads, and tensor
memory allocated, relinquished **and freed** (`UTCATOMSWS.FIND_AND_SET.ALIGN`, `UVIRTCOUNT.DEALLOC.SMPOOL`,
`UTCATOMSWS.AND`); no local memory.
"""),
        tests(rf"""
sass.require(um, "{G1}",
             present=["UTCHMMA", "UTCBAR", "LDTM", "UTMALDG.2D", "UTCATOMSWS.FIND_AND_SET.ALIGN",
                      "UVIRTCOUNT.DEALLOC.SMPOOL", "UTCATOMSWS.AND"],
             absent=["UTCHMMA.2CTA", "LDL", "STL"], no_spills=True)
print("✓ {G1}: tcgen05.mma, commit, tcgen05.ld, TMA; tensor memory allocated, relinquished and freed")
""", "test_umma_sass", 2),
        md(r"""
## CTA pairs: one MMA on two SMs

With `cta_group::2` the CTAs of a cluster of 2 run **one** MMA of M = 256: the leader (rank 0) issues
it; each CTA holds its 128 rows of A and **half of B** (128 of the 256 columns) at the same
shared-memory offset, and its 128 rows of D in its own tensor memory. So each SM loads half as much
B for the same work. What changes in the kernel: `tcgen05.alloc/dealloc.cta_group::2` in both CTAs;
the TMA loads of both CTAs count their bytes on the **leader's** barrier (`.cta_group::2` loads with
the leader's barrier address from `mapa`); the leader's commits are **multicast** to both CTAs'
barriers; a cluster barrier after the setup (the peer's barriers must exist before anyone signals
them) and before the exit.

**Launched without the cluster** the peer does not exist: the pair's MMA, its multicast commits and
its allocation fault or hang. The configuration type states `CLUSTER = 2`, and the launch takes it
from there; the launch function also reads the kernel's SASS and refuses to launch a kernel with
`.2CTA` instructions whose type does not state an even cluster — before any GPU call:
"""),
        code(r"""
def launch_without_cluster():
    # the pair kernel with CLUSTER left out of its type: compiled for sm_100a here, refused before launch
    source = um.source.replace("static constexpr int CTA_GROUP = CTA_GROUP_, CLUSTER = CTA_GROUP_;",
                               "static constexpr int CTA_GROUP = CTA_GROUP_;   // CLUSTER forgotten")
    no_cluster = compile_cuda(source, name="um_nocluster", arch="sm_100a", kernels=["umma_gemm<G<2, 256, 6>>"])
    try:
        P.umma_gemm_launch(no_cluster["umma_gemm<G<2, 256, 6>>"])
    except ValueError as e:
        print("refused:", e)


launch_without_cluster()
""", "no_cluster"),
        tests(rf"""
sass.require(um, "{G2}",
             present=["UTCHMMA.2CTA", "UTCBAR.2CTA.MULTICAST", "UTMALDG.2D.2CTA", "LDTM",
                      "UTCATOMSWS.2CTA.FIND_AND_SET.ALIGN", "UVIRTCOUNT.DEALLOC.SMPOOL", "UTCATOMSWS.AND"],
             absent=["LDL", "STL"], no_spills=True)
assert um["{G2}"].launch_shape.cluster == 2 and not P.cluster_problems(um["{G2}"])
print("✓ {G2}: the pair's MMA, multicast commits and TMA loads; launched in clusters of 2")
""", "test_pair_sass", 2),
        md(r"""
### On a Blackwell GPU: correct

Ragged shapes (1000 × 1032 × 1016: every tile edge partial), one row, an 8-column C, a long K (8200:
an accumulator reset in the wrong place shows here). Elsewhere these cells say why they do not run.
"""),
        tests(r"""
grader.check(launch_v1, P.umma_gemm)
grader.check(launch_v2, P.umma_gemm)
""", "test_umma_visible", 2),
        tests(r"""
grader.check(launch_v2, P.umma_gemm, sizes=[P.UMMA_SIZES[1]])
### BEGIN HIDDEN TESTS
grader.check(launch_v2, P.umma_gemm, hidden=True)
grader.check(launch_v1, P.umma_gemm, hidden=True)
### END HIDDEN TESTS
""", "test_umma_hidden", 2),
        md(r"""
## Speed (graded on Blackwell)

4096³ bf16 against cuBLAS (`torch.matmul`) on the same tensors in the same run. Full points at 50% of
cuBLAS, nothing at 5%. The course's goal for its reference: **≥ 90% of cuBLAS on a B200 — not
measured** (no Blackwell GPU was at hand). What is missing for it: this kernel is not persistent, so
each CTA's epilogue does not overlap another tile's MMAs (TMEM has room for two accumulators), and it
stores C with plain stores instead of TMA. Without a Blackwell GPU this cell earns 0 and says so.
"""),
        tests(r"""
grader.speed(launch_v2, P.umma_gemm, points=3)
""", "speed_umma", 3),
        md(r"""
## Block scaling: MXFP8 and NVFP4

Low-precision formats carry a **scale factor per small block** of K:

| format | value | scale | block | `tcgen05.mma` kind | SASS |
|---|---|---|---|---|---|
| MXFP8 | e4m3 (or e5m2) | ue8m0: a power of two, 2^(s − 127) | 32 | `kind::mxf8f6f4.block_scale` | `UTCQMMA` + scale operands |
| NVFP4 | e2m1 (±0, 0.5, 1, 1.5, 2, 3, 4, 6), two a byte | ue4m3: e4m3 without sign | 16 | `kind::mxf4nvf4.block_scale.scale_vec::4X` | `UTCOMMA.4X` |

C = Σ_k (A[m, k]·sa[m, k/V]) · (B[n, k]·sb[n, k/V]), the scaling done inside the MMA. Both operands
are K-major here (A (M, K), B (N, K): a "TN" GEMM; the 4-bit kinds take no other layout). The scale
factors live in **tensor memory** beside the accumulator, in atoms of 128 rows × 4 blocks of K: four
32-bit columns in which lane r holds, in column i, the four block scales of row r + 32·i (byte k for
block k), the same 32 lanes repeated in each quarter of the lanes — the layout CUTLASS's scale-factor
copy (`tcgen05.cp.32x128b.warpx4` of a 128 × 4 tile, the "128×4" layout cuBLAS and cuDNN also keep
scales in) produces. MXFP8: a stage's 4 MMAs (K = 32 each) share one atom, and the instruction
descriptor's *scale-factor id* (bits 29–30 for A, 4–5 for B) tells each MMA which byte is its
block. NVFP4: each MMA spans 64 values = 4 blocks of 16, a whole atom. Warps 2–5 write the atoms
with `tcgen05.st` (registers → TMEM), then arrive on a barrier the MMA thread waits for.
The scale-factor placement is the part of this lesson least certain to be right before it runs on a
B200 (it is read from CUTLASS's copy, not from a run): if the values come out wrong by powers of two in
blocks of 32 (or 16) columns of K, or by rows in groups of 32, look there.
NVFP4 as used in practice also carries one fp32 scale per tensor, which is a multiplication of C and
is left out here.

### Exercise 3 (about 7 lines): issue the block-scaled MMA

Inside the K loop of the MMA thread: the stage's scale atoms start at column `SFA_COL + s·SF_COLS` (A)
and `SFB_COL + s·SF_COLS` (B). NVFP4: MMA j reads atom j (4 columns further per j) with
`course::umma_nvf4`. MXFP8: every MMA reads the stage's one atom, MMA j byte j — put j in the
instruction descriptor's scale-factor ids (bits 29–30 for A, 4–5 for B) and in bits 30–31 of both
scale addresses, and call `course::umma_mxf8`. Accumulate from the second MMA on.
"""),
        solution(cell("scaled_cell.cu"), "v_scaled"),
        code(r"""
launch_mxfp8 = P.scaled_gemm_launch(bs["scaled_gemm<S<false>>"])
launch_nvfp4 = P.scaled_gemm_launch(bs["scaled_gemm<S<true>>"])
idesc8, _ = P.scaled_descriptors(False)
print(umma.decode_instr(idesc8, "mxf8f6f4"), "|", umma.check_instr(idesc8, "mxf8f6f4", 1) or "legal")
for line in sass.disassemble(bs, "scaled_gemm<S<false>>").splitlines():
    if "UTCQMMA" in line:
        print(line.strip())
        break
""", "scaled_launch"),
        tests(r"""
for kernel, mma in (("scaled_gemm<S<false>>", "UTCQMMA"), ("scaled_gemm<S<true>>", "UTCOMMA.4X")):
    sass.require(bs, kernel, present=[mma, "STTM", "UTCBAR", "LDTM", "UTCATOMSWS.AND"], absent=["LDL", "STL"],
                 no_spills=True)
    lines = [ln for ln in sass.disassemble(bs, kernel).splitlines() if f" {mma.split('.')[0]}" in ln]
    assert lines and all(ln.count("tmem[") >= 3 for ln in lines), f"{kernel}: the MMA has no scale-factor operands"
print("✓ block-scaled MMAs with their scale factors in tensor memory: UTCQMMA (MXFP8), UTCOMMA.4X (NVFP4)")
""", "test_scaled_sass", 2),
        tests(r"""
grader.check(launch_mxfp8, P.mxfp8_gemm)
""", "test_mxfp8", 1),
        tests(r"""
grader.check(launch_nvfp4, P.nvfp4_gemm)
""", "test_nvfp4", 1),
        md(r"""
## FlashAttention-4's ideas

Once the MMAs run at Blackwell's rate, attention's other work shows. Per score (one element of
S = QKᵀ) the softmax needs one exponential, and the two MMAs do 4·d = 512 FLOPs with it (d = 128: 2d
for the score, 2d for its share of P·V). The tensor cores do ≈ 8192 dense bf16 FLOPs per clock per
SM, so 512 FLOPs take 1/16 of a clock; the special-function unit (MUFU) does 16 exponentials per
clock per SM: also 1/16 of a clock. **The exponential costs as much as both matrix multiplies** — add
the max, the sums and the conversions and it is the bottleneck. FA4 computes part of its exponentials
on the FMA units instead (128 FMAs per clock per SM), with a polynomial.

### 2^x with three FMAs

Write x = n + f, n = ⌊x⌋, f ∈ [0, 1). Then 2^x = 2^n · 2^f: **2^n is free** — add n to the exponent
field of a float (an integer add of n·2^23 to its bits) — and 2^f on [0, 1) is smooth enough for a
cubic p(f) = c₀ + f(c₁ + f(c₂ + f·c₃)): three FMAs by Horner's rule.

**How accurate, and why.** Interpolating at the d + 1 Chebyshev nodes of [0, 1] gives
|2^f − p(f)| ≤ max|(2^f)^{(d+1)}| · (1/2)^{d+1} / ((d + 1)! · 2^d), with (2^f)^{(d+1)} = (ln 2)^{d+1} 2^f ≤
2 (ln 2)^{d+1}. Since 2^f ≥ 1 that bounds the relative error: d = 3 gives **1.5 × 10⁻⁴** (measured:
1.0 × 10⁻⁴), well under bf16's rounding (2⁻⁹ ≈ 2 × 10⁻³) — and P is rounded to bf16 before the P·V MMA
anyway. Degree 2 would give 3.5 × 10⁻³ (too coarse for bf16), degree 5 1.5 × 10⁻⁷ (fp32 territory).
`P.exp2_bound(d)` adds fp32's rounding, one ulp per step.

### Exercise 4 (about 7 lines): in NumPy, in fp32

`exp2_by_fma(xs, coeffs)`: clamp x to [−125, 127] (below −125 the result is subnormal, where adding to
the exponent field is wrong), n = ⌊x⌋, f = x − n, Horner in `np.float32` (highest coefficient
first), then add n·2^23 to p's bits (`p.view(np.int32)`). Return a **list**. `coeffs` are lowest
power first; `P.exp2_coefficients(3)` gives the Chebyshev cubic. The check also calls your function
with other coefficients: it must evaluate the polynomial it is given.
"""),
        solution(r"""
def exp2_by_fma(xs, coeffs):
    x = np.clip(np.asarray(xs, dtype=np.float32), np.float32(-125), np.float32(127))
    ### BEGIN SOLUTION
    n = np.floor(x)
    f = (x - n).astype(np.float32)
    p = np.full_like(f, np.float32(coeffs[-1]))
    for c in reversed(coeffs[:-1]):
        p = (p * f + np.float32(c)).astype(np.float32)
    return (p.view(np.int32) + (n.astype(np.int32) << 23)).view(np.float32).tolist()
    ### END SOLUTION
""", "v_exp2_py"),
        tests(r"""
worst = P.check_exp2(exp2_by_fma, degree=3)
""", "test_exp2_py", 2),
        md(r"""
### The same on a GPU (any GPU from Ampere on)

The kernel below is the cubic in CUDA (exercise 5, 2 lines: Horner with `fmaf`, then the exponent
add with `__float_as_int` / `__int_as_float`): `fmaf` three times, a floor, a conversion and an
integer add.
Its SASS must hold `FFMA` and no `MUFU.EX2` — the point is to stay off the special-function unit —
while `exp2f` compiles to `MUFU.EX2`. Its values are checked against NumPy on any GPU of compute
capability 8.0 or newer (this one runs on an H100 too).
"""),
        solution(cell("exp2_cell.cu"), "v_exp2_cu"),
        code(r"""
def launch_exp2(x, y):
    # x, y: (n,) fp32 torch tensors; a grid-stride loop, 256 threads a block
    n = x.numel()
    ex.exp2_poly[(max(1, min(4096, (n + 255) // 256)),), (256,)](x, y, n)
""", "launch_exp2"),
        tests(r"""
sass.require(ex, "exp2_poly", present=["FFMA", "FRND.FLOOR"], absent=["MUFU.EX2", "LDL", "STL"])
sass.require(ex, "exp2_mufu", present=["MUFU.EX2"])
print("✓ exp2_poly: FFMAs and no MUFU.EX2 (exp2f: MUFU.EX2)")
""", "test_exp2_sass", 1),
        tests(r"""
grader.check(launch_exp2, P.exp2_kernel)
""", "test_exp2_gpu", 1),
        md(r"""
### Conditional rescaling

The online softmax (02.03, 04.02) keeps a running maximum m of each row; when a new block of scores
raises it, the partial sum ℓ and the output accumulator O are multiplied by 2^(m_old − m_new). On
Blackwell O lives in tensor memory: rescaling it means a TMEM load, multiplies and a store for every
element — on the critical path. FA4 **rescales only when the maximum grows by more than τ** (τ = 8 in
log₂ units: a factor of 256). Otherwise it keeps the stale maximum: the new scores' exponentials are
then at most 2^τ = 256 instead of 1, far from fp32's (or the bf16 P's) overflow; and since ℓ and O
were both accumulated against the same stale maximum, the final O / ℓ is exact. The demo below runs
both rules on rows whose maximum creeps up, as it does in real attention rows.
"""),
        code(r"""
def online_softmax_pv(s, v, block=64, tau=None):
    # one row: scores s (L,), values v (L, d) -> (softmax(s) @ v, rescales); tau None: always rescale
    m, l, o, rescales = -np.inf, 0.0, np.zeros(v.shape[1]), 0
    for j in range(0, len(s), block):
        sb = s[j:j + block]
        m_new = max(m, sb.max())
        if m == -np.inf or (m_new > m and (tau is None or m_new - m > tau)):
            scale = np.exp2(m - m_new) if m > -np.inf else 0.0
            l, o, m = l * scale, o * scale, m_new
            rescales += m_new != -np.inf
        p = np.exp2(sb - m)                      # ≤ 2^tau when the maximum is stale
        l, o = l + p.sum(), o + p @ v[j:j + block]
    return o / l, rescales


rng = np.random.default_rng(0)
L, d = 4096, 64
s = rng.standard_normal(L) * 2 + np.linspace(0, 12, L)     # a slowly rising maximum, in log2 units
v = rng.standard_normal((L, d))
p = np.exp2(s - s.max())
exact = (p / p.sum()) @ v
taus = [None, 0.5, 1, 2, 4, 8]
rows = [online_softmax_pv(s, v, tau=t) for t in taus]
for t, (o, n) in zip(taus, rows):
    print(f"tau = {'always' if t is None else t:>6}: {n:3d} rescales of {L // 64} blocks, "
          f"max |error| {np.abs(o - exact).max():.1e}")
assert all(np.abs(o - exact).max() < 1e-12 for o, _ in rows)
fig, ax = subplots(figsize=(6, 2.6))
ax.bar([("always" if t is None else str(t)) for t in taus], [n for _, n in rows], color="#4c72b0")
ax.set_xlabel("threshold τ (log2 units)"); ax.set_ylabel("rescales of O")
ax.set_title("rescaling only when the maximum grows by > τ: same result, fewer rescales", fontsize=9)
fig.tight_layout()
fig
""", "rescale"),
        md(r"""
## One kernel in the CuTe DSL

FA4 itself is written in the **CuTe DSL**: CUTLASS's Python front end (`pip install
nvidia-cutlass-dsl`, about 0.5 GB with its CUDA 13 libraries: an optional install, not part of the
course's). Kernels are Python functions, traced and JIT-compiled through MLIR to PTX and a cubin.
It compiles without a GPU when told the target (`CUTE_DSL_ARCH=sm_100a`) and given "fake" tensors
that describe shapes and types; on a GPU the same function runs on torch tensors. Below, the exp2
cubic as a CuTe DSL kernel: compiled for sm_100a here and its SASS read with the course's tools
(FFMAs, no `MUFU.EX2`), run and checked where there is a GPU. Without the package the cell says so
and skips. (The CUTLASS repository's `examples/python/CuTeDSL/blackwell/` holds full tcgen05 GEMMs
in the DSL: a good next read.)
"""),
        code(r"""
import importlib.util


def cute_dsl_demo():
    # the exp2 cubic in the CuTe DSL: compiled (for sm_100a without a GPU), its SASS read, run on a GPU
    import os
    import tempfile

    if importlib.util.find_spec("cutlass") is None:
        print("CuTe DSL not installed (optional: pip install 'nvidia-cutlass-dsl[cu13]'): skipped")
        return
    dump = tempfile.mkdtemp(prefix="cute-dsl-")
    os.environ.setdefault("CUTE_DSL_KEEP", "cubin")
    os.environ.setdefault("CUTE_DSL_DUMP_DIR", dump)
    gpu_cc = grader.cuda.toolchain.compute_capability()
    if not gpu_cc:
        os.environ.setdefault("CUTE_DSL_ARCH", "sm_100a")
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_compact_tensor

    C0, C1, C2, C3 = P.exp2_coefficients(3)

    @cute.kernel
    def exp2_dsl_kernel(x: cute.Tensor, y: cute.Tensor, n: cutlass.Int32):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        i = bidx * 128 + tidx
        if i < n:
            v = cutlass.Float32(x[i])                       # inputs in [-125, 127)
            k = cute.math.floor(v)
            f = v - k
            p = cutlass.Float32(C3) * f + cutlass.Float32(C2)
            p = p * f + cutlass.Float32(C1)
            p = p * f + cutlass.Float32(C0)
            y[i] = (p.bitcast(cutlass.Int32) + (cutlass.Int32(k) << 23)).bitcast(cutlass.Float32)

    @cute.jit
    def exp2_dsl(x: cute.Tensor, y: cute.Tensor, n: cutlass.Int32):
        exp2_dsl_kernel(x, y, n).launch(grid=((n + 127) // 128, 1, 1), block=(128, 1, 1))

    sym = cute.sym_int64(symbol="N")
    fake = [make_fake_compact_tensor(cutlass.Float32, (sym,)) for _ in range(2)]
    compiled = cute.compile(exp2_dsl, *fake, cutlass.Int32(0))
    dumped = os.environ["CUTE_DSL_DUMP_DIR"]
    cubins = [os.path.join(dumped, f) for f in os.listdir(dumped) if f.endswith(".cubin")]
    if cubins:
        ops = sass.opcodes(open(cubins[0], "rb").read(), None)
        print(f"CuTe DSL kernel compiled for {os.environ.get('CUTE_DSL_ARCH', 'this GPU')}: "
              f"FFMA {ops['FFMA']}, MUFU {ops['MUFU']}")
    if gpu_cc:
        import torch
        from cutlass.cute.runtime import from_dlpack

        x = torch.empty(1 << 20, device="cuda").uniform_(-60, 60)
        y = torch.empty_like(x)
        compiled(from_dlpack(x), from_dlpack(y), cutlass.Int32(x.numel()))
        torch.cuda.synchronize()
        rel = ((y.double() - torch.exp2(x.double())).abs() / torch.exp2(x.double())).max().item()
        print(f"on this GPU: worst relative error {rel:.2e} (bound {P.exp2_bound(3):.2e})")


try:
    cute_dsl_demo()
except Exception as e:          # an optional package, untested on a GPU here: say what happened, go on
    print(f"CuTe DSL cell failed: {type(e).__name__}: {e}")
""", "cute_dsl"),
        md(r"""
## The ladder

Both tcgen05 GEMMs as a share of cuBLAS at 4096³, on a Blackwell GPU, in the same run. Elsewhere there
is nothing to measure, and the plot says so.
"""),
        code(r"""
from grader.problem import meets

if not grader.SIMULATOR and meets("sm_100a", grader.cuda.toolchain.compute_capability()):
    versions = {"v1 one CTA, 128×256": grader.measure(launch_v1, P.umma_gemm, "v1 one CTA, 128×256"),
                "v2 CTA pair, 256×256": grader.measure(launch_v2, P.umma_gemm, "v2 CTA pair, 256×256")}
    display(grader.ladder_plot(versions, P.umma_gemm, title="tcgen05 GEMM 4096³ bf16: % of cuBLAS (same run)"))
else:
    fig, ax = subplots(figsize=(6, 1.6))
    ax.axis("off")
    ax.text(0.5, 0.5, "not measured: the tcgen05 kernels need a Blackwell GPU (sm_100a)\n"
            "goal for the reference on a B200: ≥ 90% of cuBLAS — not yet measured",
            ha="center", va="center", fontsize=10)
    display(fig)
""", "ladder"),
        md(r"""
## Stretch goals (no points)

- **Persistent with two accumulators.** Allocate 512 columns, give each CTA many tiles, and let the
  epilogue warps drain accumulator 0 while the MMA warp fills accumulator 1 (two more mbarriers:
  "accumulator full" and "accumulator empty"). This is what stands between this kernel and cuBLAS.
- **A TMA store epilogue**: TMEM → registers → swizzled shared memory → `cp.async.bulk.tensor` (05.01).
- **TMA multicast** within a cluster of 2 pairs: B's tile loaded once for two pairs (lesson 03).
- **A from tensor memory** (`tcgen05.mma … [a_tmem]`): FA4 keeps P in TMEM for the P·V MMA.
- **Scale factors with `tcgen05.cp`**: copy them from shared memory (one TMA load) instead of
  `tcgen05.st` from registers; read PTX's "scale factor layout" section first.
- In the exp2 kernel, compute half the exponentials with `exp2f` and half with the cubic, as FA4
  does, and find the split that balances MUFU and FMA throughput.
"""),
    ]
