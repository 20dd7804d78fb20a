"""Compiled CUDA C++ / CuTe cells (grader.cuda) and SASS rubrics (grader.cuda.sass).

CPU tests compile real cubins with NVRTC (and nvcc where present) and read
their SASS with cuobjdump; tests marked ``gpu`` launch the kernels and are
skipped on a machine without a CUDA GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from grader import cuda as cc
from grader.cuda import magic, signature, toolchain
from grader.cuda import sass

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "solutions" / "03_gemm" / "00_compiled_cells.ipynb"
HAVE_GPU = cc.gpu_available()
HAVE_NVCC = toolchain.tool_path("nvcc") is not None
gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(not HAVE_GPU, reason="needs a CUDA GPU")


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    """Builds go to a private cache, shared by the tests of this file."""
    old = os.environ.get("GRADER_CACHE_DIR")
    os.environ["GRADER_CACHE_DIR"] = str(tmp_path_factory.mktemp("cubin-cache"))
    yield
    if old is None:
        os.environ.pop("GRADER_CACHE_DIR", None)
    else:
        os.environ["GRADER_CACHE_DIR"] = old


def _demo_cells() -> dict[str, tuple[str, str]]:
    """name -> (magic line, body) for every %%cuda cell of the demo notebook."""
    nb = json.loads(DEMO.read_text())
    out = {}
    for cell in nb["cells"]:
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code" and src.startswith("%%cuda"):
            line, _, body = src.partition("\n")
            out[line.split()[1]] = (line[len("%%cuda"):].strip(), body)
    return out


@pytest.fixture(scope="module")
def demo():
    """The demo notebook's %%cuda cells, compiled as the magic would."""
    ns: dict = {}
    for name, (line, body) in _demo_cells().items():
        magic.cuda_cell(line, body, ns)
    return ns


# ---------------------------------------------------------------------------
# The demo notebook's kernels
# ---------------------------------------------------------------------------
def test_demo_has_the_four_kernels():
    assert set(_demo_cells()) == {"vadd", "mma", "cute_demo", "wg"}


def test_demo_cells_compile(demo):
    assert demo["vadd"].kernel_names == ["add"]
    assert "mma_tile" in demo["mma"].kernel_names
    assert set(demo["cute_demo"].kernel_names) == {"cute_copy", "cute_mma"}
    assert demo["wg"].arch == "sm_90a"
    for mod in demo.values():
        assert mod.cubin[:4] == b"\x7fELF"
        assert not mod.warnings, mod.log


def test_demo_rubrics_pass(demo):
    sass.require(demo["vadd"], "add", present=["LDG", "FADD", "STG"], absent=["LDL", "STL"])
    rep = sass.require(demo["mma"], "mma_tile", present=["HMMA.16816.F32", "LDSM.16.M88.4", "LDGSTS"],
                       absent=["LDL", "STL"], no_spills=True)
    assert rep.ok and rep.count("HMMA") == 1 and rep.registers > 0
    sass.require(demo["cute_demo"], "cute_mma", present=["HMMA"], absent=["LDL", "STL"])
    sass.require(demo["cute_demo"].cute_copy, present=["LDG", "STG"], absent=["HMMA"])
    sass.require(demo["wg"], "wgmma_tile", present=["HGMMA.64x8x16.F32", "WARPGROUP.ARRIVE"],
                 absent=["LDL", "STL"])


# ---------------------------------------------------------------------------
# Rubrics catch kernels that miss the point
# ---------------------------------------------------------------------------
NAIVE = r"""
extern "C" __global__ void sgemm_naive(const float* A, const float* B, float* C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  C[row * N + col] = acc;
}
"""

LOCAL = r"""
// A per-thread array written and read at run-time indices lives in local memory.
extern "C" __global__ void scatter_local(const int* idx, float* out, int n) {
  float buf[32];
  #pragma unroll 1
  for (int i = 0; i < n; ++i) buf[idx[i] & 31] = out[i];
  out[threadIdx.x] = buf[idx[threadIdx.x] & 31];
}
"""


