"""Lesson 05.05's FP8 part, session 3's variants (issue 17: FP8 >= 1.3x the bf16 kernel), each checked,
then timed beside 05.05's bf16 kernel and cuDNN's SDPA bf16 in one process (H100, B 4, H 32, S 4096, d 128).

    python dev/ch05_hopper/fp8attn_v3.py check      # every variant at a dozen sizes, the candidates at all
    python dev/ch05_hopper/fp8attn_v3.py time       # non-causal and causal, each variant beside the peers

The variants: the lesson's cell with two more switches, PERM and ONES (fp8attn_variants/perm_ones.patch).
PERM: Vt with the keys of each group of 16 permuted: key sigma(i) at column i, sigma(4q + j) = 8(j >> 1) + 2q +
(j & 1) -- the order in which the QK accumulator holds a quad's P -- and zeros in the padding. Since these runs
that is the problem's own contract (KEY_ORDER); the PERM 0 variants (P moved by quad shuffles) get Vt in the
natural order through PLAIN_PROBLEMS, whose reference permutes it back for the problem's. Either way the
kernel is checked against attention of the true values, and the peers get the natural V.
Runs 1-2 (results/ch05/fp8attn_v3_h100_2026-11-25_run*.log) predate that switch: they ran with the
preparation storing natural order and this script permuting (the same inputs, the same checks).
"""
from __future__ import annotations

import os
import secrets
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "dev" / "ch05_hopper"))
os.environ.setdefault("GRADER_TEST_GPU", "1")

import numpy as np  # noqa: E402

from fp8attn_gpu import _shared_cases, bf16_launch  # noqa: E402
from grader.check import CheckFailed, check  # noqa: E402
from grader.peers import Peer  # noqa: E402
from grader.problems import flash3_fp8 as P  # noqa: E402
from grader.problems.attention import Attn  # noqa: E402
from tests.cells import compile_cell  # noqa: E402

CELL = ROOT / "dev" / "ch05_hopper" / "fp8attn_variants" / "cell_v4.cu"   # the cell these variants were made against (main 22079cf)
PATCH = ROOT / "dev" / "ch05_hopper" / "fp8attn_variants" / "perm_ones.patch"
# label -> (kernel of the patched cell: F8<PINGPONG, LAZY, TREE, STAGES, POLY, BN, PERM, ONES>, Vt permuted?).
# Runs 1-2 built them from a whole copy of the cell with the switches in another order (F8<…, POLY, PERM, BN,
# ONES>); the patched cell's kernels are the same machine code, instruction for instruction (NVRTC 13.0 and 13.5).
VARIANTS = {
    "reference F8<0,0,1>": ("flash3_fp8<F8<0, 0, 1, 0, 0, 128, 0>>", False),
    "lazy F8<0,1,1>": ("flash3_fp8<F8<0, 1, 1, 0, 0, 128, 0>>", False),
    "perm": ("flash3_fp8<F8<0, 0, 1, 0, 0, 128>>", True),
    "perm lazy": ("flash3_fp8<F8<0, 1, 1, 0, 0, 128>>", True),
    "BN192 ring 4": ("flash3_fp8<F8<0, 0, 1, 0, 0, 192, 0>>", False),
    "perm BN192 ring 4": ("flash3_fp8<F8<0, 0, 1>>", True),
    "perm lazy BN192 ring 4": ("flash3_fp8<F8<0, 1, 1>>", True),
    "perm lazy BN192 ring 3": ("flash3_fp8<F8<0, 1, 1, 3>>", True),
    "lazy BN192 ring 4 ones": ("flash3_fp8<F8<0, 1, 1, 0, 0, 192, 0, 1>>", False),
    "perm lazy ones": ("flash3_fp8<F8<0, 1, 1, 0, 0, 128, 1, 1>>", True),
    "perm BN192 ring 4 ones": ("flash3_fp8<F8<0, 0, 1, 0, 0, 192, 1, 1>>", True),
    "perm lazy BN192 ring 4 ones": ("flash3_fp8<F8<0, 1, 1, 0, 0, 192, 1, 1>>", True),
    "perm lazy BN192 ring 3 ones": ("flash3_fp8<F8<0, 1, 1, 3, 0, 192, 1, 1>>", True),
}
FULL = {"perm lazy BN192 ring 4 ones", "lazy BN192 ring 4 ones"}
AGAIN = ("reference", "perm lazy BN192 ring 4", "lazy BN192 ring 4 ones")


