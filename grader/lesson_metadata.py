"""The notebook metadata a lesson carries so that JupyterLab treats it well (issue 18).

Applied by the release (:class:`LessonMetadata`, an nbgrader preprocessor run by
``python -m grader release``) and to the sources by ``tools/lesson_metadata.py``, so
solutions/ and course/ say the same; ``tests/test_release.py`` checks both.

* **kernelspec and language_info as the kernel reports them.** When a kernel connects,
  JupyterLab writes the kernel's ``kernelspec`` and ``language_info`` into the notebook's
  metadata; a notebook whose metadata differs is marked unsaved at once, and closing an
  untouched lesson asks to save it. The lessons carry everything ipykernel reports except
  ``language_info.version`` (the learner's Python, which no committed file can know): the
  course's JupyterLab fills that in when it opens a notebook (:mod:`grader.lab`).
* **Run All keeps going.** JupyterLab's Run All sends every cell at once and the kernel
  drops the queued cells after the first error, so a learner who has not done an exercise
  never saw the rest of the lesson. A cell tagged ``raises-exception`` is sent with
  ``stop_on_error: false`` (JupyterLab 4, ``OutputArea.execute``): its error still shows
  in red and the cells after it still run. Every code cell from the lesson's first
  exercise on carries the tag: from there, a failing cell is a verdict on the learner's
  work (a check, a demo that calls the learner's launch function), not a broken set-up.
  Cells before it (the set-up ``import grader``) do stop Run All when they fail.
  nbgrader ignores the tag when grading (its executor allows errors in every cell), so
  points are computed as before.
"""
from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
# ipykernel's IPythonKernel.language_info, without "version"
LANGUAGE_INFO = {
    "name": "python",
    "mimetype": "text/x-python",
    "codemirror_mode": {"name": "ipython", "version": 3},
    "pygments_lexer": "ipython3",
    "nbconvert_exporter": "python",
    "file_extension": ".py",
}
KEEP_GOING = "raises-exception"


def _is_exercise(cell) -> bool:
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get("solution"))


def keep_going_cells(nb) -> list[int]:
    """Indices of the code cells that get the ``raises-exception`` tag."""
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code" and _is_exercise(c)), None)
    if first is None:
        return []
    return [i for i, c in enumerate(nb.cells) if i >= first and c.cell_type == "code"]


def normalize(nb) -> bool:
    """Give ``nb`` (an nbformat NotebookNode) the lesson metadata; True if anything changed."""
    changed = False
    if nb.metadata.get("kernelspec") != KERNELSPEC:
        nb.metadata["kernelspec"] = dict(KERNELSPEC)
        changed = True
    if nb.metadata.get("language_info") != LANGUAGE_INFO:
        nb.metadata["language_info"] = {k: (dict(v) if isinstance(v, dict) else v)
                                        for k, v in LANGUAGE_INFO.items()}
        changed = True
    wanted = set(keep_going_cells(nb))
    for i, cell in enumerate(nb.cells):
        tags = list(cell.metadata.get("tags", []))
        if i in wanted and KEEP_GOING not in tags:
            cell.metadata["tags"] = tags + [KEEP_GOING]
            changed = True
        elif i not in wanted and KEEP_GOING in tags:
            tags.remove(KEEP_GOING)
            if tags:
                cell.metadata["tags"] = tags
            else:
                del cell.metadata["tags"]
            changed = True
    return changed


class LessonMetadata(NbGraderPreprocessor):
    """The release step: every released lesson gets the metadata above."""

    def preprocess(self, nb, resources):
        normalize(nb)
        return nb, resources
