"""Lesson 05.05 on a Hopper GPU: versions of the FA3-style kernel side by side, and what ncu profiles.

    python dev/ch05_hopper/flash3_explore.py variant LABEL CELL [STAGES]
        one version (a %%cuda cell file; STAGES: its d-128 kernel is flash3<F3<128, 1, 1, 1, STAGES>>): checked at a
        dozen sizes (ragged S, d 64, causal, GQA, growing maxima) with grader.check, then timed with
        grader.measure at d 128 and 64, S 4096, causal and not, beside cuDNN's SDPA (and flash's with
        FLASH=1) on the same q, k, v in the same process
    python dev/ch05_hopper/flash3_explore.py ncu CELL...
        the program ncu profiles: each cell's d-128 kernel once without a mask and once causal, then
        cuDNN's SDPA likewise (B 4, H 32, S 4096, d 128)

flash3_explore.sh runs each version in a process of its own with a timeout, then ncu.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import grader  # noqa: E402
from grader import peers  # noqa: E402
from grader.problems import flash3 as P  # noqa: E402
from grader.problems.attention import Attn  # noqa: E402

sys.path.insert(0, str(ROOT / "dev" / "ch05_hopper"))
from flash3_gpu import SMOKE, module  # noqa: E402

D64 = "flash3<F3<64, 1, 1, 1>>"
SIZES = SMOKE + [Attn(1, 2, 1000, 128, Sk=65), Attn(1, 4, 1500, 128, Hkv=1, kind="growing"),
                 Attn(1, 3, 2500, 64, causal=True, kind="growing"), Attn(1, 2, 3001, 128, causal=True, kind="large"),
                 Attn(2, 1, 129, 128, Sk=4097)]


def variant(label: str, cell: str, stages: str = "") -> None:
    k128 = f"flash3<F3<128, 1, 1, 1, {stages}>>" if stages else "flash3<F3<128, 1, 1, 1>>"
    mod = module([k128, D64], "v", Path(cell).read_text())
    launch = P.flash3_launch(mod[k128], mod[D64])
    try:
        grader.check(launch, P.flash3, sizes=SIZES, quiet=True)
        print(f"VARIANT {label}: right at {len(SIZES)} sizes", flush=True)
    except Exception as e:
        print(f"VARIANT {label}: WRONG: {str(e).splitlines()[0][:300]}", flush=True)
        return
    for d in (128, 64):
        for causal in (False, True):
            size = Attn(4, 32, 4096, d, causal=causal)
            for backend in ("cudnn", "flash") if os.environ.get("FLASH") else ("cudnn",):
                m = grader.measure(launch, P.flash3, f"{label} d{d}", size=size, peer=peers.sdpa(backend, causal=causal))
                print(f"TIME {size.describe()}: {m}", flush=True)


def ncu_target(cells: list[str]) -> None:
    import torch

    B, H, S, d = 4, 32, 4096, 128
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, S, d, device="cuda", generator=g).to(torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    launches = []
    for i, cell in enumerate(cells):
        mod = module(["flash3<F3<128, 1, 1, 1>>"], f"n{i}", Path(cell).read_text())
        launches.append(P.flash3_launch(mod["flash3<F3<128, 1, 1, 1>>"]))
    bits = [t.view(torch.int16) for t in (q, k, v, o)]
    for launch in launches:
        for causal in (False, True):
            launch(bits[0], bits[1], bits[2], causal, bits[3])
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        for causal in (False, True):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.cuda.synchronize()
    print("NCU target done", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "variant":
        variant(*sys.argv[2:])
        os._exit(0)                 # a kernel may still spin: leave without waiting for it
    elif sys.argv[1] == "ncu":
        ncu_target(sys.argv[2:])