def test_ffma_gemm_fails_tensor_core_rubric():
    mod = cc.compile_cuda(NAIVE, name="naive")
    with pytest.raises(sass.RubricFailed) as ei:
        sass.require(mod, "sgemm_naive", present=["HMMA", "LDSM"])
    msg = str(ei.value)
    assert "missing HMMA" in msg and "missing LDSM" in msg and "sgemm_naive" in msg
    assert isinstance(ei.value, AssertionError)
    rep = sass.require(mod, "sgemm_naive", present=["FFMA"], absent=["HMMA"])
    assert rep.ok and rep.count("FFMA") > 0
    soft = sass.require(mod, "sgemm_naive", present=["HMMA"], raise_=False)
    assert not soft and soft.missing == ["HMMA"]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_local_array_fails_absent_rubric(arch):
    mod = cc.compile_cuda(LOCAL, name="local", arch=arch)
    with pytest.raises(sass.RubricFailed) as ei:
        sass.require(mod, "scatter_local", absent=["LDL", "STL"])
    assert "forbidden LDL" in str(ei.value) and "forbidden STL" in str(ei.value)
    assert mod.scatter_local.resources["stack"] > 0
    rep = ei.value.report
    assert rep.local_bytes and rep.local_bytes > 0


def test_register_limit_rubric():
    mod = cc.compile_cuda(NAIVE, name="naive")
    regs = mod.sgemm_naive.resources["registers"]
    assert sass.require(mod, "sgemm_naive", max_registers=regs).ok
    with pytest.raises(sass.RubricFailed, match="registers per thread"):
        sass.require(mod, "sgemm_naive", max_registers=regs - 1)
    assert sass.resource_usage(mod)["sgemm_naive"]["REG"] == regs


# ---------------------------------------------------------------------------
# Opcode names the course relies on, confirmed on real builds
# ---------------------------------------------------------------------------
PROBES = r"""
#include "course.cuh"
extern "C" __global__ void frag_bf16(const unsigned short* A, float* C) {
  __shared__ __align__(16) unsigned short s[256];
  s[threadIdx.x] = A[threadIdx.x];
  __syncthreads();
  unsigned a[4], b[2];
  course::ldmatrix_x4_trans(a[0], a[1], a[2], a[3], s + (threadIdx.x % 16) * 16);
  course::ldmatrix_x2_trans(b[0], b[1], s + (threadIdx.x % 16) * 16);
  float c[4] = {0.f, 0.f, 0.f, 0.f}, d[4];
  course::mma_m16n8k16_bf16(d, a, b, c);
  for (int i = 0; i < 4; ++i) C[threadIdx.x * 4 + i] = d[i];
}
"""

TMA = r"""
#include "course.cuh"
struct alignas(64) TensorMap { unsigned long long raw[16]; };  // a CUtensorMap, encoded on the host

extern "C" __global__ void tma_load(const __grid_constant__ TensorMap tmap, float* out) {
  __shared__ __align__(128) float tile[32 * 32];
  __shared__ __align__(8) unsigned long long bar;
  unsigned sbar = course::smem_u32(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(sbar));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(sbar), "r"(4096));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(course::smem_u32(tile)), "l"(&tmap), "r"(0), "r"(0), "r"(sbar) : "memory");
  }
  __syncthreads();
  asm volatile("{\n .reg .pred P1;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
               " @!P1 bra WAIT;\n}\n" :: "r"(sbar), "r"(0) : "memory");
  out[threadIdx.x] = tile[threadIdx.x];
}
"""

TCGEN05 = r"""
#include "course.cuh"
extern "C" __global__ void umma(unsigned long long adesc, unsigned long long bdesc, unsigned idesc, unsigned* out) {
  __shared__ unsigned tmem_base;
  if (threadIdx.x < 32)
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;\n"
                 :: "r"(course::smem_u32(&tmem_base)));
  asm volatile("tcgen05.fence::before_thread_sync;\n");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;\n");
  unsigned taddr = tmem_base;
  if (threadIdx.x == 0) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %4, 0;\n"
                 " tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n}\n"
                 :: "r"(taddr), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(0));
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %4, 0;\n"
                 " tcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, p;\n}\n"
                 :: "r"(taddr), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(1));
  }
  unsigned v;
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%0}, [%1];\n" : "=r"(v) : "r"(taddr));
  asm volatile("tcgen05.wait::ld.sync.aligned;\n");
  out[threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n");
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;\n" :: "r"(taddr));
  }
}
"""


