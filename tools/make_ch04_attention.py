"""Writes solutions/04_attention/*.ipynb (chapter 04, attention) from tools/ch04_attention/.

Run from the repo root, then release: ``python tools/make_ch04_attention.py && python -m grader release``.
Re-running it rewrites the five notebooks (without outputs) from their sources here.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.ch04_attention import l01_naive, l02_flash, l03_fa2, l04_decode, l05_mla  # noqa: E402
from tools.nbbuild import write_chapter  # noqa: E402

LESSONS = [l01_naive, l02_flash, l03_fa2, l04_decode, l05_mla]


def main() -> None:
    write_chapter(ROOT, "04_attention", LESSONS)


if __name__ == "__main__":
    main()
