"""A smoke test, then a sweep of the TMA transpose's strip length and ring depth (05.01), on a GPU.

The lesson's cell (solutions/05_hopper_blackwell/01_tma.ipynb, v_tma) is compiled with more
``tma_transpose<Tp<TILES, STAGES>>`` instantiations; the lesson's own one is checked on a few sizes
first (its traceback printed if it fails), then each is timed as the grader times it at the
problem's timed size, beside the copy peer measured in the same run.

    python dev/ch05_hopper/tma_sweep.py
"""
from __future__ import annotations

import re
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import grader  # noqa: E402
from grader.notebooks import cell_source, run_source  # noqa: E402
from grader.problems import hopper as P  # noqa: E402

NB = ROOT / "solutions" / "05_hopper_blackwell" / "01_tma.ipynb"
CONFIGS = [(8, 2), (4, 2), (8, 3), (16, 2), (16, 3), (32, 4), (1, 1), (2, 1), (2, 2), (4, 1), (4, 3), (4, 4), (8, 4)]


def main() -> None:
    src = cell_source(NB, "v_tma")
    kernels = " ".join(f'-k "tma_transpose<Tp<{t}, {s}>>"' for t, s in CONFIGS)
    src = re.sub(r"^%%cuda \w+[^\n]*", f"%%cuda sweep {kernels}", src)
    ns: dict = {}
    run_source(src, "sweep", ns)
    mod = ns["sweep"]
    lesson = P.tma_transpose_launch(mod["tma_transpose<Tp<8, 2>>"])
    try:
        grader.check(lesson, P.tma_transpose, sizes=[(4, 4), (64, 64), (1020, 516)], quiet=True)
        print("smoke: the lesson's kernel is right on (4, 4), (64, 64), (1020, 516)")
    except Exception:
        traceback.print_exc()
        return
    for t, s in CONFIGS:
        name = f"tma_transpose<Tp<{t}, {s}>>"
        try:
            print(grader.measure(P.tma_transpose_launch(mod[name]), P.tma_transpose, name), flush=True)
        except Exception as e:
            print(name, "failed:", e)


if __name__ == "__main__":
    main()
