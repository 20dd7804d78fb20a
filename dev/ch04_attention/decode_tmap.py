"""Lesson 04.04's decode and paged kernels with K/V by TMA (decode_tmap.cu), against the lesson's own.

Each variant is checked first (grader.check: the problems' visible sizes, the notebook's extra size and
the hidden sizes, contiguous and paged), then timed as the judge times it (grader.speed.timed_checked:
re-poisoned outputs, grader.timing, the copy peer of the same process, the timed run's output judged)
under the grader's write flush and, where grader.timing has it (``timing.FLUSH``), the read flush. The
lesson's launch_decode / launch_paged (its solution notebook's cells) are timed in the same process.

    python dev/ch04_attention/decode_tmap.py            (GPU; ~60 s)
    python dev/ch04_attention/decode_tmap.py --dry      (CPU: compile, launch shapes)
"""
from __future__ import annotations

import argparse
import importlib
import math
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import grader  # noqa: E402
from grader import timing  # noqa: E402
from grader.problems import attention as P  # noqa: E402
from grader.problems.attention_launch import LOG2E, cdiv, split_chunk, _counters  # noqa: E402

speed = importlib.import_module("grader.speed")
CU = Path(__file__).with_name("decode_tmap.cu")
VARIANTS = {"tma3x2": ("DecT", "PagedT"), "tma4x1": ("DecT4", "PagedT4")}


def compile_module():
    from grader.cuda.compiler import compile_cuda

    ks = [f"decode_t<{c}<{d}>>" for pair in VARIANTS.values() for c in pair for d in (128, 64)]
    return compile_cuda(CU.read_text(), name="decode_tmap", kernels=ks)


_MAPS: dict = {}          # (K address, V address, shape, box) -> the two tensor maps (encoded once)


def _maps(k2, v2, box):
    from grader.cuda.tma import tiled_2d

    key = (k2.data_ptr(), v2.data_ptr(), tuple(k2.shape), box)
    if key not in _MAPS:
        _MAPS[key] = (tiled_2d(k2, box, "128B"), tiled_2d(v2, box, "128B"))
    return _MAPS[key]


def make_launch(kernels: dict, paged: bool):
    """launch(q, kc, vc, [block_table,] seq_lens, o) of the TMA kernels {d: kernel}, the fused merge."""
    def run(q, kc, vc, table, seq_lens, o):
        import torch

        B, Hq, d = q.shape
        kern = kernels[d]
        sh = kern.launch_shape
        if B == 0:
            return
        if paged:
            npg, Pg, Hkv, _ = kc.shape
            cap, shift, box_rows = table.shape[1] * Pg, int(math.log2(Pg)), min(Pg, sh.tile_n)
            if Pg & (Pg - 1) or box_rows % 8:
                raise ValueError(f"pages of {Pg}: a power of two of at least 8 tokens")
            k2, v2 = kc.view(npg * Pg, Hkv * d), vc.view(npg * Pg, Hkv * d)
        else:
            _, Hkv, cap, _ = kc.shape
            shift, box_rows = 0, sh.tile_n
            k2, v2 = kc.view(B * Hkv * cap, d), vc.view(B * Hkv * cap, d)
        kmap, vmap = _maps(k2, v2, (box_rows, 64))
        chunk = split_chunk(B * Hkv, cap, sh.tile_n)
        n_splits = max(1, cdiv(cap, chunk))
        if n_splits == 1:
            chunk = max(cap, 1)
        o_part = lse_part = counters = None
        if n_splits > 1:
            o_part = torch.empty((B, Hq, n_splits, d), dtype=torch.float32, device=q.device)
            lse_part = torch.empty((B, Hq, n_splits), dtype=torch.float32, device=q.device)
            counters = _counters(B * Hkv, q.device.index or 0)
        kern.launch((n_splits, Hkv, B), kmap, vmap, q, table, seq_lens, o_part, lse_part, o, counters, Hq, Hkv,
                    cap, shift, box_rows, chunk, n_splits, LOG2E / math.sqrt(d))

    if paged:
        def launch(q, k_pages, v_pages, block_table, seq_lens, o):
            run(q, k_pages, v_pages, block_table, seq_lens, o)
    else:
        def launch(q, k_cache, v_cache, seq_lens, o):
            run(q, k_cache, v_cache, None, seq_lens, o)
    return launch


def lesson_launches():
    import sys as _s
    _s.path.insert(0, str(ROOT / "dev" / "timing"))
    import flush_study

    ns = flush_study.load_notebook("04_attention/04_decoding", "speed_decode")
    return ns["launch_decode"], ns["launch_paged"]


def checks(launch, problem, extra) -> str:
    try:
        grader.check(launch, problem, quiet=True)
        grader.check(launch, problem, sizes=extra, quiet=True)
        grader.check(launch, problem, hidden=True, quiet=True)
        return "ok"
    except Exception as exc:
        return "FAIL: " + str(exc)[:600]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dry", action="store_true")
    args = ap.parse_args()
    mod = compile_module()
    for n, (c, pc) in VARIANTS.items():
        print(n, mod[f"decode_t<{c}<128>>"].launch_shape, "|", mod[f"decode_t<{pc}<128>>"].launch_shape, flush=True)
    if args.dry:
        return 0
    from grader import device

    print(device.info().name, time.strftime("%Y-%m-%d %H:%M"), "FLUSH" in dir(timing), flush=True)
    launches = {}
    ld, lp = lesson_launches()
    launches["lesson"] = (ld, lp)
    for n, (c, pc) in VARIANTS.items():
        launches[n] = (make_launch({d: mod[f"decode_t<{c}<{d}>>"] for d in (128, 64)}, False),
                       make_launch({d: mod[f"decode_t<{pc}<{d}>>"] for d in (128, 64)}, True))
    ok = {}
    for n, (dl, pl) in launches.items():
        if n == "lesson":
            ok[n] = ("ok", "ok")
            continue
        ok[n] = (checks(dl, P.decode, [P.Decode((5, 2000), 12, 3)]),
                 checks(pl, P.decode_paged, [P.Decode((5, 2000), 12, 3, page=32)]))
        print(f"{n:8s} checks: decode {ok[n][0]} | paged {ok[n][1]}", flush=True)
    flushes = ("write", "read", "write", "read") if hasattr(timing, "FLUSH") else ("write", "write")
    for fl in flushes:
        if hasattr(timing, "FLUSH"):
            timing.FLUSH = fl
        grader.peers._measured.clear()
        for n, (dl, pl) in launches.items():
            for key, launch, problem, good in (("decode", dl, P.decode, ok[n][0]), ("paged", pl, P.decode_paged, ok[n][1])):
                if good != "ok":
                    continue
                try:
                    m = speed.timed_checked(launch, problem, budget_s=1.5)
                    print(f"{fl:5s} {n:8s} {key:6s} {m.median_s * 1e6:7.1f} us {m.value:6.0f} GB/s = "
                          f"{100 * m.fraction:5.1f}% of {m.peer_name} ({m.peer_value:.0f}), {len(m.times_s)} runs", flush=True)
                except Exception as exc:
                    print(f"{fl:5s} {n:8s} {key:6s} FAILED {''.join(traceback.format_exception_only(type(exc), exc))[:400]}",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
