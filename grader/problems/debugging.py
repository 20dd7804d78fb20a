"""Chapter 05, lesson 04 (debugging a hang and a race): the two small problems its kernels solve,
their launch functions, and the CPU checks (a replay of the learner's kernel, grader/cuda/ptx.py).

* :data:`ring_copy` — y = x for an (M, N) fp32 matrix, moved through shared memory by a producer
  (TMA loads into a ring of slots, ``full`` mbarriers) and 128 consumer threads (plain stores, then an
  arrival on the slot's ``empty`` mbarrier): the smallest pipeline with both directions of the
  handshake, which is where a wrong parity hangs. N a multiple of 4 (TMA's 16-byte rows), ragged
  against the 32 × 32 box elsewhere. :func:`ring_copy_launch`; :func:`check_ring_replay` (CPU).
* :data:`smem_transpose` — chapter 01's transpose (t = aᵀ) through a padded 32 × 33 shared tile, as
  a compiled kernel: the classic place for a missing ``__syncthreads``. :func:`transpose_launch`;
  :func:`check_transpose_replay` (CPU).

Both are exact (moving bits). On a GPU, ``grader.check``; without one the replay runs the learner's
kernel one block at a time and follows every element (grader/cuda/replay.py).
"""
from __future__ import annotations

from .. import integrity as _integrity
from .elementwise import transpose as _transpose

_HINT_RING = ("y must equal x. A launch that fails after about two seconds: a wait that never completed "
              "(course::mbar_wait_or_trap traps). The producer's first wait on each empty slot must pass at "
              "once: it waits for the phase *before* the slot's use, parity ((i / S) & 1) ^ 1.")

ring_copy = _transpose.variant(
    name="copy through a shared-memory ring",
    outputs=lambda shape, inputs: {"y": (shape, __import__("numpy").float32)},
    reference=lambda a: {"y": a.astype("float64")},
    sizes=[(4, 4), (32, 32), (100, 68), (1000, 1028), (4096, 4096)],
    hidden_sizes=[(1, 4), (33, 36), (2048, 260)],
    sim_sizes=[], hidden_sim_sizes=[],
    hint=_HINT_RING,
    bytes_moved=lambda shape: 2 * 4 * shape[0] * shape[1],
    bench_size=(8192, 8192),
    target=0.5, floor=0.1,
    simulator=False, arch="sm_90", arrays="torch",
)

smem_transpose = _transpose.variant(
    name="transpose through shared memory (CUDA C++)",
    sizes=[(1, 1), (1, 1000), (1000, 1), (1023, 517), (4096, 4096)],
    sim_sizes=[], hidden_sim_sizes=[],
    hint=("t[j, i] must equal a[i, j]. Right somewhere and wrong elsewhere, differently on each run: a "
          "thread read a tile element another thread had not written yet — a barrier (__syncthreads) "
          "between the tile's writes and its reads."),
    simulator=False, arch="sm_80", arrays="torch",
)


