"""Run All on untouched lessons (the course/ releases, stubs not filled in), as a learner would, and check
that every graded cell gives a one-line verdict: no multi-line traceback, no NameError, no bare
NotImplementedError (issue 32). Works on a CPU (the simulator: compiled cells are graded on their SASS)
and on a GPU (then a stub kernel must be refused, never launched: grader.cuda.module.StubLaunch).

    python dev/untouched_run_all.py [--out DIR] [--chapters 01_elementwise,…] [LESSON ...]

LESSON: course/<chapter>/<name>.ipynb paths (default: every lesson of the chapters named, or of all). Prints each graded cell's
verdict (its error's first line, or its output's first line), then a table, and exits 1 if any cell of
any lesson failed the rule. With --out, writes each executed notebook there (outputs kept).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lessons(chapters: str | None) -> list[Path]:
    wanted = chapters.split(",") if chapters else None
    return [p for p in sorted((ROOT / "course").glob("*/*.ipynb")) if wanted is None or p.parent.name in wanted]


def verdicts(nb) -> list[tuple[str, bool, str, str]]:
    """(cell id, graded, 'ok'|'bad', first line) for every cell with an error, and every graded cell."""
    rows = []
    for c in nb.cells:
        graded = bool(c.get("metadata", {}).get("nbgrader", {}).get("grade"))
        errors = [o for o in c.get("outputs", []) if o.output_type == "error"]
        if errors:
            e = errors[0]
            bad = (len(e.traceback) > 1 or e.ename == "NameError"
                   or (e.ename == "NotImplementedError" and not e.evalue.strip()))
            rows.append((c.get("id"), graded, "bad" if bad else "ok", f"{e.ename}: {e.evalue.splitlines()[0] if e.evalue else ''}"))
        elif graded:
            text = "".join(o.get("text", "") for o in c.get("outputs", []) if o.output_type == "stream").strip()
            rows.append((c.get("id"), graded, "ok" if text else "bad", text.splitlines()[0] if text else "(no verdict)"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("lessons", nargs="*", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--chapters", default=None, help="comma-separated chapter folders (default: all)")
    args = ap.parse_args()
    import nbformat
    from nbclient import NotebookClient

    os.environ["PYTHONPATH"] = f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"     # this checkout's grader
    table, failed = [], False
    for path in (args.lessons or lessons(args.chapters)):
        path = path.resolve()
        nb = nbformat.read(path, as_version=4)
        start = time.monotonic()
        NotebookClient(nb, timeout=900, allow_errors=True, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        seconds = time.monotonic() - start
        rows = verdicts(nb)
        print(f"\n== {path.relative_to(ROOT)} ({seconds:.0f} s)")
        for cid, graded, ok, line in rows:
            print(f"  {'graded' if graded else 'cell  '} {cid:<26} {ok:<3} {line[:150]}")
        bad = [r for r in rows if r[2] == "bad"]
        failed |= bool(bad)
        table.append((path.name, sum(r[1] for r in rows), len(bad), seconds))
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, args.out / path.name)
    print(f"\n{'lesson':<26} {'graded':>6} {'bad':>4} {'seconds':>8}")
    for name, graded, bad, seconds in table:
        print(f"{name:<26} {graded:>6} {bad:>4} {seconds:>8.0f}")
    print("every graded cell gave a one-line verdict" if not failed else "FAILED: see the 'bad' rows above")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