# The problem's contract now stores Vt in KEY_ORDER (these runs made the variants that led to it). The
# shuffle variants (PERM 0) take Vt in the natural key order: their problem un-permutes the inputs.
def _plain_inputs(rng, s):
    inp = P.fp8_inputs(rng, s)
    inp["vt"] = np.ascontiguousarray(P.unpermute(inp["vt"]))
    return inp


def _plain_reference(q, k, vt, qd, kd, vd, causal):
    return P._reference(q, k, np.ascontiguousarray(vt[..., P.key_columns(vt.shape[-1])]), qd, kd, vd, causal)


PLAIN_PROBLEMS = {c: (P.flash3_fp8_causal if c else P.flash3_fp8).variant(
    name=f"FA3-style attention fp8 natural Vt{' causal' if c else ''}", make_inputs=_plain_inputs, reference=_plain_reference)
    for c in (False, True)}
PERM_PROBLEMS = {False: P.flash3_fp8, True: P.flash3_fp8_causal}
for _p in PLAIN_PROBLEMS.values():            # defined here, not by a notebook: the checks' integrity test trusts them
    __import__("grader.integrity", fromlist=["trust"]).trust(_p)


def _for_peer(t: dict, perm: bool) -> dict:
    """The peers (P.cudnn_bf16, P.fa3_bf16) un-permute Vt themselves: natural inputs go to them permuted."""
    if perm:
        return t
    import torch

    cols = torch.from_numpy(P.key_columns(t["vt"].shape[-1])).to(t["vt"].device)
    return {**t, "vt": t["vt"].index_select(3, cols).contiguous()}


def peers(b16, causal: bool, perm: bool):
    cud, fa3 = P.cudnn_bf16(causal), P.fa3_bf16(b16, causal)

    class Ctx:
        def __init__(self, ctx):
            self._c = ctx

        def tensors(self):
            return _for_peer(self._c.tensors(), perm)
    return (Peer(cud.label, lambda ctx: cud.prepare(Ctx(ctx))), Peer(fa3.label, lambda ctx: fa3.prepare(Ctx(ctx))))


