"""Lesson 03.04 (mma.sync pipeline) on the CPU.

* The checkpoint (cell ``v_1stage``, the one-stage kernel): it builds for sm_90a and sm_80, its rubric
  passes for the reference and fails for the released stub ("not implemented yet") and for the mistakes
  the rubric must catch; a CPU model runs the cell's own index arithmetic (the tile addresses, the
  ``ldmatrix`` lane addresses and registers, the mma operands, the stores) on small integer matrices and
  gets A·B, and gets it wrong for each mistake of tests/wrong/ch03_mma.py it must catch.
* The pipeline (cell ``v_hgemm``): its exercise region sits in ``main_loop`` near the top of the cell,
  and the release's stub compiles and fails the rubric with "not implemented yet".
* The lesson: points (9 in all, 3 for the checkpoint), the pictures it shows exist, are drawn by
  tools/figures/ch03_mma.py, agree with the PTX ISA's fragment rules, and are released with it.

Marked ``gpu``: the checkpoint passes the graded check, and each mistake's verdict is recorded.
"""
from __future__ import annotations

import functools
import re
import subprocess
import sys

import numpy as np
import pytest

import grader  # noqa: F401  (simulator first)
from grader.cuda import sass
from grader.notebooks import cell_source
from tests.cells import compile_cell, run_rubric
from tests.conftest import ROOT, solution
from tests.wrong import caught
from tests.wrong import ch03_mma as W

CH, NB = W.CHAPTER, W.NOTEBOOK


def reference(cell: str = W.CELL) -> str:
    return cell_source(solution(CH, NB), cell)


def released(cell: str) -> str:
    return cell_source(ROOT / "course" / CH / NB, cell)


# ---------------------------------------------------------------- a CPU model of the checkpoint's index arithmetic
def _py(expr: str) -> str:
    """A C++ integer expression of the cell (non-negative ints: / and % agree with Python's // and %)."""
    expr = expr.replace("(size_t)", "").replace("threadIdx.x", "tid").replace("blockIdx.x", "bid")
    return re.sub(r"(?<![/*])/(?![/*])", "//", expr)


@functools.lru_cache(maxsize=None)
def _code(expr: str):
    return compile(_py(expr).strip(), "<cell>", "eval")


def _ev(expr: str, env: dict) -> int:
    """Evaluate a C++ integer expression of the cell in env (compiled once per expression)."""
    return eval(_code(expr), {}, env)


def _split(args: str) -> list[str]:
    """Top-level comma split of a call's arguments."""
    out, depth, cur = [], 0, ""
    for ch in args:
        depth += ch in "([" and 1 or (ch in ")]" and -1 or 0)
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()]


def _calls(src: str, name: str) -> list[tuple[int, list[str]]]:
    """(position, argument list) of every call of ``name(...)`` in ``src``."""
    found = []
    for m in re.finditer(re.escape(name) + r"\(", src):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(src[i], 0)
            i += 1
        found.append((m.start(), _split(src[m.end():i - 1])))
    return found


def _decls(line: str, env: dict) -> None:
    """Evaluate ``const int a = …, b = …;`` into env."""
    body = line.split("//")[0].strip()[len("const int "):].rstrip(";")
    for part in _split(body):
        name, expr = part.split("=", 1)
        env[name.strip()] = _ev(expr, env)


def _loop_bounds(src: str, call_at: int) -> list[tuple[str, range]]:
    """The ``for (int v = a; v < b; ++v | v += s)`` headers directly enclosing the call at ``call_at``."""
    loops = []
    before = src[:call_at].split("\n")
    if before[-1].strip():                       # `for (…) call(…);` on one line
        before[-1] = before[-1].strip()
    else:
        before = before[:-1]
    for line in reversed(before):
        s = line.strip()
        m = re.match(r"for \(int (\w+) = (\d+); \1 < (\d+); (?:\+\+\1|\1 \+= (\d+))\)", s)
        if m:
            loops.append((m.group(1), range(int(m.group(2)), int(m.group(3)), int(m.group(4) or 1))))
        elif s.startswith("#pragma") or s.startswith("//") or not s:
            continue
        else:
            break
    return loops[::-1]


