"""Running a submission's code in a sandbox: what it can see and write, and the bounds the kernel enforces.

A sandbox is a way to start a command; :class:`Bwrap` (bubblewrap, the default) gives it

* no network (its own network namespace: only a private loopback), its own PID namespace (nothing
  it starts outlives it), its own IPC and UTS namespaces, and an unprivileged uid;
* a read-only view of the system (``/usr``, ``/lib``, ``/etc``, ``/opt``, the CUDA toolkit), of the
  Python installation and its package folders, of the grader package and of results/ (the reference's
  published figures; both under ``/gpu-course``), and of what the host prepared for this run
  (:data:`INPUTS`: the plan, the compiled modules);
* never the course: every folder that holds a course (its solutions/, gradebook, submissions) is
  hidden under an empty read-only tmpfs, also when a bound system or package folder contains it, so
  the view is the same from whatever folder the grader was started (:func:`hidden_roots`);
* two writable folders, ``/sandbox`` (:data:`SCRATCH`, its home and working folder) and ``/tmp``,
  each a tmpfs of bounded size: nothing it writes reaches the host's disk, and the host never reads
  a file the sandbox could have written — what comes back comes over the runner's pipe
  (grader.judge.protocol), typed and bounded;
* the GPU's device nodes (``--dev-bind /dev``) when it runs kernels;
* a scrubbed environment: only the variables :func:`sandbox_env` lists.

:class:`Bounded` runs it under :class:`Bounds` that the kernel enforces: memory and processes by a
cgroup (its files in the tmpfs count as its memory), disk by the tmpfs sizes, time by the host's
clock; where no cgroup can be made (a user without delegation), memory is the summed resident size
of its processes polled by the host, plus the tmpfs sizes. The reason it was stopped names the bound.
:class:`NoSandbox` runs the same command unisolated, for a learner grading their own notebook (with a
warning). Another backend (Apptainer, Docker, a Kubernetes pod) implements ``command()`` the same
way: docs/GRADING.md says how.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import PACKAGE

MOUNT = "/gpu-course"                # where the sandbox sees the grader package (MOUNT/grader)
SCRATCH = "/sandbox"                 # the sandbox's writable home: a sized tmpfs
INPUTS = "/judge"                    # what the host prepared for this run: read-only
PASS_ENV = ("LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
            "CUDA_HOME", "CUDA_PATH", "GRADER_FORCE_SIM", "NUMBA_ENABLE_CUDASIM", "GRADER_SIM_TIMEOUT",
            "GRADER_GPU_TIMEOUT", "GRADER_CUDA_ARCH", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST")
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


# ---------------------------------------------------------------- what the sandbox sees
_hidden: set[Path] = set()


def hide(path) -> None:
    """Hide a course folder from every sandbox started by this process (autograde's --course, the
    folder of a notebook being graded): added to :func:`hidden_roots`."""
    _hidden.add(Path(path).resolve())


def _is_course(p: Path) -> bool:
    return any((p / name).exists() for name in ("solutions", ".nbgrader", "gradebook.db", "submitted",
                                                 "nbgrader_config.py"))


def hidden_roots() -> list[Path]:
    """Folders no sandbox may see: the checkout this grader belongs to, the working folder and every
    folder :func:`hide` named, each where it holds a course (solutions/, a gradebook, submissions)."""
    found = set(_hidden)
    for cand in (PACKAGE.parent, Path.cwd()):
        cand = cand.resolve()
        if _is_course(cand):
            found.add(cand)
    return sorted(found)


def _inside(p: Path, root: Path) -> bool:
    return p == root or root in p.parents


def _in_a_course(p: Path) -> bool:
    """Whether ``p`` or a folder above it holds a course (an editable install's path entry, say)."""
    return any(_is_course(q) for q in (p, *p.parents) if q != Path("/"))


def _python_roots() -> list[str]:
    """Folders the sandboxed Python needs: its installation, its environment, and the package folders
    on the host's sys.path — never the working folder ('' and the cwd on sys.path) nor a folder that
    holds or lies inside a course, except the environment itself (a course's own .venv)."""
    env = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), Path(sys.prefix).absolute()}
    hidden = hidden_roots()
    cwd = Path.cwd().resolve()
    roots = set(env)
    for entry in sys.path:
        if not entry:
            continue
        p = Path(entry).resolve()
        if not p.is_dir() or p == cwd:
            continue
        if any(_inside(p, e) for e in env):
            continue                                  # already bound with its environment
        if any(_inside(h, p) or _inside(p, h) for h in hidden) or _in_a_course(p):
            continue                                  # would show a course (or is inside one)
        roots.add(p)
    return sorted(str(r) for r in roots)


