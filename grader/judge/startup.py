"""What the runner does around the notebook rather than with it: how long its process took to reach
``main`` (the interpreter and imports, reported to the judge), the host's matplotlib font list copied
into the sandbox's MPLCONFIGDIR, and the optional profile of its setup and cells
(``GRADER_RUNNER_PROFILE=1``, dev/integrity/runner_profile.py)."""
from __future__ import annotations

import os
import sys


def process_age_s() -> float | None:
    """Seconds since this process started (Linux: /proc), so the judge learns how much of the
    runner's start went to the interpreter and the imports before main()."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def start_profile():
    """dev/integrity/runner_profile.py: where the runner's setup and cells spend their time."""
    import cProfile

    profile = cProfile.Profile()
    profile.enable()
    return profile


def print_profile(profile, least_s: float = 0.25, lines: int = 32, who: str = "runner") -> None:
    """The functions that took ``least_s`` or more, one short line each, to the log: by cumulative
    time (where the time went, callers included), then by own time (what actually spent it)."""
    import pstats

    profile.disable()
    plumbing = ("<frozen", "interactiveshell.py", "async_helpers.py", "runner.py")
    stats = [(tt, ct, f, f"{os.path.basename(f)}:{n}({fn})") for (f, n, fn), (_, _, tt, ct, _) in
             pstats.Stats(profile).stats.items() if not f.startswith(plumbing) and os.path.basename(f) not in plumbing]
    cumulative = sorted(((ct, name) for _, ct, f, name in stats if ct >= least_s and f != "~"), reverse=True)
    own = sorted(((tt, name) for tt, _, _, name in stats if tt >= least_s / 5), reverse=True)  # builtins too
    for title, rows in (("cumulative", cumulative), ("own time", own)):
        print(f"[{who}] profile ({title}, s):\n" + "\n".join(f"{t:7.2f} {name[:90]}" for t, name in rows[:lines]),
              file=sys.stderr)


def copy_font_list(inputs: str) -> None:
    """The host's matplotlib font list (handed in with the plan) into this sandbox's MPLCONFIGDIR."""
    import shutil

    src, dst = os.path.join(inputs, "mpl"), os.environ.get("MPLCONFIGDIR")
    if not dst or not os.path.isdir(src):
        return
    try:
        os.makedirs(dst, exist_ok=True)
        for name in os.listdir(src):
            if name.startswith("fontlist-v") and name.endswith(".json"):
                shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))
    except OSError:
        pass                           # matplotlib builds its own, as without the list
