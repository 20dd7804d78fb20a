"""``python -m grader``: the command line (grader.cli)."""
import sys

from .cli import main

sys.exit(main())
