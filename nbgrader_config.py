"""nbgrader configuration for the course (the repo root is nbgrader's course directory).

solutions/<chapter>/<lesson>.ipynb is the source; `python -m grader release`
writes course/<chapter>/ from it. Gradebook and submissions live under
.nbgrader/ (git-ignored).
"""
import os

c = get_config()  # noqa: F821  (provided by nbgrader)

here = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.root = here
c.CourseDirectory.course_id = "gpu-kernels"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "course"
c.CourseDirectory.submitted_directory = os.path.join(".nbgrader", "submitted")
c.CourseDirectory.autograded_directory = os.path.join(".nbgrader", "autograded")
c.CourseDirectory.feedback_directory = os.path.join(".nbgrader", "feedback")
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(here, ".nbgrader", "gradebook.db")

# The course's release/grading settings (C++ stubs, timeouts) live in one place:
from grader.nbgrader_settings import apply  # noqa: E402

apply(c)
