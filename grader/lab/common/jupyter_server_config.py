"""Jupyter server settings of the course's JupyterLab, for learners and instructors alike (grader/lab/__init__.py)."""
c = get_config()  # noqa: F821  (provided by traitlets)

# Lessons open with the language_info this server's Python kernel reports, so an untouched
# lesson is not marked unsaved the moment its kernel connects.
c.ServerApp.contents_manager_class = "grader.lab.contents.CourseContentsManager"

# %%cuda cells highlighted as C++: a prebuilt extension that ships with the package.
from grader.lab import LABEXTENSIONS  # noqa: E402

c.LabApp.extra_labextensions_path = [str(LABEXTENSIONS)]