def test_resources_of_kernels_that_call_a_noinline_function():
    """ptxas -v reports a called device function without a register line: each kernel after one keeps
    its own figures (the parser once gave them to the callee and lost the next kernel's)."""
    src = r"""
__device__ __noinline__ void add_one(float* p) { p[threadIdx.x] += 1.f; }
extern "C" __global__ void first(float* p) { add_one(p); }
extern "C" __global__ void second(float* p, float* q) { float r[64];
  for (int i = 0; i < 64; ++i) r[i] = q[i * blockDim.x + threadIdx.x];
  float s = 0.f; for (int i = 0; i < 64; ++i) s += r[i] * r[63 - i]; p[threadIdx.x] = s; add_one(p); }
"""
    mod = cc.compile_cuda(src, name="noinline_callee")
    assert "Function properties for _Z7add_onePf" in mod.log
    for k in ("first", "second"):
        r = mod[k].resources
        assert r and r["registers"] > 0 and r["spill_stores"] == 0, (k, r)


def test_confirmed_opcodes(demo):
    """The names in grader.cuda.sass's table, on real builds."""
    for arch in ("sm_80", "sm_89", "sm_90a"):
        ops = sass.opcodes(cc.compile_cuda(PROBES, name="probes", arch=arch), "frag_bf16", full=True)
        assert ops["HMMA.16816.F32.BF16"] == 1, (arch, ops)
        assert ops["LDSM.16.MT88.4"] == 1 and ops["LDSM.16.MT88.2"] == 1, (arch, ops)
    for arch in ("sm_80", "sm_100a"):
        mod = cc.compile_cuda(_demo_cells()["mma"][1], name="mma", arch=arch)
        ops = sass.opcodes(mod, "mma_tile", full=True)
        assert ops["HMMA.16816.F32"] == 1 and ops["LDSM.16.M88.4"] == 1 and ops["LDSM.16.M88.2"] == 1
        assert ops["LDGSTS.E.BYPASS.128"] == 2 and ops["LDGDEPBAR"] == 1 and ops["DEPBAR.LE"] == 1
    wg = sass.opcodes(demo["wg"], "wgmma_tile", full=True)
    assert wg["HGMMA.64x8x16.F32"] == 1 and wg["WARPGROUP.DEPBAR.LE"] == 1 and wg["FENCE.VIEW.ASYNC.S"] == 1
    tma = sass.opcodes(cc.compile_cuda(TMA, name="tma", arch="sm_90a"), "tma_load", full=True)
    assert tma["UTMALDG.2D"] == 1 and tma["SYNCS.PHASECHK.TRANS64.TRYWAIT"] >= 1 and tma["SYNCS.ARRIVE.TRANS64"] == 1
    tc = sass.opcodes(cc.compile_cuda(TCGEN05, name="umma", arch="sm_100a"), "umma", full=True)
    assert tc["UTCHMMA"] == 1 and tc["UTCQMMA"] == 1 and tc["LDTM"] == 1
    assert tc["UTCATOMSWS.FIND_AND_SET.ALIGN"] >= 1


def test_wgmma_needs_sm90a():
    body = _demo_cells()["wg"][1]
    with pytest.raises(cc.CompileError) as ei:
        cc.compile_cuda(body, name="wg", arch="sm_80")
    assert "ptxas" in str(ei.value) and "sm_90" in str(ei.value)


# ---------------------------------------------------------------------------
# Errors, warnings, cache
# ---------------------------------------------------------------------------
BROKEN = """#include "course.cuh"
extern "C" __global__ void k(float* x) {
  int unused_here;
  x[0] = undefined_name;
}
"""


