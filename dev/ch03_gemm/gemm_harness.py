"""What chapter 03's GEMM experiments share (tune_hgemm.py, tune_cute.py, measure.py, profile_clocks.py).

Checking, timing and launching are the grader's own:

* the lessons' kernels are the notebooks' %%cuda cells compiled by the magic's own code, with the name
  expressions of their magic line (:func:`lesson_module`: lesson 04's ``hgemm<V1..V3>``, lesson 05's
  ``cute_gemm<V1, V2>``);
* launching is the launch contract (grader/cuda/launch.py): every candidate, a lesson's kernel or a
  sweep's variant (hgemm_variants.cu, cute_variants.cu), is a template over a configuration type that
  states THREADS, SMEM_BYTES and TILE_M/N/K. Block size, dynamic shared memory and tile come from the
  compiled module (``kernel.launch_shape``), and ``grader.problems.gemm.tiled_launch`` pads A and B with
  zeros to whole tiles and launches one block per tile of C; a persistent kernel gets the same launch
  with its grid capped at one block per SM (:class:`Persistent`);
* correctness is grader.check's two halves on P.hgemm_bf16 (:func:`check_all`): ``run_case`` runs the
  launch function on the problem's inputs (poisoned outputs inside guard zones), ``verdict`` compares
  with the float64 reference under the course's bf16 tolerance (also: no NaN, nothing written past the
  end, inputs unchanged, a kernel launched);
* the graded timing is ``grader.measure`` against the problem's peer, cuBLAS bf16 on the same A and B
  (grader.peers), timed as the speed cell times it (:func:`graded`).

Kept outside the grader, on purpose: the sweeps rank candidates by timing each back to back with cuBLAS
(their own loops, in tune_hgemm.py and tune_cute.py), which the grader never does; the driver's occupancy
query (:func:`occupancy`); the SASS counts of the lessons' rubric (:data:`SASS_WANT`, read with
grader.cuda.sass).

A candidate is a :class:`Candidate`: ``.name``, ``.kernel`` (None when it did not compile), ``.shape``
(its LaunchShape), ``.row`` (its report: "check", "correct", "errors", …) and ``.launch_fn()``, a
launch function ``(a, b, c)`` as P.hgemm_bf16 takes it. Torch is imported by the functions that need
it, so the scripts load and compile without a GPU (--compile-only).
"""
from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:          # run as a script: import the repository's grader
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import grader  # noqa: E402,F401  (before numba: it picks GPU or simulator)
from grader.cuda import compile_cuda, sass  # noqa: E402
from grader.cuda.magic import parse_magic_line  # noqa: E402
from grader.notebooks import cell_source, run_cells  # noqa: E402
from grader.problems import gemm as P  # noqa: E402

SOL = ROOT / "solutions" / "03_gemm"
SASS_WANT = ["HMMA.16816.F32.BF16", "LDSM.16.M88.4", "LDSM.16.MT88.4", "LDGSTS"]   # lesson 04's rubric


# ------------------------------------------------------------------ the lessons' cells
def lesson_cell(notebook: str, cell_id: str) -> tuple[dict, str]:
    """(the magic line's arguments: name, kernels, …; the cell's body) of a lesson's %%cuda cell."""
    line, _, body = cell_source(SOL / notebook, cell_id).partition("\n")
    return parse_magic_line(line[len("%%cuda"):]), body


def lesson_module(notebook: str, cell_id: str):
    """A lesson's %%cuda cell compiled as the notebook compiles it (grader.notebooks.run_cells)."""
    args, _ = lesson_cell(notebook, cell_id)
    return run_cells(SOL / notebook, [cell_id])[args["name"]]


# ------------------------------------------------------------------ candidates
class Persistent:
    """A persistent kernel as tiled_launch sees it: the same kernel and launch shape, the grid capped at
    one block per SM (each block then walks tiles blockIdx.x, + gridDim.x, …)."""

    def __init__(self, kernel, sms: int):
        self.kernel, self.sms = kernel, sms
        self.name, self.launch_shape = kernel.name, kernel.launch_shape

    def launch(self, grid, *args, stream=None):
        return self.kernel.launch(min(grid, self.sms), *args, stream=stream)


