"""bias+GELU word kernels with 4 or 8 rows per trip (consecutive or a grid apart), 512/1024 threads,
timed through grader.speed (the graded path) against the copy bandwidth of this run.

    python dev/ch01_elementwise/perf01_gelu_rows.py        # on a GPU; without one: the checks, in the simulator

Each candidate (perf01_kernels.make_gelu_rows) is checked with grader.check, then graded with
grader.speed itself; its figure is the measurement grader.speed records (common.graded), shown as a
fraction of the copy ceiling measured once in this run (grader.peers.ceiling("copy")).
"""
import sys
import time

import common   # first: puts the repository on sys.path and imports grader

import grader
from grader.problems import elementwise as P

import perf01_kernels as K

CANDIDATES = [(4, True, 1024), (4, False, 1024), (8, True, 1024), (8, False, 1024),
              (8, True, 512), (8, False, 512), (8, True, 256)]


def main() -> int:
    sms = grader.device.info().sm_count or 4
    _, copy_bw = (None, float("nan")) if grader.SIMULATOR else grader.peers.ceiling("copy")
    print(f"{grader.device.info().name}: copy bandwidth {copy_bw:,.0f} GB/s", flush=True)
    sizes = [(333, 1000), (7, 4), (1, 4096), (2048, 4096), (37, 128)] if not grader.SIMULATOR else [(37, 128), (7, 4)]
    for rows, chunked, threads in CANDIDATES:
        lk = K.make_gelu_rows(rows, chunked)
        launch = lambda x, b, y, _l=lk, _t=threads: _l(x, b, y, threads_max=_t, sms=sms)  # noqa: E731
        t0 = time.time()
        sz = [s for s in sizes if s[1] % 4 == 0]
        grader.check(launch, P.bias_gelu, sizes=sz, quiet=True)
        if grader.SIMULATOR:
            print("sim ok", rows, chunked, threads)
            continue
        pts, m = common.graded(launch, P.bias_gelu, points=2, budget_s=1.5)
        print(f"  rows {rows} {'consecutive' if chunked else 'grid-apart '} {threads:4d} thr: {m['value']:7,.0f} GB/s "
              f"{100 * m['value'] / copy_bw:5.1f}% of copy  spread {100 * m['spread']:.1f}%  runs {m['runs']}  "
              f"points {pts}  ({time.time() - t0:.1f}s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
