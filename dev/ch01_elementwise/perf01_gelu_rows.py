"""bias+GELU word kernels with 4 or 8 rows per trip (consecutive or a grid apart), 512/1024 threads,
timed through grader.speed (the graded path) against the copy bandwidth of this run."""
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "gpu"))
import grader  # noqa: E402
from grader.problems import elementwise as P  # noqa: E402
import perf01_kernels as K  # noqa: E402

SPEED = sys.modules["grader.speed"]
captured = []
_orig = SPEED.bench
SPEED.bench = lambda *a, **k: captured.append(_orig(*a, **k)) or captured[-1]
sms = grader.device.info().sm_count or 4
_, copy_bw = (None, float("nan")) if grader.SIMULATOR else grader.device.peer("copy")
print(f"{grader.device.info().name}: copy bandwidth {copy_bw:,.0f} GB/s", flush=True)
sizes = [(333, 1000), (7, 4), (1, 4096), (2048, 4096), (37, 128)] if not grader.SIMULATOR else [(37, 128), (7, 4)]
for rows, chunked, threads in [(4, True, 1024), (4, False, 1024), (8, True, 1024), (8, False, 1024),
                               (8, True, 512), (8, False, 512), (8, True, 256)]:
    lk = K.make_gelu_rows(rows, chunked)
    launch = lambda x, b, y, _l=lk, _t=threads: _l(x, b, y, threads_max=_t, sms=sms)  # noqa: E731
    t0 = time.time()
    sz = [s for s in sizes if s[1] % 4 == 0]
    grader.check(launch, P.bias_gelu, sizes=sz, quiet=True)
    if grader.SIMULATOR:
        print("sim ok", rows, chunked, threads)
        continue
    pts = grader.speed(launch, P.bias_gelu, points=2, budget_s=1.5)
    m = captured[-1]
    print(f"  rows {rows} {'consecutive' if chunked else 'grid-apart '} {threads:4d} thr: {m.value:7,.0f} GB/s "
          f"{100 * m.value / copy_bw:5.1f}% of copy  spread {100 * m.spread:.1f}%  runs {len(m.times_s)}  "
          f"points {pts}  ({time.time() - t0:.1f}s)", flush=True)