class Candidate:
    """One kernel of a sweep: ``source`` compiled (grader.cuda.compile_cuda) with the name expressions
    ``kernels`` under the module name ``module_name``; ``kernel_expr`` is the one launched."""

    def __init__(self, name: str, kernel_expr: str, source: str, config: str = "", kernels=None,
                 module_name: str | None = None, persistent: bool = False):
        self.name, self.kernel_expr, self.source = name, kernel_expr, source
        self.kernels = list(kernels or [kernel_expr])
        self.module_name = module_name or name
        self.persistent = persistent           # launched with min(tiles, SMs) blocks
        self.module = self.kernel = self.shape = None
        self.row = {"variant": name, "config": config, "errors": []}

    @property
    def tile(self) -> tuple:
        return (self.shape.tile_m, self.shape.tile_n, self.shape.tile_k) if self.shape else (0, 0, 0)

    @property
    def threads(self) -> int:
        return self.shape.threads if self.shape else 0

    @property
    def smem(self) -> int:
        return self.shape.smem_bytes if self.shape else 0

    def compile(self) -> dict | None:
        """Compile; record in ``row`` the registers, spills, the launch shape the cubin states and the
        compile time, and the counts of the SASS the lessons' rubric wants (+ LDL/STL: a spill).
        Returns every opcode's count ({} without cuobjdump), or None if it did not compile."""
        t = time.time()
        try:
            self.module = compile_cuda(self.source, name=self.module_name, kernels=self.kernels)
            kernel = self.module[self.kernel_expr]
            shape = kernel.launch_shape
            if shape is None or not (shape.tile_m and shape.tile_n and shape.tile_k):
                raise ValueError(f"{self.kernel_expr} states no launch shape (THREADS, SMEM_BYTES, TILE_M/N/K)")
            self.kernel, self.shape = kernel, shape
            res = kernel.resources
            self.row.update(regs=res.get("registers"), spill_stores=res.get("spill_stores"),
                            spill_loads=res.get("spill_loads"), stack=res.get("stack"), smem=shape.smem_bytes,
                            threads=shape.threads, tile=list(self.tile), compile_s=round(time.time() - t, 2),
                            from_cache=self.module.from_cache)
        except Exception as e:
            self.kernel = None
            msg = str(e).strip()
            self.row["errors"].append(f"compile: {msg.splitlines()[0][:300] if msg else repr(e)}")
            self.row["compile_log"] = getattr(e, "log", "")[-2000:]
            return None
        try:
            ops = sass.opcodes(self.module, self.kernel.symbol, full=True)
        except Exception as e:                      # no cuobjdump: not fatal
            self.row["sass"] = f"unavailable: {e!r}"[:200]
            return {}
        rep = {p: sum(n for op, n in ops.items() if sass.matches(p, op)) for p in SASS_WANT}
        rep["LDL/STL"] = sum(n for op, n in ops.items() if op.split(".")[0] in ("LDL", "STL"))
        self.row["sass"] = rep
        missing = [p for p in SASS_WANT if rep[p] == 0]
        if missing or rep["LDL/STL"]:
            self.row["errors"].append(f"sass: missing {missing}, LDL/STL {rep['LDL/STL']}")
        return ops

    def launch_fn(self):
        """The launch function ``(a, b, c)``: grader.problems.gemm.tiled_launch of the kernel (or of its
        :class:`Persistent` view)."""
        kernel = self.kernel
        if self.persistent:
            kernel = Persistent(kernel, grader.device.info().sm_count)
        return P.tiled_launch(kernel)


