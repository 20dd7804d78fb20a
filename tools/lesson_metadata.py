"""Give every solutions/ notebook the lesson metadata (grader/lesson_metadata.py), then release.

    .venv/bin/python tools/lesson_metadata.py            # rewrite solutions/, regenerate course/
    .venv/bin/python tools/lesson_metadata.py --check    # exit 1 if a source needs it (no writes)

Idempotent: a notebook that already has it is not rewritten. Run it again after merging edits
to the lessons (a regenerated notebook may come back without the metadata);
tests/test_release.py fails until it has been run.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.lesson_metadata import normalize  # noqa: E402


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if normalize(nb):
            stale.append(path)
            if not check:
                nbformat.write(nb, path)
                print(f"updated {path.relative_to(ROOT)}")
    if check:
        for path in stale:
            print(f"needs tools/lesson_metadata.py: {path.relative_to(ROOT)}")
        return 1 if stale else 0
    from grader.autograde import release

    for path in release(root=ROOT):
        print(f"released {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
