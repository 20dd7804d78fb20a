"""`python -m grader.lab`: start the course's JupyterLab (grader/lab/__init__.py)."""
import sys

from . import main

sys.exit(main())