def _lvalue(expr: str, env: dict) -> tuple:
    name, *idx = re.findall(r"^(\w+)|\[([^\]]+)\]", expr)
    return (name[0],) + tuple(_ev(i[1], env) for i in idx)


class Checkpoint:
    """Runs the kernel's index arithmetic, as written in the cell, for every warp of every block in order
    (no concurrency: barriers and waits are not modelled), with ldmatrix and mma.sync as the PTX ISA
    defines them. Shared memory starts as NaN, so an element read before it was written shows."""

    def __init__(self, src: str):
        self.src = src
        body = src[src.index("hgemm_1stage("):]
        self.kernel = body[:body.index("\n}\n")]
        self.region = self.kernel[self.kernel.index("BEGIN SOLUTION"):self.kernel.index("END SOLUTION")]
        self.a_at = (re.search(r"a_at\(unsigned short\* sA, int r, int k\) \{[^}]*?return sA \+ ([^;]+);", src).group(1))
        self.b_at = (re.search(r"b_at\(unsigned short\* sB, int k, int n\) \{[^}]*?return sB \+ ([^;]+);", src).group(1))
        lt = src[src.rindex("void load_tile("):]
        lt = lt[:lt.index("\n}\n")]
        self.copies = [(blk.group(1), _calls(blk.group(2), "course::cp_async_16")[0][1])
                       for blk in re.finditer(r"for \(int p = 0; p < 4; \+\+p\) \{\n\s*(const int [^\n]+)\n(.*?)\n  \}", lt, re.S)]
        sc = src[src.rindex("void store_c("):]
        self.store_decl = re.search(r"(const int m = [^\n]+)", sc).group(1)

    def offset(self, call: str, env: dict) -> int:
        """Element offset in the stage of ``a_at(sA, r, c)`` / ``b_at(sB, r, c)``, evaluated in env."""
        fn, r, c = re.match(r"(\w+)\(\w+, (.+), (.+)\)$", call).groups()
        rr, cc = _ev(r, env), _ev(c, env)
        if fn == "a_at":
            return _ev(self.a_at, {"r": rr, "k": cc})
        assert fn == "b_at", call
        return 128 * 32 + _ev(self.b_at, {"k": rr, "n": cc})

    def __call__(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        M, K = A.shape
        N = B.shape[1]
        assert M % 128 == 0 and N % 128 == 0 and K % 32 == 0      # the launcher pads to whole tiles
        C = np.full((M, N), np.nan)
        tiles_n = N // 128
        ldms = ([(at, args, False) for at, args in _calls(self.region, "course::ldmatrix_x4")]
                + [(at, args, True) for at, args in _calls(self.region, "course::ldmatrix_x4_trans")])
        mmas = _calls(self.region, "course::mma_bf16")
        assert len(ldms) == 2 and len(mmas) == 1, "the model knows one ldmatrix of A, one of B, one mma"
        ks_loop = re.search(r"for \(int ks = 0; ks < (\d+); ks \+= (\d+)\)", self.region)
        ks_range = range(0, int(ks_loop.group(1)), int(ks_loop.group(2)))
        kt_count = K // 32
        for bid in range(M // 128 * tiles_n):
            warps = []
            for warp in range(4):
                env = {"bid": bid, "tiles_n": tiles_n, "K": K, "lane": 0, "warp": warp, "tid": 32 * warp}
                for line in self.kernel.split("\n"):
                    if line.strip().startswith("const int ") and "BEGIN" not in line:
                        _decls(line, env)
                    if "BEGIN SOLUTION" in line:
                        break
                env.pop("lane"), env.pop("tid")
                warps.append(env)
            m0, n0 = warps[0]["m0"], warps[0]["n0"]
            acc = {w: np.zeros((32, 4, 8, 4)) for w in range(4)}             # [lane][i][j][q]
            for kt in range(kt_count):
                smem = np.full(128 * 32 + 32 * 128, np.nan)
                for tid in range(128):                                          # load_tile: every thread's copies
                    for p in range(4):
                        for decl, (dst, srcexpr) in self.copies:
                            env = {"tid": tid, "p": p, "m0": m0, "n0": n0, "kt": kt, "lda": K, "ldb": N}
                            _decls(decl, env)
                            off = self.offset(dst, env)
                            mat, gexpr = srcexpr.split(" + ", 1)
                            g = _ev(gexpr, env)
                            smem[off: off + 8] = (A if mat == "A" else B).reshape(-1)[g: g + 8]
                for w in range(4):
                    for ks in ks_range:
                        regs = {"a": {}, "b": {}}
                        for at, args, trans in ldms:
                            for binding in _iter_loops(_loop_bounds(self.region, at)):
                                rows = []
                                for lane in range(32):
                                    off = self.offset(args[4], {**warps[w], **binding, "ks": ks, "lane": lane})
                                    rows.append(smem[off: off + 8])
                                got = _ldmatrix(rows, trans)                    # [lane][matrix] -> (v0, v1)
                                for lane in range(32):
                                    env = {**warps[w], **binding, "ks": ks, "lane": lane}
                                    for j in range(4):
                                        name, *idx = _lvalue(args[j], env)
                                        regs[name][(lane,) + tuple(idx)] = got[lane][j]
                        at, (dst, a_arg, b_arg) = mmas[0]
                        for binding in _iter_loops(_loop_bounds(self.region, at)):
                            env = {**warps[w], **binding}
                            _, i, j = _lvalue(dst, env)
                            ai, bj = _lvalue(a_arg, env)[1:], _lvalue(b_arg, env)[1:]
                            a = [[regs["a"][(lane,) + ai + (r,)] for r in range(4)] for lane in range(32)]
                            b = [[regs["b"][(lane,) + bj + (r,)] for r in range(2)] for lane in range(32)]
                            acc[w][:, i, j, :] = _mma(acc[w][:, i, j, :], a, b)
            for w in range(4):                                                  # store_c
                for lane in range(32):
                    env0 = {"m0": m0 + warps[w]["wm"], "n0": n0 + warps[w]["wn"], "g": lane // 4, "t": lane % 4}
                    for i in range(4):
                        for j in range(8):
                            for q in range(4):
                                env = {**env0, "i": i, "j": j, "q": q}
                                _decls(self.store_decl, env)
                                C[env["m"], env["n"]] = acc[w][lane, i, j, q]
        return C


def _iter_loops(loops):
    if not loops:
        yield {}
        return
    (v, rng), rest = loops[0], loops[1:]
    for x in rng:
        for inner in _iter_loops(rest):
            yield {v: x, **inner}


def _ldmatrix(rows: list, trans: bool) -> list:
    """PTX ldmatrix.x4: lane l supplies row l % 8 of matrix l / 8; lane l receives, of matrix j, row
    l / 4, columns 2 (l % 4) and +1 (of the transposed matrix with .trans)."""
    mats = [np.array(rows[8 * j: 8 * j + 8]) for j in range(4)]
    if trans:
        mats = [m.T for m in mats]
    return [[(mats[j][lane // 4, 2 * (lane % 4)], mats[j][lane // 4, 2 * (lane % 4) + 1]) for j in range(4)]
            for lane in range(32)]


def _mma(d, a, b):
    """PTX mma.m16n8k16 fragments: a[lane][r] = (two elements), b[lane][r], d[lane][q]; returns d + A·B."""
    A, B = np.full((16, 16), np.nan), np.full((16, 8), np.nan)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(8):                        # a_i: row g for i < 2 or 4 <= i < 6, else g + 8
            A[g if (i < 2 or 4 <= i < 6) else g + 8, 2 * t + (i & 1) + (8 if i >= 4 else 0)] = a[lane][i // 2][i % 2]
        for i in range(4):                        # b_i: row 2t + (i & 1) (+ 8 for i >= 2), column g
            B[2 * t + (i & 1) + (8 if i >= 2 else 0), g] = b[lane][i // 2][i % 2]
    D = A @ B
    out = d.copy()
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for q in range(4):
            out[lane, q] = d[lane, q] + D[g + (8 if q >= 2 else 0), 2 * t + (q & 1)]
    return out


def _inputs(M=256, N=128, K=64, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(-3, 4, (M, K)).astype(np.float64), rng.integers(-3, 4, (K, N)).astype(np.float64)


def _model_result(src: str, **shape):
    A, B = _inputs(**shape)
    return Checkpoint(src)(A, B), A @ B


# ---------------------------------------------------------------- the checkpoint
def test_model_of_the_reference_computes_the_product():
    for shape in ({"M": 256, "N": 128, "K": 64}, {"M": 128, "N": 256, "K": 32}):   # tiles along m, along n
        got, want = _model_result(reference(), **shape)
        assert not np.isnan(got).any() and np.array_equal(got, want), shape


@pytest.mark.parametrize("mistake", sorted(W.MODEL_CATCHES))
def test_model_catches_index_mistakes(mistake):
    src = W.cpp_variant(reference(), W.MISTAKES[mistake])
    got, want = _model_result(src)
    assert np.isnan(got).any() or not np.array_equal(got, want), f"{mistake}: the model computed A·B"


@pytest.mark.parametrize("mistake", sorted(W.GPU_ONLY))
def test_barrier_mistakes_are_invisible_to_the_sequential_model(mistake):
    """Why they are GPU-only: run one warp after another, a missing barrier changes nothing."""
    got, want = _model_result(W.cpp_variant(reference(), W.MISTAKES[mistake]))
    assert np.array_equal(got, want)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_checkpoint_builds_and_passes_the_rubric(arch):
    from grader.cuda import compile_cuda
    from grader.cuda.magic import parse_magic_line

    first, _, body = reference().partition("\n")
    mod = compile_cuda(body, name=f"hs_{arch}", arch=arch, kernels=parse_magic_line(first[len("%%cuda"):])["kernels"])
    run_rubric(CH, NB, W.RUBRIC, hs=mod)
    res = mod[W.KERNEL].resources
    assert res["spill_stores"] == 0 and res["stack"] == 0
    ops = sass.opcodes(mod, W.KERNEL)
    assert ops["HMMA"] == 64 and ops["LDSM"] == 16 and ops["LDGSTS"] == 8 and ops["BAR"] == 2   # one k tile
    shape = mod.launch_shape(W.KERNEL)
    assert (shape.threads, shape.tile_m, shape.tile_n, shape.tile_k, shape.smem_bytes) == (128, 128, 128, 32, 16384)


def test_released_checkpoint_compiles_and_says_not_implemented():
    stub = released(W.CELL)
    assert "// YOUR CODE HERE" in stub and "ldmatrix_x4(" not in stub.split("YOUR CODE HERE")[1].split("store_c(acc")[0]
    mod = compile_cell(stub, name="hs_stub")
    with pytest.raises(sass.RubricFailed, match="not implemented yet"):
        run_rubric(CH, NB, W.RUBRIC, hs=mod)


@pytest.mark.parametrize("mistake", sorted(W.RUBRIC_CATCHES))
def test_rubric_catches(mistake):
    mod = compile_cell(W.cpp_variant(reference(), W.MISTAKES[mistake]), name=f"hs_{mistake}")
    with pytest.raises(sass.RubricFailed, match=re.escape(W.RUBRIC_CATCHES[mistake])):
        run_rubric(CH, NB, W.RUBRIC, hs=mod)


def test_every_mistake_applies_to_the_cell():
    for edits in W.MISTAKES.values():
        assert W.cpp_variant(reference(), edits) != reference()


# ---------------------------------------------------------------- the pipeline cell
def test_pipeline_exercise_sits_near_the_top_and_its_stub_says_not_implemented():
    stub = released("v_hgemm")
    line = next(i for i, ln in enumerate(stub.split("\n"), 1) if "YOUR CODE HERE" in ln)
    assert line < 70 and stub.count("YOUR CODE HERE") == 1, line
    assert "void main_loop(" in stub.split("YOUR CODE HERE")[0].split("\n", line - 20)[-1]
    mod = compile_cell(stub, name="hg_stub", only="hgemm<V3>")
    with pytest.raises(sass.RubricFailed, match="not implemented yet"):
        run_rubric(CH, NB, "test_hgemm_sass", hg=mod)


# ---------------------------------------------------------------- the lesson
def test_points_and_the_checkpoint_cells():
    import nbformat

    nb = nbformat.read(solution(CH, NB), as_version=4)
    points = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"] for c in nb.cells
              if c.metadata.get("nbgrader", {}).get("grade")}
    assert sum(points.values()) == 9
    assert points["test_1stage_sass"] + points["test_1stage_check"] == 3
    ids = [c.id for c in nb.cells]
    assert ids.index("v_1stage") < ids.index("test_1stage_check") < ids.index("v_hgemm")


def test_figures_are_drawn_by_the_script_released_and_shown(tmp_path):
    script = ROOT / "tools" / "figures" / "ch03_mma.py"
    r = subprocess.run([sys.executable, str(script), "--out", str(tmp_path)], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr                 # its PTX-rule checks passed
    import nbformat

    text = "\n".join(c.source for c in nbformat.read(solution(CH, NB), as_version=4).cells if c.cell_type == "markdown")
    shown = re.findall(r"\]\((figures/[\w.]+\.svg)\)", text)
    assert len(shown) == 4
    for rel in shown:
        src, rel_copy = ROOT / "solutions" / CH / rel, ROOT / "course" / CH / rel
        assert src.stat().st_size < 100_000 and rel_copy.read_bytes() == src.read_bytes()
        drawn = tmp_path / rel.split("/")[-1]
        assert drawn.read_bytes() == src.read_bytes(), f"{rel} differs from what the script draws: run it"


def test_model_agrees_with_the_figure_script():
    sys.path.insert(0, str(ROOT / "tools" / "figures"))
    import ch03_mma as F

    F.check_maps()
    a = np.zeros((32, 4, 2))
    for m in range(16):
        for k in range(16):
            lane, reg = F.a_owner(m, k)
            a[lane, reg, k % 2] = 100 * m + k
    b = np.zeros((32, 2, 2))
    for k in range(16):
        for n in range(8):
            lane, reg = F.b_owner(k, n)
            b[lane, reg, k % 2] = 1.0 if k == n else 0.0          # B = [I8; 0]: D = A[:, :8]
    d = _mma(np.zeros((32, 4)), a, b)
    for m in range(16):
        for n in range(8):
            lane, q = F.c_owner(m, n)
            assert d[lane, q] == 100 * m + n


# ---------------------------------------------------------------- on a GPU
def _launch(src: str, name: str):
    from grader.problems import gemm as P

    return P.tiled_launch(compile_cell(src, name=name)[W.KERNEL])


@pytest.mark.gpu
def test_checkpoint_passes_on_a_gpu():
    from grader.check import check
    from grader.problems import gemm as P

    launch = _launch(reference(), "hs_gpu")
    check(launch, P.hgemm_bf16, quiet=True)
    check(launch, P.hgemm_bf16, hidden=True, quiet=True)


@pytest.mark.gpu
@pytest.mark.parametrize("mistake", sorted(W.MISTAKES))
def test_checkpoint_mistakes_on_a_gpu(mistake):
    from grader.problems import gemm as P

    why = caught(_launch(W.cpp_variant(reference(), W.MISTAKES[mistake]), f"hs_g_{mistake}"), P.hgemm_bf16)
    print(f"{mistake}: {why.splitlines()[0] if why else 'NOT caught by the values'}")
    if mistake in W.GPU_ONLY:
        return                           # a race: recorded, not asserted
    assert why and "failed at shape" in why, f"{mistake}: not caught"
