"""python -m grader doctor | grade NOTEBOOK | release | scoreboard"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m grader", description="The GPU-kernel course's grader.")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("doctor", help="what this machine has for the course, with fixes")
    g = sub.add_parser("grade", help="grade your notebook as the autograder would")
    g.add_argument("notebook", type=Path, nargs="+")
    r = sub.add_parser("release", help="regenerate course/ from solutions/ (instructors)")
    r.add_argument("chapters", nargs="*", help="chapter folders (default: all)")
    s = sub.add_parser("scoreboard", help="on a GPU: time every reference solution against its peer")
    s.add_argument("chapters", nargs="*")
    s.add_argument("--out", type=Path, default=None, help="results folder (default: results/)")
    args = p.parse_args(argv)

    if args.cmd == "doctor":
        from .doctor import report

        text, ok = report()
        print(text)
        return 0 if ok else 1
    if args.cmd == "release":
        from .autograde import release

        for path in release(chapters=args.chapters or None):
            print(f"released {path}")
        return 0
    if args.cmd == "grade":
        from .autograde import format_table, grade_notebook

        for nb in args.notebook:
            if not nb.exists():
                print(f"{nb}: no such file")
                return 2
            print(f"== {nb}")
            print(format_table(grade_notebook(nb)))
        return 0
    if args.cmd == "scoreboard":
        from .scoreboard import run

        run(chapters=args.chapters or None, out_dir=args.out)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
