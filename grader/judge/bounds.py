"""The bounds of a sandbox, enforced by the kernel where it can be: memory and processes by a cgroup
(its files in the sandbox's tmpfs count as its memory), disk by the tmpfs sizes (grader.judge.sandbox
mounts them), time by the host's clock. Where no cgroup can be made (a user without delegation),
memory is the summed resident size of its processes polled by the host, plus the tmpfs sizes.

* :class:`Bounds` — what one sandboxed process tree may take; :func:`default_bounds` the host's;
* :func:`lesson_time_s` — the time a notebook's sandbox may take, from the lesson's recorded time;
* :class:`Bounded` — a started sandbox, stopped past its bounds, saying which.
"""
from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..paths import PACKAGE

GiB = 2**30


# ---------------------------------------------------------------- bounds
@dataclass
class Bounds:
    """What one sandboxed process tree may take. ``time_why`` says where ``wall_s`` comes from."""
    wall_s: float
    memory_bytes: int
    scratch_bytes: int = 1 * GiB       # /sandbox (tmpfs)
    tmp_bytes: int = 1 * GiB           # /tmp (tmpfs)
    pids: int = 1024
    time_why: str = ""
    cells_s: float = 0.0               # of wall_s, the time for running the notebook's cells (0: all of it)

    def describe(self) -> str:
        return (f"time {self.wall_s:g} s{f' ({self.time_why})' if self.time_why else ''}, memory "
                f"{self.memory_bytes / GiB:g} GiB (its files in /tmp and /sandbox included), /sandbox "
                f"{self.scratch_bytes / GiB:g} GiB, /tmp {self.tmp_bytes / GiB:g} GiB, {self.pids} processes")


def limit(name: str, default: float) -> float:
    """A host-side limit of the judge, from ``$GRADER_JUDGE_<NAME>`` (the grader's environment,
    which no submission can see or change)."""
    try:
        return float(os.environ.get(f"GRADER_JUDGE_{name}", default))
    except ValueError:
        return default


