"""Run the warp kernels on a GPU and in the simulator, and compare the outputs.

    python dev/ch02_reduce/compare_warp_sim.py [--out DIR] [--cases a,b,...]

1. runs every case of warp_kernels.py (this folder) on the GPU in this process and
   saves the outputs to DIR/warp_gpu.npz;
2. runs the same cases under the simulator in a subprocess
   (NUMBA_ENABLE_CUDASIM=1), which saves DIR/warp_sim.npz;
3. prints a table ``kernel | output | equal? | detail`` and exits with 1 if
   any output differs or a case failed on either side.

Integer outputs must match exactly; float outputs of ``warp_softmax`` may
differ in the last bits (the simulator computes exp in float64), so they are
compared with a relative tolerance of 1e-5 and reported as "close".

``--gpu-npz FILE`` compares against saved GPU results instead of running the
GPU; ``--run gpu|sim --npz FILE`` only runs one side and saves it.
"""

import argparse
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np

# tiny launches on purpose: keep Numba's occupancy warning off stderr
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FLOAT_TOLERANT = {"warp_softmax"}


def _import_warp_kernels():
    sys.path[:0] = [str(ROOT), str(HERE)]
    import warp_kernels

    return warp_kernels


def run_side(side, npz_path, cases=None):
    """Run the cases on this process's target; save outputs and errors."""
    want_sim = side == "sim"
    if (os.environ.get("NUMBA_ENABLE_CUDASIM") == "1") != want_sim:
        raise SystemExit(
            f"--run {side} needs NUMBA_ENABLE_CUDASIM={'1' if want_sim else 'unset'}"
        )
    wk = _import_warp_kernels()
    arrays, errors = {}, {}
    for name in cases or list(wk.CASES):
        try:
            for key, value in wk.run_case(name).items():
                arrays[f"{name}/{key}"] = np.asarray(value)
        except Exception as exc:  # report every failing case, keep going
            errors[name] = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            if os.environ.get("WARP_COMPARE_TRACEBACK"):
                traceback.print_exc(file=sys.stdout)
    np.savez(npz_path, **arrays)
    Path(str(npz_path) + ".errors.json").write_text(json.dumps(errors))
    return arrays, errors


def load_side(npz_path):
    with np.load(npz_path) as data:
        arrays = {key: data[key] for key in data.files}
    errors_file = Path(str(npz_path) + ".errors.json")
    errors = json.loads(errors_file.read_text()) if errors_file.exists() else {}
    return arrays, errors


def run_sim_subprocess(npz_path, cases=None):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    command = [sys.executable, str(Path(__file__).resolve()), "--run", "sim", "--npz", str(npz_path)]
    if cases:
        command += ["--cases", ",".join(cases)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise SystemExit(f"simulator run failed:\n{done.stdout}\n{done.stderr}")
    return load_side(npz_path)


def compare_one(name, gpu, sim):
    """(verdict, detail) for one output array."""
    if gpu.shape != sim.shape or gpu.dtype != sim.dtype:
        return "DIFFERENT", f"gpu {gpu.dtype}{gpu.shape} vs sim {sim.dtype}{sim.shape}"
    if np.array_equal(gpu, sim, equal_nan=True):
        return "equal", ""
    case = name.split("/")[0]
    if case in FLOAT_TOLERANT and np.allclose(gpu, sim, rtol=1e-5, atol=1e-7):
        return "close", f"max abs diff {np.max(np.abs(gpu - sim)):.2e}"
    bad = np.argwhere(gpu != sim)
    first = tuple(int(v) for v in bad[0])
    return "DIFFERENT", (f"{len(bad)} elements differ, first at {first}: "
                         f"gpu {gpu[first]!r} sim {sim[first]!r}")


def compare(gpu_side, sim_side, cases):
    gpu_arrays, gpu_errors = gpu_side
    sim_arrays, sim_errors = sim_side
    rows, ok = [], True
    for case in cases:
        if case in gpu_errors or case in sim_errors:
            detail = "; ".join(f"{side} {errs[case]}" for side, errs in
                               (("gpu", gpu_errors), ("sim", sim_errors)) if case in errs)
            rows.append((case, "-", "ERROR", detail))
            ok = False
            continue
        keys = sorted(k for k in gpu_arrays if k.split("/")[0] == case)
        keys += sorted(k for k in sim_arrays if k.split("/")[0] == case and k not in gpu_arrays)
        for key in keys:
            if key not in gpu_arrays or key not in sim_arrays:
                verdict, detail = "DIFFERENT", "missing on one side"
            else:
                verdict, detail = compare_one(key, gpu_arrays[key], sim_arrays[key])
            ok &= verdict in ("equal", "close")
            rows.append((case, key.split("/", 1)[1], verdict, detail))
    return rows, ok


def print_table(rows):
    header = ("kernel", "output", "equal?", "detail")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(3)]
    line = " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " | detail"
    print(line)
    print("-" * len(line))
    for row in rows:
        print(" | ".join(str(c).ljust(w) for c, w in zip(row, widths)) + " | " + row[3])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="warp_compare_out", help="folder for the .npz files")
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--gpu-npz", help="use saved GPU results instead of running the GPU")
    parser.add_argument("--run", choices=("gpu", "sim"), help="only run one side")
    parser.add_argument("--npz", help="output file for --run")
    args = parser.parse_args(argv)
    cases = args.cases.split(",") if args.cases else None

    if args.run:
        run_side(args.run, args.npz, cases)
        return 0

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.gpu_npz:
        gpu_side = load_side(args.gpu_npz)
    else:
        gpu_side = run_side("gpu", out / "warp_gpu.npz", cases)
    sim_side = run_sim_subprocess(out / "warp_sim.npz", cases)
    if cases is None:
        cases = sorted({k.split("/")[0] for side in (gpu_side, sim_side) for k in side[0]}
                       | set(gpu_side[1]) | set(sim_side[1]))
    rows, ok = compare(gpu_side, sim_side, cases)
    print_table(rows)
    print("\nall equal" if ok else "\nSOME OUTPUTS DIFFER OR FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
