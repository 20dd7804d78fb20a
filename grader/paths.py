"""Where the course's folders are: the checkout (solutions/, course/, results/) and its chapters."""
from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHAPTERS = ["01_elementwise", "02_reduce", "03_gemm", "04_attention", "05_hopper_blackwell"]


def repo_root() -> Path:
    """The course checkout: the folder holding solutions/ (the package's parent, else the cwd)."""
    for cand in (PACKAGE.parent, Path.cwd()):
        if (cand / "solutions").is_dir():
            return cand
    raise FileNotFoundError("cannot find the course's solutions/ folder: run from the course checkout")


def results_dir(root: Path | None = None) -> Path:
    """results/ of the checkout (beside the package: it is there in a sandbox too, read-only)."""
    return (root or PACKAGE.parent) / "results"


def chapters_in(root: Path) -> list[str]:
    """The chapters of CHAPTERS that have solution notebooks."""
    return [c for c in CHAPTERS if any((root / "solutions" / c).glob("*.ipynb"))]