@pytest.mark.parametrize("compiler", ["nvrtc", pytest.param("nvcc", marks=pytest.mark.skipif(not HAVE_NVCC, reason="no nvcc"))])
def test_compile_error_reports_learner_line(compiler):
    with pytest.raises(cc.CompileError) as ei:
        cc.compile_cuda(BROKEN, name="broken", compiler=compiler)
    err = ei.value
    assert [d[0] for d in err.diagnostics if d[1] == "error"] == [4]
    text = str(err)
    assert text.startswith('line 4: error: identifier "undefined_name" is undefined')
    assert "x[0] = undefined_name;" in text
    assert "/tmp" not in text and "site-packages" not in text
    assert len(text.splitlines()) <= 4
    shown = err._render_traceback_()
    assert shown[0] == "CompileError: broken" and "Traceback" not in "\n".join(shown)


def test_error_inside_cute_template_points_at_the_cell():
    src = ("#include <cute/tensor.hpp>\nusing namespace cute;\n"
           'extern "C" __global__ void k(float* p) {\n'
           "  Tensor t = make_tensor(make_gmem_ptr(p), make_layout(make_shape(Int<4>{}, Int<4>{})));\n"
           "  Tensor u = local_tile(t, make_shape(Int<2>{}), make_coord(0, 0, 0));  // rank mismatch\n"
           "  u(0) = 1;\n}\n")
    with pytest.raises(cc.CompileError) as ei:
        cc.compile_cuda(src, name="cute_err")
    err = ei.value
    assert err.lines == [5]
    text = str(err)
    assert text.startswith("line 5: error (inside <cutlass>/cute/")
    assert "local_tile(t, make_shape" in text and "follow-on error" in text
    assert "instantiation of" not in text and len(text.splitlines()) <= 4


def test_cache_hit_never_compiles(monkeypatch):
    src = f"// {uuid.uuid4()}\n" + NAIVE
    before = dict(cc.STATS)
    first = cc.compile_cuda(src, name="cached")
    assert not first.from_cache and cc.STATS["compiles"] == before["compiles"] + 1

    def boom(*a, **k):
        raise AssertionError("the compiler was called on a cache hit")

    from grader.cuda import compiler

    monkeypatch.setattr(compiler, "_run_nvrtc", boom)
    monkeypatch.setattr(compiler, "_run_nvcc", boom)
    again = cc.compile_cuda(src, name="cached")
    assert again.from_cache and again.cubin == first.cubin and again.log == first.log
    assert cc.STATS["compiles"] == before["compiles"] + 1
    assert cc.STATS["cache_hits"] == before["cache_hits"] + 1
    files = sorted(p.suffix for p in cc.cache_dir().glob(first.cache_key + ".*"))
    assert files == [".cubin", ".json"]


def test_cache_key_depends_on_arch_and_options():
    a = cc.compile_cuda(NAIVE, name="naive", arch="sm_80")
    b = cc.compile_cuda(NAIVE, name="naive", arch="sm_90a")
    c = cc.compile_cuda(NAIVE, name="naive", arch="sm_80", options=["-maxrregcount=32"])
    assert len({a.cache_key, b.cache_key, c.cache_key}) == 3
    assert a.arch == "sm_80" and b.arch == "sm_90a"


def test_warnings_stay_off_stderr(capfd):
    src = f"// {uuid.uuid4()}\n" + 'extern "C" __global__ void k(float* x) {\n  int never_used;\n  x[0] = 1.f;\n}\n'
    mod = cc.compile_cuda(src, name="warny")
    out, err = capfd.readouterr()
    assert err == "" and out == ""
    assert mod.warnings and "never_used" in mod.warnings[0] and "warny.cu(3)" in mod.warnings[0]
    mod.print_log()
    out, err = capfd.readouterr()
    assert "never_used" in out and "Used" in out and err == ""


@pytest.mark.skipif(not HAVE_NVCC, reason="no nvcc")
def test_warnings_stay_off_stderr_nvcc(capfd):
    src = f"// {uuid.uuid4()}\n" + 'extern "C" __global__ void k(float* x) {\n  int never_used;\n  x[0] = 1.f;\n}\n'
    mod = cc.compile_cuda(src, name="warny", compiler="nvcc")
    out, err = capfd.readouterr()
    assert err == "" and out == ""
    assert mod.compiler.startswith("nvcc") and "never_used" in mod.log


