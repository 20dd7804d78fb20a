"""The program Nsight Compute profiles for lesson 05.08 (FP8 attention): the FP8 kernel and 05.07's bf16
kernel once each, non-causal, at the benchmark size (B 4, H 32, S 4096, d 128), on the same values (the
bf16 kernel gets the FP8 inputs decoded, as the fa3_bf16 peer does).

    python dev/ch05_hopper/fp8attn_ncu.py

fp8attn_ncu.sh runs it under ncu (--set full, source counters) and exports what it needs as text.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "dev" / "ch05_hopper"))
os.environ.setdefault("GRADER_TEST_GPU", "1")

import numpy as np  # noqa: E402

from fp8attn_gpu import REF, bf16_launch, source  # noqa: E402
from grader.problems import flash3_fp8 as P  # noqa: E402
from tests.cells import compile_cell  # noqa: E402


def main() -> None:
    import torch

    m = compile_cell(source(), "f8n", only=REF)
    fp8 = P.flash3_fp8_launch(m[REF])
    b16 = bf16_launch()
    inp = P.flash3_fp8.make_inputs(np.random.default_rng(5), P.FP8_BENCH)
    causal = inp.pop("causal")
    t = {n: torch.from_numpy(x).cuda() for n, x in inp.items()}
    q, k, v = (x.view(torch.int16) for x in P.bf16_tensors(t))
    o = torch.empty_like(q)
    fp8(t["q"], t["k"], t["vt"], t["qd"], t["kd"], t["vd"], causal, o)      # the first launch ncu takes
    b16(q, k, v, causal, o)                                                # the second
    torch.cuda.synchronize()
    print("NCU target done", flush=True)


if __name__ == "__main__":
    main()
