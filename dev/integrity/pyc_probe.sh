# where the runner's imports go with and without bytecode (issue 36): run on the device from the repo root
source .carry/dev_env.sh >/dev/null 2>&1; export GRADER_BWRAP=$PWD/.carry/bwrap/bwrap
for m in numba numba_cuda matplotlib torch IPython; do
  d=$(python3 -c "import importlib.util as u,os;s=u.find_spec('$m');print(os.path.dirname(s.origin) if s else '')" 2>/dev/null)
  [ -n "$d" ] && echo "$m: $d py=$(find $d -name '*.py' | wc -l) pyc=$(find $d -name '*.pyc' | wc -l)"
done
echo "grader pyc: $(find grader -name '*.pyc' | wc -l)"
cat > /tmp/imp.py <<'PY'
import time, sys, subprocess
from pathlib import Path
sys.path.insert(0, ".")
from grader.judge.sandbox import choose, sandbox_env
from grader.judge.bounds import default_bounds
box = choose()
code = ("import time; t=time.perf_counter(); import grader.judge.runner, IPython, numba.cuda, matplotlib.pyplot as plt; t1=time.perf_counter();"
        "import IPython.core.interactiveshell as s; sh=s.InteractiveShell.instance(); t2=time.perf_counter();"
        "fig=plt.figure(); plt.title(r'$\\mu$s and GB/s'); fig.canvas.draw(); t3=time.perf_counter();"
        "import torch; t4=time.perf_counter(); print(f'imports {t1-t:.2f} shell {t2-t1:.2f} mathtext-plot {t3-t2:.2f} torch {t4-t3:.2f}')")
for i in range(2):
    t = time.perf_counter()
    r = subprocess.run(box.command([sys.executable, "-c", code], Path("/tmp"), sandbox_env(), default_bounds(120), gpu=True), capture_output=True, text=True)
    print(r.stdout.strip(), r.stderr.strip()[-300:], f"process {time.perf_counter()-t:.2f}")
PY
echo "== as carried"; python3 /tmp/imp.py
t=$(date +%s); python3 -m compileall -q -j 16 /tmp/site grader >/dev/null 2>&1; echo "compileall $(( $(date +%s) - t )) s"
echo "== with bytecode"; python3 /tmp/imp.py
echo "== two lessons through the judge, with bytecode"
python3 dev/integrity/runner_profile.py 03_gemm/02_register_tiling.ipynb 01_elementwise/02_bandwidth_and_roofline.ipynb 2>&1 | grep -v "^      \|^     [0-9]"