@pytest.mark.skipif(not HAVE_NVCC, reason="no nvcc")
def test_option_nvrtc_lacks_goes_to_nvcc():
    mod = cc.compile_cuda(NAIVE, name="naive", options=["--extra-device-vectorization"])
    assert mod.compiler.startswith("nvcc")
    assert "built with nvcc" in mod.log
    sass.require(mod, "sgemm_naive", present=["FFMA"])


def test_nvrtc_takes_common_flags():
    mod = cc.compile_cuda(NAIVE, name="naive", options=["-lineinfo", "-maxrregcount=32", "-DTILE=4", "--use_fast_math"])
    assert mod.compiler.startswith("nvrtc")
    assert mod.sgemm_naive.resources["registers"] <= 32


# ---------------------------------------------------------------------------
# Names, signatures, the magic
# ---------------------------------------------------------------------------
TEMPLATED = r"""
template <int STRIDE>
__global__ void scale(float* x, float s, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * STRIDE;
  if (i < n) x[i] *= s;
}
__global__ void cxx_kernel(float* x) { x[0] = 0.f; }
"""


def test_name_expressions_and_mangled_lookup():
    mod = cc.compile_cuda(TEMPLATED, name="tmpl", kernels=["scale<2>"])
    k = mod["scale<2>"]
    assert k.symbol.startswith("_Z5scaleILi2E") and mod.kernel_names == ["scale<2>"]
    assert mod.cxx_kernel.symbol.startswith("_Z10cxx_kernel")
    sass.require(mod, "scale<2>", present=["FMUL"])
    assert "scale<2>" in mod.resources
    with pytest.raises(AttributeError, match="no kernel 'nope'"):
        mod.nope


def test_signature_parsing_types_scalars():
    sig = signature.kernel_signatures(
        'extern "C" __global__ void __launch_bounds__(256) f(const float* __restrict__ a, int n, '
        'float alpha, unsigned long long m, size_t bytes, const __grid_constant__ TensorMap t, double d[]) {}\n'
        "template <int T> __global__ void g(float* x) {}\n")
    assert list(sig) == ["f"]
    kinds = [(p.name, p.kind, p.dtype) for p in sig["f"]]
    assert kinds == [("a", "pointer", "uint64"), ("n", "scalar", "int32"), ("alpha", "scalar", "float32"),
                     ("m", "scalar", "uint64"), ("bytes", "scalar", "uint64"), ("t", "other", None),
                     ("d", "pointer", "uint64")]


class _FakeDeviceArray:
    def __init__(self, ptr):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (4,), "typestr": "<f4", "version": 3}


def test_arguments_are_typed_from_the_declaration(demo):
    k = demo["vadd"].add
    args = k.prepare_args([_FakeDeviceArray(0x1000), _FakeDeviceArray(0x2000), 0x3000, 7])
    assert [type(a) for a in args] == [np.uint64, np.uint64, np.uint64, np.int32]
    assert int(args[0]) == 0x1000 and int(args[3]) == 7
    with pytest.raises(cc.LaunchError, match="expected an integer"):
        k.prepare_args([0, 0, 0, 2.5])
    with pytest.raises(cc.LaunchError, match="takes 4 arguments"):
        k.prepare_args([0, 0])
    with pytest.raises(cc.LaunchError, match="device array"):
        k.prepare_args(["x", 0, 0, 1])


@pytest.mark.skipif(HAVE_GPU, reason="checks the no-GPU message")
def test_launch_without_gpu_is_a_clear_error(demo):
    with pytest.raises(cc.LaunchError, match="no CUDA GPU"):
        demo["vadd"].add[1, 32](0, 0, 0, 1)


