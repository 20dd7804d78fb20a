"""Broken and cheating submissions of lesson 01.01, each with the grades it must get.

One module per case. A case says how to make the submission from the solution notebook
(solutions/01_elementwise/01_threads_and_blocks.ipynb) and what the judge must give it:

    SOURCE = "..."          the new source of the learner's cell `v1_vector_add`, or
    def edit(nb): ...        change the notebook (nbformat node) in place, or
    RAW = "..."             the submitted file's bytes (not a notebook at all)
    def edit_json(d): ...   change the saved notebook's JSON in place (what nbformat would repair)
    FILES = {path: text}    files handed in beside the notebook (only the notebook is graded)
    EXPECT = {grade_id: (score, "substring of the reason"), ...}      in the simulator
    EXPECT_GPU = {...}      on a GPU (GRADER_TEST_GPU=1), where it differs; None: simulator only
    GPU_ONLY = True         run only on a GPU
    def after(result): ...  more assertions on the grade (e.g. nothing leaked into the log)
    STATUS = "caught" | "no effect" | "documented: …"   (README, "What the grader does not catch")

tests/test_corpus.py grades every case through the judge (each in its own sandbox) and compares
each graded cell's score and reason. A reason "" means: full points, nothing to explain.
"""
from __future__ import annotations

import importlib
import pkgutil

V, H, S = "test_vector_add_visible", "test_vector_add_hidden", "speed_vector_add"
NO_GPU = "not graded: no GPU"
WRONG = "values are wrong"

# the simplest correct kernel a learner writes; cases change pieces of it
KERNEL = '''
@cuda.jit
def vector_add(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


def launch_vector_add(a, b, c):
    threads = 256
    vector_add[(c.size + threads - 1) // threads, threads](a, b, c)
'''

WRONG_KERNEL = KERNEL.replace("a[i] + b[i]", "a[i] - b[i]")


def expect(visible, hidden, speed):
    """EXPECT for the three graded cells: each (score, reason substring)."""
    return {V: visible, H: hidden, S: speed}


def without_sweep(nb) -> None:
    """Drop lesson 01.01's ungraded block-size sweep from a notebook node (on a GPU it takes ~25 s and
    grades nothing): for GPU runs that grade the lesson many times."""
    nb.cells = [c for c in nb.cells if "grader.sweep_plot(" not in c.source]


def cases() -> dict:
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return {n: importlib.import_module(f"{__name__}.{n}") for n in names}