def memory_default() -> int:
    """Half the machine's memory, at most 32 GiB: one sandbox must not take the grader's host down."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 16 * GiB
    return int(min(32 * GiB, total // 2))


def default_bounds(wall_s: float, time_why: str = "", cells_s: float = 0.0) -> Bounds:
    """Bounds with the host's memory limit ($GRADER_JUDGE_MEMORY_GB, else :func:`memory_default`)."""
    memory = int(limit("MEMORY_GB", memory_default() / GiB) * GiB)
    tmpfs = int(min(1 * GiB, memory // 4))
    return Bounds(wall_s=wall_s, memory_bytes=memory, scratch_bytes=tmpfs, tmp_bytes=tmpfs,
                  pids=int(limit("PIDS", 1024)), time_why=time_why, cells_s=cells_s)


# ---------------------------------------------------------------- cgroups
def _own_cgroup(controller: str) -> Path | None:
    """This process's cgroup folder for ``controller`` (v1), or its unified (v2) folder."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            base = Path("/sys/fs/cgroup") / controller
            return base / path.lstrip("/") if base.is_dir() else None
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        if hid == "0" and controllers == "":
            for base in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
                if (base / "cgroup.controllers").is_file():
                    return base / path.lstrip("/")
    return None


class Cgroup:
    """A cgroup for one sandbox: memory (tmpfs pages included) and process count, enforced by the
    kernel. :meth:`make` returns None where none can be made here (then the host polls)."""

    _ids = itertools.count(1)

    def __init__(self, folders: dict, v2: bool):
        self.folders, self.v2 = folders, v2

    @classmethod
    def make(cls, memory_bytes: int, pids: int) -> "Cgroup | None":
        if os.environ.get("GRADER_CGROUP", "1") == "0":
            return None
        name = f"grader-{os.getpid()}-{next(cls._ids)}"      # next() is atomic: judges in threads
        folders = {}
        try:
            for ctl in ("memory", "pids"):
                own = _own_cgroup(ctl)
                if own is None:
                    raise OSError(f"no {ctl} cgroup")
                if (own / "cgroup.controllers").is_file():        # v2: one folder for both
                    folder = own / name
                    folder.mkdir()
                    (folder / "memory.max").write_text(str(memory_bytes))
                    if (folder / "memory.swap.max").exists():
                        (folder / "memory.swap.max").write_text("0")
                    (folder / "pids.max").write_text(str(pids))
                    return cls({"v2": folder}, v2=True)
                folder = own / name
                folder.mkdir()
                folders[ctl] = folder
            (folders["memory"] / "memory.limit_in_bytes").write_text(str(memory_bytes))
            (folders["pids"] / "pids.max").write_text(str(pids))
            return cls(folders, v2=False)
        except (OSError, ValueError):
            for folder in folders.values():
                try:
                    folder.rmdir()
                except OSError:
                    pass
            return None

    def _procs_files(self) -> list[Path]:
        return [f / "cgroup.procs" for f in self.folders.values()]

    def enter(self) -> None:
        """In the child, before exec: move this process into the cgroup (its children follow)."""
        pid = str(os.getpid()).encode()
        for procs in self._procs_files():
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def oom_killed(self) -> bool:
        try:
            if self.v2:
                events = (self.folders["v2"] / "memory.events").read_text()
                return any(line.split()[0] in ("oom_kill", "oom") and int(line.split()[1]) > 0
                           for line in events.splitlines())
            ctl = (self.folders["memory"] / "memory.oom_control").read_text()
            for line in ctl.splitlines():
                if line.startswith("oom_kill ") and int(line.split()[1]) > 0:
                    return True
            return int((self.folders["memory"] / "memory.failcnt").read_text()) > 0 and \
                int((self.folders["memory"] / "memory.max_usage_in_bytes").read_text()) >= \
                int((self.folders["memory"] / "memory.limit_in_bytes").read_text()) - 2**20
        except (OSError, ValueError, IndexError):
            return False

    def pids_exhausted(self) -> bool:
        try:
            folder = self.folders["v2"] if self.v2 else self.folders["pids"]
            for line in (folder / "pids.events").read_text().splitlines():
                if line.startswith("max ") and int(line.split()[1]) > 0:
                    return True
        except (OSError, ValueError, IndexError, KeyError):
            pass
        return False

    def kill_all(self) -> None:
        for procs in self._procs_files():
            try:
                for pid in procs.read_text().split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, ValueError, PermissionError):
                        pass
            except OSError:
                pass

    def remove(self) -> None:
        for _ in range(50):
            self.kill_all()
            left = False
            for folder in self.folders.values():
                try:
                    folder.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    left = True
            if not left:
                return
            time.sleep(0.1)


# ---------------------------------------------------------------- bounded processes
def _tree(pid: int) -> list[int]:
    """pid and its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def _rss_bytes(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


class Bounded:
    """A started sandbox, stopped (with everything it started) past its :class:`Bounds`. ``why``
    says which bound, once it was stopped. What it writes to stderr is kept as a bounded tail in
    the host's memory (``log_tail``): a flood of output costs neither memory nor disk."""

    TAIL = 64 * 1024

    def __init__(self, cmd: list[str], bounds: Bounds, stdin=subprocess.PIPE, stdout=subprocess.PIPE):
        self._tail, self._dropped = bytearray(), 0
        self.bounds = bounds
        self.cgroup = Cgroup.make(bounds.memory_bytes, bounds.pids)
        self.why: str | None = None
        self.start = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                                     start_new_session=True, preexec_fn=self.cgroup.enter if self.cgroup else None)
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()
        self._watch = threading.Thread(target=self._watchdog, daemon=True)
        self._watch.start()

    @property
    def enforced_by(self) -> str:
        return "a cgroup" if self.cgroup else "the host's polling (no cgroup could be made here)"

    def _read_stderr(self) -> None:
        while True:
            chunk = self.proc.stderr.read1(65536) if hasattr(self.proc.stderr, "read1") else self.proc.stderr.read(65536)
            if not chunk:
                break
            self._tail += chunk
            if len(self._tail) > 2 * self.TAIL:
                self._dropped += len(self._tail) - self.TAIL
                del self._tail[:-self.TAIL]

    @property
    def log_tail(self) -> str:
        head = f"[{self._dropped} earlier bytes not kept]\n" if self._dropped else ""
        return head + bytes(self._tail[-self.TAIL:]).decode(errors="replace")

    def remaining_s(self) -> float:
        return max(0.0, self.bounds.wall_s - (time.monotonic() - self.start))

    def _memory_why(self) -> str:
        return (f"it used more than {self.bounds.memory_bytes / GiB:g} GiB of memory (the sandbox's bound, "
                f"enforced by {self.enforced_by}; files it writes in /tmp and /sandbox count)")

    def _watchdog(self) -> None:
        while self.proc.poll() is None:
            if time.monotonic() - self.start > self.bounds.wall_s:
                why = f" ({self.bounds.time_why})" if self.bounds.time_why else ""
                self.kill(f"it ran past its time limit of {self.bounds.wall_s:g} s{why}")
            elif self.cgroup is None and _rss_bytes(_tree(self.proc.pid)) > \
                    self.bounds.memory_bytes - self.bounds.scratch_bytes - self.bounds.tmp_bytes:
                self.kill(self._memory_why())
            time.sleep(0.2)
        self.note_kernel_kill()

    def note_kernel_kill(self) -> None:
        """Once it has ended: whether the kernel stopped it at a bound of its cgroup (``why`` says)."""
        if self.why is None and self.cgroup is not None and self.proc.poll() is not None:
            if self.cgroup.oom_killed():
                self.why = self._memory_why()
            elif self.cgroup.pids_exhausted():
                self.why = f"it started more than {self.bounds.pids} processes (the sandbox's bound)"

    def kill(self, why: str) -> None:
        if self.proc.poll() is None:
            self.why = self.why or why
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.cgroup is not None:
            self.cgroup.kill_all()

    def wait(self, timeout: float | None = None) -> int:
        code = self.proc.wait(timeout)
        self._drain.join(5)
        self.note_kernel_kill()
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill("closed")
        self.proc.wait()
        self._drain.join(5)
        self.note_kernel_kill()
        if self.cgroup is not None:
            self.cgroup.remove()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream:
                try:
                    stream.close()
                except OSError:          # stdin's buffered bytes to a sandbox that already hung up
                    pass


def lesson_time_s(notebook: str, simulator: bool) -> tuple[float, float, str]:
    """(the sandbox's whole time, its time for running the notebook's cells, why) for the lesson
    ``notebook`` (its file name): a few times the reference's own time through the judge, recorded per
    lesson in grader/data/lesson_times.json. $GRADER_JUDGE_NOTEBOOK_S sets the cells' time and
    $GRADER_JUDGE_WALL_S the whole (default 3 × the cells'); a lesson with no recorded time gets
    900 s for its cells."""
    cells = os.environ.get("GRADER_JUDGE_NOTEBOOK_S")
    if cells:
        cells_s = limit("NOTEBOOK_S", 900)
        return limit("WALL_S", 3 * cells_s), cells_s, "$GRADER_JUDGE_NOTEBOOK_S"
    try:
        table = json.loads((PACKAGE / "data" / "lesson_times.json").read_text())
    except (OSError, ValueError):
        table = {}
    row = table.get("lessons", {}).get(notebook)
    key = "sim_s" if simulator else "gpu_s"
    if not row or key not in row:
        return limit("WALL_S", 3 * 900), 900.0, "no time is recorded for this lesson"
    factor, slack = table.get("factor", 4), table.get("slack_s", 60)
    wall = float(factor * row[key] + slack)
    return limit("WALL_S", wall), wall, (f"{factor} × the reference's {row[key]:g} s "
                                          f"{'in the simulator' if simulator else 'on a GPU'} + {slack:g} s")
