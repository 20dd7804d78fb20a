"""Writes solutions/05_hopper_blackwell/*.ipynb (chapter 05, Hopper and Blackwell) from tools/ch05_hopper/.

Run from the repo root, then release: ``python tools/make_ch05_hopper.py && python -m grader release``.
Re-running it rewrites its notebooks (without outputs) from their sources here.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.ch05_hopper import l01_tma, l02_wgmma, l03_pipelines, l04_fp8, l04_schedules, l05_flash3, l05_flash3_fp8, l06_blackwell  # noqa: E402
from tools.nbbuild import write_chapter  # noqa: E402

LESSONS = [l01_tma, l02_wgmma, l03_pipelines, l04_schedules, l04_fp8, l05_flash3, l05_flash3_fp8, l06_blackwell]


def main() -> None:
    write_chapter(ROOT, "05_hopper_blackwell", LESSONS)


if __name__ == "__main__":
    main()
