"""Sources of chapter 05's lessons (Hopper and Blackwell): one module per notebook, plus the C++ cells as .cu files.

tools/make_ch05_hopper.py writes solutions/05_hopper_blackwell/*.ipynb from them; the notebooks are the
source of truth afterwards (tests and GPU scripts read the kernels from the notebooks' cells).
"""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def cell(name: str) -> str:
    """A %%cuda cell's source, kept as a .cu file beside this module (compile it on its own to try it)."""
    return (HERE / name).read_text()