def launcher(kernel, perm: bool):
    """flash3_fp8_launch with Vt's map as the variant needs: boxes of 64 keys (64-byte swizzle) for BN > 128;
    with PERM the map runs to Sk_pad (the permuted padding holds zeros and is read)."""
    from grader.cuda.module import _torch_stream_handle
    from grader.cuda.tma import TensorMap, _encode_tiled, tiled_rows_3d
    from grader.problems.attention_launch import sm_count
    import math

    shape = kernel.launch_shape
    vbox, swz = (shape.tile_n, "128B") if shape.tile_n <= 128 else (64, "64B")
    maps = {}

    def launch(q, k, vt, qd, kd, vd, causal, o):
        B, H, Sq, d = q.shape
        Hkv, Sk = k.shape[1], k.shape[2]
        assert tuple(vt.shape) == (B, Hkv, d, -(-Sk // 16) * 16)
        if B * H * Sq == 0:
            return
        key = (q.data_ptr(), k.data_ptr(), vt.data_ptr(), tuple(q.shape), tuple(k.shape))
        if key not in maps:
            maps.clear()
            qm = tiled_rows_3d(q, (shape.tile_m, d), "128B")
            if Sk:
                km = tiled_rows_3d(k, (shape.tile_n, d), "128B")
                pitch = vt.shape[3]
                ext = pitch if perm else Sk
                raw = _encode_tiled(np.dtype(np.uint8), int(vt.data_ptr()), sizes=[ext, d, B * Hkv],
                                    strides=[pitch, d * pitch], box=[vbox, d, 1], swizzle=swz, what="Vt")
                vm = TensorMap(raw, shape=(B * Hkv * d, ext), box=(d, vbox), dtype=np.uint8, swizzle=swz)
            else:
                km = vm = qm
            maps[key] = (qm, km, vm)
        qm, km, vm = maps[key]
        units = -(-Sq // shape.tile_m) * H * B
        heads = max(1, min(B * H, (16 << 20) // max(1, 2 * Sk * d))) if causal else 1
        grid = (min(units, sm_count(q.device.index or 0)),)
        kernel.launch(grid, qm, km, vm, qd, kd, vd, o, np.int32(Sq), np.int32(Sk), np.int32(B), np.int32(H),
                      np.int32(Hkv), np.int32(heads), np.float32(P.LOG2E / math.sqrt(d)), np.int32(bool(causal)),
                      stream=_torch_stream_handle(q))
    return launch


def module():
    from variant_patch import variant_source

    src = variant_source(PATCH, CELL)
    first, _, body = src.partition("\n")
    import re
    first = re.sub(r' -k "[^"]*"', "", first) + "".join(f' -k "{k}"' for k, _ in dict.fromkeys(VARIANTS.values()))
    m = compile_cell(first + "\n" + body, "v3")
    for k, _ in VARIANTS.values():
        r = m.resources.get(k) if hasattr(m, "resources") else None
        print(f"RES {k}: {r}")
    return m


def do_check(only=None):
    m = module()
    few = [Attn(1, 2, 2000, 128, kind="growing"), Attn(1, 3, 2500, 128, causal=True, kind="growing"),
           Attn(1, 2, 1000, 128, kind="peaked"), Attn(1, 2, 1000, 128, Sk=65), Attn(1, 2, 65, 128, Sk=1001),
           Attn(1, 1, 4096, 128, causal=True, kind="outlier"), Attn(1, 8, 200, 128, Sk=333, Hkv=2),
           Attn(2, 3, 1031, 128, causal=True, kind="peaked"), Attn(1, 1, 7, 128, Sk=0)]
    for label, (kern, perm) in VARIANTS.items():
        launch = launcher(m[kern], perm)
        sizes = list(P.FP8_GPU) + list(P.FP8_HIDDEN) if label in FULL else few
        bad = 0
        for s in sizes:
            prob = PERM_PROBLEMS[False] if perm else PLAIN_PROBLEMS[False]
            for seed in (1234, secrets.randbits(31), secrets.randbits(31)) if label in FULL else (1234,):
                try:
                    check(launch, prob, sizes=[s], seed=seed, quiet=True)
                except CheckFailed as e:
                    bad += 1
                    print(f"  {label}: {s.describe()} seed {seed}: FAILED: {str(e)[:400]}", flush=True)
        print(f"CHECK {label}: {'passed' if not bad else f'{bad} FAILED'} at {len(sizes)} sizes ({'3 seeds, 2 fresh' if label in FULL else 'seed 1234'})", flush=True)


def do_time():
    from grader.speed import measure

    _shared_cases()
    m = module()
    b16 = bf16_launch()
    for causal in (False, True):
        for perm in (False, True):
            prob = PERM_PROBLEMS[causal] if perm else PLAIN_PROBLEMS[causal]
            cud, fa3 = peers(b16, causal, perm)
            t0 = time.time()
            r = measure(launcher(m[VARIANTS["reference F8<0,0,1>"][0]], False) if not perm else
                        launcher(m[VARIANTS["perm"][0]], True), prob, "first", peer=cud, budget_s=1.0)
            print(f"TIME {prob.bench_size.describe()} {'perm' if perm else 'plain'} inputs: cuDNN SDPA bf16 "
                  f"{r.peer_value:.1f} TFLOP/s [{time.time() - t0:.1f} s]", flush=True)
            for label, (kern, p) in VARIANTS.items():
                if p != perm:
                    continue
                for rep in (1, 2) if label.startswith(AGAIN) else (1,):
                    r = measure(launcher(m[kern], p), prob, label, peer=fa3, budget_s=0.8)
                    print(f"TIME {prob.bench_size.describe()} {label}{' (again)' if rep == 2 else ''}: {r.value:.1f} TFLOP/s"
                          f" = {r.fraction:.3f}x {r.peer_name} ({r.peer_value:.1f})", flush=True)


if __name__ == "__main__":
    try:
        {"check": do_check, "time": do_time}[sys.argv[1]]()
    except Exception:
        traceback.print_exc()
    sys.stdout.flush()