# ------------------------------------------------------------------ correctness: grader.check's halves
def check_all(cands, shapes, report: dict, problem=P.hgemm_bf16, before=None, seed: int = 0) -> bool:
    """Check every compiled candidate at each shape with grader.check's run_case + verdict on the
    problem's inputs (made once per shape, reference computed once); fills row["check"] (shape -> "ok"
    or the verdict's first lines) and row["correct"]. ``before(cand)`` runs first for each (e.g. an
    occupancy query). Returns False once the CUDA context is lost (report["fatal"] set: nothing more
    can run in this process)."""
    from grader.check import refuse_if_context_lost, run_case, verdict
    from grader.errors import CheckFailed

    cases = []
    for s in shapes:
        inputs = problem.make_inputs(np.random.default_rng(seed), s)
        cases.append((s, inputs, problem.reference(**inputs)))
    for cand in cands:
        if cand.kernel is None:
            continue
        try:
            if before:
                before(cand)
            launch, res = cand.launch_fn(), {}
            for s, inputs, want in cases:
                failures = verdict(problem, s, inputs, run_case(launch, problem, s, inputs), want)
                res[str(s)] = "ok" if not failures else failures[:4]
            cand.row["check"] = res
            cand.row["correct"] = all(v == "ok" for v in res.values())
            if not cand.row["correct"]:
                cand.row["errors"].append("check: wrong at " + ", ".join(k for k, v in res.items() if v != "ok"))
            refuse_if_context_lost()
        except CheckFailed as e:                    # an earlier kernel broke the context
            cand.row["correct"] = False
            report["fatal"] = str(e)[:300]
            print(f"check {cand.name:40s} FATAL {report['fatal']}", flush=True)
            return False
        except Exception as e:
            cand.row["correct"] = False
            cand.row["errors"].append(f"check: {e!r}"[:300])
            traceback.print_exc()
        print(f"check {cand.name:40s} {cand.row.get('check')}", flush=True)
    return True


# ------------------------------------------------------------------ device operands
def operands(s, problem=P.hgemm_bf16, seed: int = 0, tile=None) -> dict:
    """The problem's inputs at shape ``s`` on the device, as the grader makes them (grader.arrays), and a
    C to write. ``tile`` = (BM, BN, BK): A, B and C zero-padded to whole tiles once, here (a launch
    function then pads nothing: timing measures the kernel; grader.measure times the launch function)."""
    from grader import arrays

    inputs = problem.make_inputs(np.random.default_rng(seed), s)
    a, b = inputs["a"], inputs["b"]
    M, N = s.M, s.N
    if tile:
        BM, BN, BK = tile
        M, N, Kp = -(-s.M // BM) * BM, -(-s.N // BN) * BN, -(-s.K // BK) * BK
        a = np.pad(a, ((0, M - s.M), (0, Kp - s.K)))
        b = np.pad(b, ((0, Kp - s.K), (0, N - s.N)))
    (_, out_dtype), = problem.outputs(s, inputs).values()
    return {"a": arrays.upload(a)[1], "b": arrays.upload(b)[1], "c": arrays.output((M, N), out_dtype)[1]}


def cublas(ops: dict, dtype: str = "bf16"):
    """cuBLAS (torch.matmul) on ``ops``' A and B, one call: grader.peers.matmul's own call."""
    from grader import peers

    return peers.matmul(dtype).prepare(peers.PeerInputs({"a": ops["a"], "b": ops["b"]}))


# ------------------------------------------------------------------ the graded timing
def graded(launch, s, label: str, problem=P.hgemm_bf16, budget_s: float = 1.0):
    """``launch`` timed as the course times a speed cell (grader.measure: L2 flushed before each run,
    the adaptive head start, CUDA events, the median) beside the problem's peer (cuBLAS bf16 on the same
    A and B, measured once per shape in this process). Returns the grader's Measurement."""
    return grader.measure(launch, problem, label, size=s, budget_s=budget_s)


# ------------------------------------------------------------------ the driver's view
def occupancy(cand) -> int | None:
    """Resident blocks per SM, from the driver (cuOccupancyMaxActiveBlocksPerMultiprocessor, with the
    dynamic shared memory its launch shape states); None where it cannot be asked."""
    try:
        from cuda.bindings import driver

        h = cand.kernel._get().handle
        if isinstance(h, driver.CUkernel):
            err, h = driver.cuKernelGetFunction(h)
        cand.kernel._set_max_dynamic_shared(cand.smem)
        err, n = driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(h, cand.threads, cand.smem)
        return int(n) if int(err) == 0 else None
    except Exception:
        return None
