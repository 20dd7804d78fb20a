"""The class behind docs/class_report_example/: five submissions of lesson 01.01 in a scratch course.

    python dev/report/example_class.py COURSE_DIR

makes an nbgrader course at COURSE_DIR whose assignment ``01_elementwise`` is lesson 01.01 alone
(``course/01_elementwise/01_threads_and_blocks.ipynb``, released from its solution), and collects
five submissions into ``submitted/``, each the solution notebook with its answer cell
(``v1_vector_add``, the vector-add kernel) replaced:

    ada-correct      one thread per element, 256 threads a block
    grace-correct    the index written out (blockIdx * blockDim + threadIdx), 512 threads a block
    alan-slow        a grid-stride loop whose grid is capped at 264 blocks of 256 threads: correct,
                     but on the 2**27-element timed run each thread walks ~500 elements, too few
                     loads in flight to keep the memory busy (at the simulator's sizes the cap never
                     binds, so there it costs what ada's does)
    ken-wrong        off by one: ``if i < c.size - 1`` leaves the last element unwritten
    barbara-broken   the answer cell ends its own process (``os._exit``): the runner is gone

dev/report/example.sh grades them (``python -m grader autograde``) and writes the report.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from grader.autograde import make_scratch_course  # noqa: E402

CH, LESSON, CELL = "01_elementwise", "01_threads_and_blocks.ipynb", "v1_vector_add"

STUDENTS = {
    "ada-correct": '''
@cuda.jit
def vector_add(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


def launch_vector_add(a, b, c):
    threads = 256
    vector_add[(c.size + threads - 1) // threads, threads](a, b, c)
''',
    "grace-correct": '''
@cuda.jit
def vector_add(a, b, c):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < c.size:
        c[i] = a[i] + b[i]


def launch_vector_add(a, b, c):
    threads = 512
    blocks = (c.size + threads - 1) // threads
    vector_add[blocks, threads](a, b, c)
''',
    "alan-slow": '''
@cuda.jit
def vector_add(a, b, c):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, c.size, stride):     # a grid-stride loop: any grid covers the array
        c[i] = a[i] + b[i]


def launch_vector_add(a, b, c):
    threads = 256
    blocks = min(264, (c.size + threads - 1) // threads)   # "two blocks per SM is plenty"
    vector_add[blocks, threads](a, b, c)
''',
    "ken-wrong": '''
@cuda.jit
def vector_add(a, b, c):
    i = cuda.grid(1)
    if i < c.size - 1:                         # off by one: the last element is never written
        c[i] = a[i] + b[i]


def launch_vector_add(a, b, c):
    threads = 256
    vector_add[(c.size + threads - 1) // threads, threads](a, b, c)
''',
    "barbara-broken": '''
import os

@cuda.jit
def vector_add(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


def launch_vector_add(a, b, c):
    threads = 256
    vector_add[(c.size + threads - 1) // threads, threads](a, b, c)


os._exit(1)                                    # left over from debugging: ends the process
''',
}


def build(course: Path) -> Path:
    """The scratch course with lesson 01.01 released and the five submissions collected."""
    make_scratch_course(CH, course, lessons=[LESSON])
    for student, source in STUDENTS.items():
        nb = nbformat.read(ROOT / "solutions" / CH / LESSON, as_version=4)
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == CELL)
        cell.source = source.strip() + "\n"
        folder = course / "submitted" / student / CH
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / LESSON)
    return course


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(f"course with {len(STUDENTS)} submissions of {CH}/{LESSON}: {build(Path(sys.argv[1]).resolve())}")