def python_executable() -> str:
    """This Python as the sandbox sees it: inside its environment's real folder. A worktree whose
    ``.venv`` is a link to another checkout's environment has that folder bound at its real path
    (_python_roots), not at the link's."""
    exe = Path(sys.executable)
    try:
        return str(Path(sys.prefix).resolve() / exe.relative_to(sys.prefix))
    except ValueError:
        return str(exe)


def _system_roots() -> list[str]:
    roots = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt"]
    from ..cuda.toolchain import cuda_home

    home = cuda_home()
    if home:
        roots.append(str(home.resolve()))
    return roots


def sandbox_env(extra: dict | None = None) -> dict:
    """The environment inside: a fixed PATH and HOME, the grader first on PYTHONPATH, the variables
    of PASS_ENV that are set here, and ``extra``."""
    python_bin = str(Path(python_executable()).parent)
    hidden = hidden_roots()
    extra_paths = []
    for p in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if p and Path(p).is_dir() and not _in_a_course(Path(p).resolve()) and \
                not any(_inside(h, Path(p).resolve()) or _inside(Path(p).resolve(), h) for h in hidden):
            extra_paths.append(p)
    env = {"PATH": f"{python_bin}:/usr/local/bin:/usr/bin:/bin", "HOME": SCRATCH, "TMPDIR": "/tmp",
           "PYTHONPATH": os.pathsep.join([MOUNT, *extra_paths]), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
           "GRADER_CACHE_DIR": f"{SCRATCH}/.cache", "JUPYTER_PLATFORM_DIRS": "1", "MPLCONFIGDIR": f"{SCRATCH}/.mpl"}
    env.update({k: os.environ[k] for k in PASS_ENV if k in os.environ})
    env.update(extra or {})
    return env


class SandboxUnsafe(RuntimeError):
    """The sandbox cannot be made to hide the course here; the grader refuses to run."""


@dataclass
class Bwrap:
    """bubblewrap: the default sandbox (Debian/Ubuntu package ``bubblewrap``)."""
    executable: str = field(default_factory=lambda: os.environ.get("GRADER_BWRAP") or shutil.which("bwrap") or "bwrap")
    name: str = "bwrap"

    def available(self) -> str | None:
        """None when it works here, else why not."""
        if not Path(self.executable).exists() and not shutil.which(self.executable):
            return "bubblewrap is not installed (apt-get install bubblewrap)"
        r = subprocess.run([self.executable, "--unshare-all", "--ro-bind", "/", "/", "true"],
                           capture_output=True, text=True)
        return None if r.returncode == 0 else f"bubblewrap cannot create namespaces here: {r.stderr.strip()[:200]}"

    def command(self, argv: list[str], inputs: Path, env: dict, bounds: Bounds, gpu: bool = False) -> list[str]:
        """The command line running ``argv`` inside, with ``inputs`` (a host folder the sandbox never
        wrote) bound read-only at :data:`INPUTS`."""
        cmd = [self.executable, "--unshare-all", "--die-with-parent", "--new-session",
               "--uid", "1000", "--gid", "1000",
               "--size", str(bounds.tmp_bytes), "--tmpfs", "/tmp"]      # first: package folders may be under /tmp
        bound: list[Path] = []
        for root in _system_roots():
            if Path(root).exists():
                cmd += ["--ro-bind-try", root, root]
                bound.append(Path(root).resolve())
        pyroots = _python_roots()
        for root in pyroots:
            cmd += ["--ro-bind", root, root]
            bound.append(Path(root))
        # every course a bound folder shows is covered by an empty, read-only tmpfs; the Python
        # environment (a course's own .venv) is bound again on top of it
        for h in hidden_roots():
            holders = [b for b in bound if _inside(h, b)]
            if not holders:
                continue
            if any(_inside(b, h) and b not in map(Path, pyroots) for b in bound):
                raise SandboxUnsafe(f"a system folder lies inside the course folder {h}: the sandbox cannot hide it")
            cmd += ["--perms", "0555", "--size", "4096", "--tmpfs", str(h)]
            for root in pyroots:
                if _inside(Path(root), h):
                    cmd += ["--ro-bind", root, root]
            cmd += ["--remount-ro", str(h)]
        cmd += ["--ro-bind", str(PACKAGE), f"{MOUNT}/grader"]
        if (PACKAGE.parent / "results").is_dir():              # the reference's recorded figures (plots)
            cmd += ["--ro-bind", str(PACKAGE.parent / "results"), f"{MOUNT}/results"]
        cmd += ["--dev-bind", "/dev", "/dev"] if gpu else ["--dev", "/dev"]
        cmd += ["--proc", "/proc", "--size", str(bounds.scratch_bytes), "--tmpfs", SCRATCH,
                "--ro-bind", str(inputs), INPUTS, "--chdir", SCRATCH, "--clearenv"]
        for k, v in env.items():
            cmd += ["--setenv", k, v]
        return cmd + list(argv)