def test_magic_binds_module_and_renders_errors(capfd):
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    cc.register_magic(ip)
    res = ip.run_cell('%%cuda tiny --arch sm_89\nextern "C" __global__ void k(int* x) { x[0] = 1; }\n')
    assert res.success and ip.user_ns["tiny"].arch == "sm_89" and ip.user_ns["tiny"].kernel_names == ["k"]
    res = ip.run_cell('%%cuda oops\nextern "C" __global__ void k(int* x) {\n  x[0] = nope;\n}\n')
    assert not res.success and isinstance(res.error_in_exec, cc.CompileError)
    out, err = capfd.readouterr()
    assert "line 2: error" in out and "Traceback" not in out + err and "File " not in out


def test_magic_line_parsing():
    a = magic.parse_magic_line("gemm --arch sm_100a --nvcc -k 'tile<64, 32>' -lineinfo -maxrregcount=64 --log")
    assert a["name"] == "gemm" and a["arch"] == "sm_100a" and a["nvcc"] and a["log"]
    assert a["kernels"] == ["tile<64, 32>"] and a["options"] == ["-lineinfo", "-maxrregcount=64"]


def test_architecture_defaults(monkeypatch):
    monkeypatch.delenv("GRADER_CUDA_ARCH", raising=False)
    if not HAVE_GPU:
        assert cc.default_arch() == cc.DEFAULT_ARCH == "sm_90a"
    monkeypatch.setenv("GRADER_CUDA_ARCH", "89")
    assert cc.default_arch() == "sm_89"
    with pytest.raises(ValueError):
        toolchain.normalise_arch("hopper")


def test_include_paths_are_found():
    dirs = cc.include_dirs()
    assert (dirs[0] / "course.cuh").is_file()
    assert any((d / "cute" / "tensor.hpp").is_file() for d in dirs)


def test_import_needs_no_torch_and_no_gpu():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import grader.cuda, grader.cuda.sass\n"
            "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------
