"""The course in JupyterLab: one command per role, each with its own Jupyter config.

    python -m grader.lab learner course/      # ./course.sh (or ./course.sh lab)
    python -m grader.lab instructor .         # ./course.sh instructor

Nothing in site-packages is edited: the role's config folders are put first on
``JUPYTER_CONFIG_PATH`` for that one server.

* ``common/`` (both roles): the contents manager that fills in the kernel's
  ``language_info`` when a notebook opens (:mod:`grader.lab.contents`), the prebuilt
  extension that highlights ``%%cuda`` cells as C++ (``labextensions/``), and no
  "Would you like to get notified about official Jupyter news?" pop-up (the
  ``@jupyterlab/apputils-extension:announcements`` plugin is disabled).
* ``learner/``: nbgrader's instructor tools are off: its JupyterLab extension (the
  Nbgrader menu, Create Assignment, Validate, formgrader's pages) and its server
  extensions.
* The instructor keeps nbgrader's tools, and opens the repository root (the nbgrader
  course directory) so formgrader finds ``solutions/`` and the gradebook.

As root (Docker, cloud VMs, hosted notebooks) Jupyter refuses to start unless given
``--allow-root``: :func:`main` adds it there, and prints one line saying so.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LABEXTENSIONS = HERE / "labextensions"
ROLES = {
    "learner": [HERE / "learner", HERE / "common"],
    "instructor": [HERE / "common"],
}


def environ(role: str, base: dict | None = None) -> dict:
    """The environment for ``role``'s JupyterLab: its config folders first on JUPYTER_CONFIG_PATH."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {sorted(ROLES)}, not {role!r}")
    env = dict(os.environ if base is None else base)
    dirs = [str(d) for d in ROLES[role]] + [p for p in env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(dirs)
    return env


def as_root() -> bool:
    """Running as root, where Jupyter refuses to start without ``--allow-root``."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def command(args: list[str]) -> list[str]:
    """``jupyter lab`` with ``args``, run by this Python (the course's environment)."""
    return [sys.executable, "-m", "jupyterlab", *args]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ROLES:
        print(f"usage: python -m grader.lab {{{'|'.join(ROLES)}}} [FOLDER] [jupyter lab options]")
        return 2
    role, rest = argv[0], argv[1:]
    if as_root() and "--allow-root" not in rest:
        print("grader.lab: running as root (a container, a cloud VM?): starting Jupyter with --allow-root, "
              "which it requires then", flush=True)
        rest.append("--allow-root")
    cmd = command(rest)
    os.execvpe(cmd[0], cmd, environ(role))


if __name__ == "__main__":
    sys.exit(main())