@dataclass
class NoSandbox:
    """No isolation: the command runs as the grader's user, seeing everything it sees. For a learner
    grading their own notebook only; points are still computed by the judge. Its scratch folder is a
    fresh temporary folder the host never reads."""
    name: str = "none"

    def available(self) -> str | None:
        return None

    def command(self, argv: list[str], inputs: Path, env: dict, bounds: Bounds, gpu: bool = False) -> list[str]:
        scratch = scratch_beside(inputs)
        scratch.mkdir(exist_ok=True)
        subst = {SCRATCH: str(scratch), INPUTS: str(inputs)}

        def swap(s: str) -> str:
            for inside, host in subst.items():
                s = s.replace(inside, host)
            return s

        env = {**env, "PYTHONPATH": str(PACKAGE.parent)}
        env = {k: swap(v) for k, v in env.items()}
        return ["env", "-i", *[f"{k}={v}" for k, v in env.items()], *[swap(a) for a in argv]]


def choose(name: str | None = None):
    """The sandbox to use: ``name`` ("bwrap" or "none"), else ``$GRADER_SANDBOX``, else bubblewrap
    when it works here, else none with a warning."""
    name = name or os.environ.get("GRADER_SANDBOX")
    if name == "none":
        return NoSandbox()
    box = Bwrap()
    why = box.available()
    if why is None:
        return box
    if name == "bwrap":
        raise SandboxUnsafe(f"the bwrap sandbox was asked for, but {why}")
    print(f"warning: no sandbox: {why}. The notebook's code runs with your permissions; fine for your "
          "own notebook, never for a class (install bubblewrap).", file=sys.stderr)
    return NoSandbox()


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

    _count = 0

    def __init__(self, folders: dict, v2: bool):
        self.folders, self.v2 = folders, v2

    @classmethod
    def make(cls, memory_bytes: int, pids: int) -> "Cgroup | None":
        if os.environ.get("GRADER_CGROUP", "1") == "0":
            return None
        cls._count += 1
        name = f"grader-{os.getpid()}-{cls._count}"
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


# ---------------------------------------------------------------- the host's own folders
def host_folder(prefix: str = "judge-") -> Path:
    """A fresh folder for what the host writes (plans, modules, notebooks it hands in): never bound
    writable into a sandbox, readable by the sandbox's uid through the read-only bind."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(path, 0o755)
    return path


def scratch_beside(inputs: Path) -> Path:
    """The writable folder of an unsandboxed run (--sandbox none), removed with ``inputs``."""
    return inputs.with_name(inputs.name + ".scratch")


def remove_host_folder(inputs: Path) -> None:
    shutil.rmtree(inputs, ignore_errors=True)
    shutil.rmtree(scratch_beside(inputs), ignore_errors=True)


def write_input(folder: Path, name: str, data: bytes | str) -> Path:
    """A file of the host's inputs, readable inside (mode 0644)."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o755)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    os.chmod(path, 0o644)
    return path


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