# On a GPU: launch and compare with numpy
# ---------------------------------------------------------------------------
@gpu
@needs_gpu
def test_gpu_vadd_and_cute_copy(demo):
    from numba import cuda

    n = 1000
    a = np.arange(n, dtype=np.float32)
    b = np.ones(n, dtype=np.float32)
    da, db, dc = cuda.to_device(a), cuda.to_device(b), cuda.device_array(n, np.float32)
    demo["vadd"].add[(n + 255) // 256, 256](da, db, dc, n)
    np.testing.assert_array_equal(dc.copy_to_host(), a + b)
    demo["vadd"].add(da, db, dc, np.int32(10), grid=1, block=32)  # keyword form, exact numpy scalar
    out = cuda.device_array(n, np.float32)
    demo["cute_demo"].cute_copy[(n + 255) // 256, 256](da, out, n)
    np.testing.assert_array_equal(out.copy_to_host(), a)
    attrs = demo["vadd"].add.attributes
    assert attrs["num_regs"] > 0 and attrs["local_size_bytes"] == 0


@gpu
@needs_gpu
@pytest.mark.parametrize("cell,kernel", [("mma", "mma_tile"), ("cute_demo", "cute_mma")])
def test_gpu_mma_tile_matches_numpy(demo, cell, kernel):
    from numba import cuda

    rng = np.random.default_rng(1)
    A = rng.standard_normal((16, 16)).astype(np.float16)
    Bt = rng.standard_normal((8, 16)).astype(np.float16)
    dC = cuda.device_array((16, 8), np.float32)
    demo[cell][kernel][1, 32](cuda.to_device(A.view(np.uint16)), cuda.to_device(Bt.view(np.uint16)), dC)
    cuda.synchronize()
    np.testing.assert_allclose(dC.copy_to_host(), A.astype(np.float32) @ Bt.astype(np.float32).T,
                               rtol=1e-3, atol=1e-3)


@gpu
@needs_gpu
def test_gpu_wgmma_matches_numpy(demo):
    if toolchain.compute_capability() != (9, 0):
        pytest.skip("wgmma (sm_90a) runs on Hopper only")
    from numba import cuda

    rng = np.random.default_rng(2)
    A = rng.standard_normal((64, 16)).astype(np.float16)
    Bt = rng.standard_normal((8, 16)).astype(np.float16)
    dC = cuda.device_array((64, 8), np.float32)
    demo["wg"].wgmma_tile[1, 128](cuda.to_device(A.view(np.uint16)), cuda.to_device(Bt.view(np.uint16)), dC)
    cuda.synchronize()
    np.testing.assert_allclose(dC.copy_to_host(), A.astype(np.float32) @ Bt.astype(np.float32).T,
                               rtol=1e-3, atol=1e-3)


@gpu
@needs_gpu
def test_gpu_big_dynamic_shared_and_template_args():
    from numba import cuda

    src = r"""
    extern "C" __global__ void reverse_big(const float* in, float* out, int n) {
      extern __shared__ float buf[];
      for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = in[i];
      __syncthreads();
      for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[n - 1 - i];
    }
    template <int STRIDE> __global__ void scale(float* x, float s, int n) {
      int i = (blockIdx.x * blockDim.x + threadIdx.x) * STRIDE;
      if (i < n) x[i] *= s;
    }
    """
    mod = cc.compile_cuda(src, name="bigsmem", kernels=["scale<2>"])
    n = 24 * 1024  # 96 KiB of floats: above the 48 KiB default
    x = np.arange(n, dtype=np.float32)
    dx, dy = cuda.to_device(x), cuda.device_array(n, np.float32)
    mod.reverse_big[1, 256, n * 4](dx, dy, n)
    np.testing.assert_array_equal(dy.copy_to_host(), x[::-1])
    mod["scale<2>"][(n // 2 + 255) // 256, 256](dx, 3.0, n)  # typed from the driver's parameter sizes
    want = x.copy()
    want[::2] *= 3
    np.testing.assert_array_equal(dx.copy_to_host(), want)


@gpu
@needs_gpu
def test_gpu_torch_tensors(demo):
    torch = pytest.importorskip("torch")
    a = torch.arange(1000, device="cuda", dtype=torch.float32)
    b = torch.full_like(a, 2.0)
    c = torch.empty_like(a)
    demo["vadd"].add[4, 256](a, b, c, a.numel())
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)


def test_typed_arguments_are_accepted_by_cuda_core(demo):
    """cuda.core packs exactly what prepare_args produces (checked without a GPU)."""
    from cuda.core._kernel_arg_handler import ParamHolder

    args = demo["vadd"].add.prepare_args([_FakeDeviceArray(0x1000), 0x2000, None, 5])
    assert ParamHolder(args).ptr != 0
    mod = cc.compile_cuda(TEMPLATED, name="tmpl", kernels=["scale<2>"])
    k = mod["scale<2>"]
    k._arg_sizes = [8, 4, 4]  # what the driver reports for (float*, float, int)
    typed = k.prepare_args([_FakeDeviceArray(0x1000), 2.0, 10])
    assert [type(a) for a in typed] == [np.uint64, np.float32, np.int32]
    assert ParamHolder(typed).ptr != 0


def test_untyped_arguments_keep_their_types_when_a_position_changes_type():
    """A template kernel (no parameter list): converters are kept per position and type, and a
    position that receives another type the next call is converted as that type."""
    mod = cc.compile_cuda(TEMPLATED, name="tmpl_pos", kernels=["scale<2>"])
    k = mod["scale<2>"]
    k._arg_sizes = [8, 4, 8]
    first = k.prepare_args([_FakeDeviceArray(0x1000), 2.0, 10])
    assert [type(a) for a in first] == [np.uint64, np.float32, np.int64] and int(first[0]) == 0x1000
    again = k.prepare_args([None, np.float32(1.5), True])
    assert [type(a) for a in again] == [np.uint64, np.float32, np.bool_] and int(again[0]) == 0
    third = k.prepare_args([0x2000, 3, 7])            # an int taken as an address (8 bytes), then sized ints
    assert [type(a) for a in third] == [np.int64, np.int32, np.int64] and int(third[0]) == 0x2000
    Tensor = type("Tensor", (), {"__module__": "torch", "is_cuda": False, "data_ptr": lambda self: 0x10})
    with pytest.raises(cc.LaunchError, match="on the CPU"):      # a CPU tensor (torch's type name, faked)
        k.prepare_args([Tensor(), 1.0, 1])
    Tensor.is_cuda = True
    assert int(k.prepare_args([Tensor(), 1.0, 1])[0]) == 0x10


def test_a_macro_parameter_list_is_left_to_the_driver():
    # a kernel declared as k(ARGS) must not look like a one-argument kernel (it failed to launch)
    from grader.cuda.signature import kernel_signatures as parse_kernel_signatures

    src = ('#define ARGS const float* a, int n\n'
           'extern "C" __global__ void k(ARGS) {}\n'
           'extern "C" __global__ void __launch_bounds__(128) j(const float* a, int n) {}\n')
    sigs = parse_kernel_signatures(src)
    assert "k" not in sigs
    assert [p.name for p in sigs["j"]] == ["a", "n"]


def test_a_kernel_of_a_cell_that_holds_the_stub_is_never_launched():
    """An untouched compiled exercise: launching any of its kernels is refused before the driver is
    asked for anything, and the check's message is the one-line "not implemented yet"."""
    from grader.check import explain
    from grader.cuda.module import StubLaunch

    mod = cc.compile_cuda(NAIVE.replace("float acc = 0.f;", "float acc = 0.f;\n    // YOUR CODE HERE"), name="stubbed")
    kernel = mod[mod.kernel_names[0]]
    with pytest.raises(StubLaunch) as caught:
        kernel(grid=1, block=32)
    assert explain(caught.value).startswith("not implemented yet: the cell `%%cuda stubbed` still holds")


def test_a_numba_kernel_that_still_raises_not_implemented_is_recognised_with_its_device_functions():
    """On a GPU a non-debug Numba kernel ignores ``raise``: grader.integrity refuses to launch a kernel
    whose code (or a device function it calls) still raises NotImplementedError."""
    import types

    from grader.integrity import _is_stub

    def stub_device(x):
        raise NotImplementedError()

    def done_device(x):
        return x

    def kernel_calling(x):
        return helper(x)

    def kernel_plain(x):
        return x + 1

    def wrap(fn, **scope):
        fn = types.FunctionType(fn.__code__, {**fn.__globals__, **scope}, fn.__name__)
        return types.SimpleNamespace(py_func=fn)

    assert _is_stub(wrap(stub_device))
    assert _is_stub(wrap(kernel_calling, helper=wrap(stub_device)))
    assert not _is_stub(wrap(kernel_calling, helper=wrap(done_device)))
    assert not _is_stub(wrap(kernel_plain))


def test_numba_sass_reads_the_build_that_ran_when_there_is_one():
    """On the GPU it was built for, a kernel's SASS comes from the dispatcher's own build (its options
    included; built through the dispatcher if not yet, so the next launch reuses it) instead of a
    separate compile; another GPU or a kernel that is not a dispatcher: None."""
    from numba.core import sigutils, types

    from grader.cuda.numba_sass import compiled_ptx

    class Overload:
        def inspect_asm(self, cc):
            return f"ptx for {cc}"

    class Kernel:
        def __init__(self):
            self.overloads, self.compiled = {(types.float32[:, ::1], types.float32[:, ::1]): Overload()}, []

        def compile(self, sig):
            self.compiled.append(sig)
            self.overloads[tuple(sigutils.normalize_signature(sig)[0])] = Overload()

    sig, sig1d = "void(float32[:, ::1], float32[:, ::1])", "void(float32[::1], float32[::1])"
    k = Kernel()
    assert compiled_ptx(k, sig, (9, 0), (9, 0)) == "ptx for (9, 0)" and k.compiled == []   # built already
    assert compiled_ptx(k, sig, (9, 0), (10, 0)) is None                                   # another GPU
    assert compiled_ptx(k, sig1d, (9, 0), (9, 0)) == "ptx for (9, 0)" and k.compiled == [sig1d]
    assert compiled_ptx(k, sig1d, (9, 0), (9, 0)) and k.compiled == [sig1d]                # once
    assert compiled_ptx(object(), sig, (9, 0), (9, 0)) is None                             # not a dispatcher