def ring_copy_launch(kernel, ctas: int | None = None):
    """``launch(x, y)`` of a ``ring_copy<Cfg>`` kernel ``(x_map, y, M, N)``: x's tensor map with 32 × 32
    boxes, no swizzle; a persistent grid (one CTA per SM, ``ctas`` overrides it) walking the boxes."""
    import numpy as np

    from ..cuda.module import _torch_stream_handle
    from .hopper import _map_cache

    _map = _map_cache()
    shape = kernel.launch_shape
    if shape is None or not shape.tile_m:
        raise ValueError(f"{kernel.name}: its configuration type must state THREADS, SMEM_BYTES and TILE_M")
    box = (shape.tile_m, shape.tile_n)

    def launch(x, y):
        M, N = x.shape
        if M == 0 or N == 0:
            return
        if N % 4:
            raise ValueError(f"TMA cannot describe a {M} × {N} fp32 matrix: its rows must be a multiple of 16 bytes apart")
        boxes = -(-M // box[0]) * -(-N // box[1])
        if ctas is None:
            from .attention_launch import sm_count

            n = sm_count(x.device.index or 0)
        else:
            n = ctas
        kernel.launch((min(boxes, n),), _map(x, box, "none"), y, np.int32(M), np.int32(N), stream=_torch_stream_handle(x))
    launch.__name__ = f"launch {kernel.name}"
    return launch


def transpose_launch(kernel):
    """``launch(a, t)`` of a ``smem_transpose<Cfg>`` kernel ``(a, t, M, N)``: one block per TILE × TILE
    tile of a, THREADS threads (the type's)."""
    import numpy as np

    from ..cuda.module import _torch_stream_handle

    shape = kernel.launch_shape
    if shape is None or not shape.tile_m:
        raise ValueError(f"{kernel.name}: its configuration type must state THREADS and TILE_M")
    T = shape.tile_m

    def launch(a, t):
        M, N = a.shape
        if M == 0 or N == 0:
            return
        kernel.launch((-(-N // T), -(-M // T)), a, t, np.int32(M), np.int32(N), stream=_torch_stream_handle(a))
    launch.__name__ = f"launch {kernel.name}"
    return launch


# ---------------------------------------------------------------- the CPU checks
def _replay_copy(kernel, make_launch, shape, out_shape, expect, fill: bool, launch_kw=None):
    """Replay every block; (problems, notes, {(row, col): value} of the output, the last block)."""
    from ..cuda import replay
    from ..cuda.ptx import Deadlock
    from ..errors import CheckFailed

    try:
        replay.refuse_stub(kernel.module)
    except NotImplementedError as e:
        raise CheckFailed(f"not implemented yet: {e}") from None
    x = replay.FakeTensor("x" if not fill else "a", shape, "f32")
    y = replay.FakeTensor("y" if not fill else "t", out_shape, "f32")
    L = replay.record_launch(make_launch, kernel, x, y)[0]
    problems, notes, out, uninit = [], [], {}, []
    printed: list = []
    for by in range(L.grid[1]):
        for bx in range(L.grid[0]):
            try:
                blk = replay.run(L, (bx, by, 0), fill={x.name: x} if fill else None)
            except replay.ReplayError as e:
                problems.append(f"the CPU replay could not follow the kernel: {e}")
                return problems, notes, out, printed
            except Deadlock as e:
                problems.append(f"block ({bx}, {by}): {e} — on a GPU the bounded wait (course::mbar_wait_or_trap) "
                                "traps after about two seconds and the launch fails")
                printed += getattr(e, "printf", [])
                return problems, notes, out, printed
            if blk.trapped:
                problems.append(f"block ({bx}, {by}): {blk.trapped}")
                return problems, notes, out, printed
            uninit += [(bx, by, *u) for u in blk.uninit_reads[:1]]
            notes += [n for n in blk.notes if n not in notes]
            printed += [((bx, by), tid, text) for tid, text in blk.printf]
            out.update(blk.read_tensor(y.name, out_shape, 4))
    if uninit:
        bx, by, tid, addr, line = uninit[0]
        problems.append(f"in {len(uninit)} blocks a thread read shared memory no thread had written yet (the first: "
                        f"block ({bx}, {by}), thread {tid}, shared 0x{addr:x}): a read that no barrier orders after "
                        "the write it needs. The replay runs each thread as far as it can before the next one, so "
                        "such a read finds nothing; on a GPU it finds whatever is there — a race")
    wrong = [(k, out.get(k)) for k in expect if out.get(k) != expect[k]]
    if wrong:
        (r, c), v = wrong[0]
        problems.append(f"{len(wrong)} of {len(expect)} elements of {y.name} are wrong; the first, {y.name}[{r}, {c}], "
                        f"holds {v if v is not None else 'nothing'} where it needs {expect[(r, c)]}")
    return problems, notes, out, None


def check_ring_replay(kernel, shape=(68, 100), ctas: int = 2) -> None:
    """CPU: replay ``ring_copy<Cfg>`` on ``shape`` with ``ctas`` CTAs (each walks several boxes, so the
    ring wraps and every parity is used); raise :class:`grader.errors.CheckFailed` unless it finishes and
    y = x element by element. Prints one line when it passes."""
    from ..cuda.ptx import Elem
    from ..errors import CheckFailed

    M, N = shape
    expect = {(r, c): Elem("x", r, c) for r in range(M) for c in range(N)}
    problems, notes, _, _ = _replay_copy(kernel, lambda k: ring_copy_launch(k, ctas=ctas), shape, shape, expect, False)
    if problems:
        raise CheckFailed(f"{kernel.name}, replayed on the CPU ({M} × {N}, {ctas} CTAs):\n  - " + "\n  - ".join(problems))
    print(f"✓ {kernel.name} replayed on the CPU: every wait completes and y = x ({M} × {N}, {ctas} CTAs, "
          f"the ring wrapped)")


def replay_verdict(kernel, which: str = "ring", shape=None, ctas: int = 2, printf_lines: int = 12) -> str:
    """The replay's verdict on ``kernel`` as text, never raising (for the lesson's demonstrations of a
    broken kernel): "ring" (:func:`check_ring_replay`'s problem) or "transpose"; with the first
    ``printf_lines`` lines the kernel printed (block, thread: text)."""
    from ..errors import CheckFailed

    try:
        if which == "ring":
            M, N = shape or (68, 100)
            from ..cuda.ptx import Elem

            expect = {(r, c): Elem("x", r, c) for r in range(M) for c in range(N)}
            problems, notes, _, printed = _replay_copy(kernel, lambda k: ring_copy_launch(k, ctas=ctas), (M, N),
                                                       (M, N), expect, False)
        else:
            M, N = shape or (40, 72)
            from ..cuda.ptx import Elem

            expect = {(c, r): Elem("a", r, c) for r in range(M) for c in range(N)}
            problems, notes, _, printed = _replay_copy(kernel, transpose_launch, (M, N), (N, M), expect, True)
    except CheckFailed as e:
        return str(e)
    out = [f"replayed on the CPU ({M} × {N}): " + ("no problem found" if not problems else "")]
    out += [f"  - {p}" for p in problems]
    if printed:
        out.append(f"  printf, in the order the replay ran the threads (first {printf_lines} lines):")
        out += [f"    block {b}, thread {tid}: {text.rstrip()}" for b, tid, text in printed[:printf_lines]]
    return "\n".join(out)


def check_transpose_replay(kernel, shape=(40, 72)) -> None:
    """CPU: replay every block of ``smem_transpose<Cfg>`` on ``shape``; raise unless t = aᵀ and no thread
    read a tile element before it was written."""
    from ..cuda.ptx import Elem
    from ..errors import CheckFailed

    M, N = shape
    expect = {(c, r): Elem("a", r, c) for r in range(M) for c in range(N)}
    problems, notes, _, _ = _replay_copy(kernel, transpose_launch, shape, (N, M), expect, True)
    if problems:
        raise CheckFailed(f"{kernel.name}, replayed on the CPU ({M} × {N}):\n  - " + "\n  - ".join(problems))
    print(f"✓ {kernel.name} replayed on the CPU: t = aᵀ ({M} × {N}), every tile element written before it is read")


__all__ = ["ring_copy", "smem_transpose", "ring_copy_launch", "transpose_launch", "check_ring_replay",
           "check_transpose_replay", "replay_verdict", "recorded"]

def recorded(name: str) -> str:
    """A GPU run of the lesson's broken kernels, recorded by dev/debugging_lesson_gpu.py
    (results/ch05/debugging/<name>.txt): what a learner without a GPU reads instead."""
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent.parent / "results" / "ch05" / "debugging" / f"{name}.txt"
    if not path.exists():
        return f"(no recorded run: {path.name} is missing from results/ch05/debugging/)"
    return path.read_text()


_integrity.record_problems(globals())   # the fields checks rely on, before any learner code
