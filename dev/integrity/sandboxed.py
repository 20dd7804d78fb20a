"""Run a dev/ script inside the sandbox the judge starts runners in (bubblewrap, the GPU passed
through): the script, this module and the files it reads are handed in read-only at /judge under
their repository paths, as the judge hands in a plan. launch_overhead.py and first_touch.py use it
for ``--in-sandbox``."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(script: str, files: tuple = (), env: dict | None = None, limit_s: float = 600) -> int:
    """Run ``script`` (a file's path) in the sandbox with ``files`` beside it and ``env`` added to the
    sandbox's environment; its exit status."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from grader.judge.bounds import default_bounds
    from grader.judge.sandbox import INPUTS, choose, host_folder, remove_host_folder, sandbox_env, write_input

    script = Path(script).resolve()
    box = choose()
    inputs = host_folder(f"{script.stem}-")
    try:
        for path in (script, Path(__file__).resolve(), *(Path(f).resolve() for f in files)):
            write_input(inputs, str(path.relative_to(ROOT)), path.read_bytes())
        argv = [sys.executable, f"{INPUTS}/{script.relative_to(ROOT)}"]
        cmd = box.command(argv, inputs, sandbox_env(env), default_bounds(limit_s, "this script's limit"), gpu=True)
        print(f"in the sandbox ({box.name}):", flush=True)
        return subprocess.run(cmd).returncode
    finally:
        remove_host_folder(inputs)
