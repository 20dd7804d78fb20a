"""A contents manager that opens notebooks with the language_info their kernel will report.

When a kernel connects, JupyterLab writes the kernel's ``language_info`` into the notebook
and marks it unsaved if anything differs; ipykernel's includes the Python version, which a
committed lesson cannot know. Opening a notebook through this manager fills in exactly what
the kernel will say, so JupyterLab finds nothing to change and an untouched lesson stays
saved. Only notebooks for ``python3`` (this server's own ipykernel, the kernel every lesson
names) are touched, and only what is sent to the browser: the file changes when the learner
saves, as it would have anyway.
"""
from __future__ import annotations

import copy
import functools
import platform

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager


@functools.cache
def kernel_language_info() -> dict:
    """What this environment's ipykernel reports as language_info (for this Python)."""
    try:
        from ipykernel.ipkernel import IPythonKernel

        return dict(IPythonKernel.language_info)
    except Exception:   # no ipykernel here: the fields ipykernel 6-7 report
        return {"name": "python", "version": platform.python_version(), "mimetype": "text/x-python",
                "codemirror_mode": {"name": "ipython", "version": 3}, "pygments_lexer": "ipython3",
                "nbconvert_exporter": "python", "file_extension": ".py"}


def fill_language_info(nb) -> None:
    """Set ``nb``'s language_info to the kernel's, for a Python notebook run by ``python3``."""
    meta = nb.get("metadata", {})
    if meta.get("kernelspec", {}).get("name") == "python3" and meta.get("language_info", {}).get("name") == "python":
        meta["language_info"] = copy.deepcopy(kernel_language_info())


class CourseContentsManager(AsyncLargeFileManager):
    """jupyter_server's default contents manager, plus :func:`fill_language_info` on open."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if model.get("type") == "notebook" and model.get("content"):
            fill_language_info(model["content"])
        return model
