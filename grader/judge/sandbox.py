"""Running a submission's code in a sandbox: what it can see, how long it may run, how much memory.

A sandbox is a way to start a command; :class:`Bwrap` (bubblewrap, the default) gives it

* no network (its own network namespace: only a private loopback), its own PID namespace (nothing
  it starts outlives it), its own IPC and UTS namespaces, and an unprivileged uid;
* a read-only view of the system (``/usr``, ``/lib``, ``/etc``, the Python installation and its
  packages, the CUDA toolkit), of the grader package and of results/ (the reference's published
  figures; both under ``/gpu-course``), and nothing else: not the course checkout (solutions/, the
  gradebook), not other submissions, not ``$HOME``;
* one writable folder, ``/sandbox``, holding only this submission's files; a private ``/tmp``;
* the GPU's device nodes (``--dev-bind /dev``) when it runs kernels;
* a scrubbed environment: only the variables :func:`sandbox_env` lists.

The host bounds it: :class:`Bounded` kills the whole sandbox past its wall time or memory.
:class:`NoSandbox` runs the same command unisolated, for a learner grading their own notebook (with a
warning). Another backend (Apptainer, Docker, a Kubernetes pod) implements ``command()`` the same
way: docs/GRADING.md says how.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import PACKAGE

MOUNT = "/gpu-course"                # where the sandbox sees the grader package (MOUNT/grader)
SCRATCH = "/sandbox"                 # the sandbox's one writable folder
PASS_ENV = ("LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
            "CUDA_HOME", "CUDA_PATH", "GRADER_FORCE_SIM", "NUMBA_ENABLE_CUDASIM", "GRADER_SIM_TIMEOUT",
            "GRADER_GPU_TIMEOUT", "GRADER_CUDA_ARCH", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST")


def _python_roots() -> list[str]:
    """Folders the sandboxed Python needs: its installation, its environment, and every package
    folder on the host's sys.path except the course checkout itself."""
    checkout = PACKAGE.parent.resolve()
    roots = {str(Path(sys.base_prefix).resolve()), str(Path(sys.prefix).resolve())}
    roots.add(str(Path(sys.prefix).absolute()))     # a venv reached through a symlink: sys.executable's path
    for entry in sys.path:
        p = Path(entry or ".").resolve()
        if not p.is_dir() or p == checkout or checkout in p.parents and ".venv" not in p.parts:
            continue
        if (p / "solutions").exists() or (p / ".nbgrader").exists():
            continue
        roots.add(str(p))
    return sorted(roots)


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
    # the host's extra package folders (bound read-only: _python_roots), after the grader's mount
    checkout = PACKAGE.parent.resolve()
    extra_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                   if p and Path(p).resolve() != checkout and Path(p).is_dir() and not (Path(p) / "solutions").exists()]
    env = {"PATH": f"{python_bin}:/usr/local/bin:/usr/bin:/bin", "HOME": SCRATCH, "TMPDIR": "/tmp",
           "PYTHONPATH": os.pathsep.join([MOUNT, *extra_paths]), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
           "GRADER_CACHE_DIR": f"{SCRATCH}/.cache", "JUPYTER_PLATFORM_DIRS": "1"}
    env.update({k: os.environ[k] for k in PASS_ENV if k in os.environ})
    env.update(extra or {})
    return env


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

    def command(self, argv: list[str], scratch: Path, env: dict, gpu: bool = False,
                readonly: dict | None = None) -> list[str]:
        """The command line running ``argv`` inside; ``readonly`` maps extra host paths to where
        the sandbox sees them (read-only)."""
        cmd = [self.executable, "--unshare-all", "--die-with-parent", "--new-session",
               "--uid", "1000", "--gid", "1000", "--tmpfs", "/tmp"]      # first: package folders may be under /tmp
        for root in _system_roots():
            cmd += ["--ro-bind-try", root, root]
        for root in _python_roots():
            cmd += ["--ro-bind", root, root]
        cmd += ["--ro-bind", str(PACKAGE), f"{MOUNT}/grader"]
        if (PACKAGE.parent / "results").is_dir():              # the reference's recorded figures (plots)
            cmd += ["--ro-bind", str(PACKAGE.parent / "results"), f"{MOUNT}/results"]
        cmd += ["--dev-bind", "/dev", "/dev"] if gpu else ["--dev", "/dev"]
        cmd += ["--proc", "/proc", "--bind", str(scratch), SCRATCH]
        for host, inside in (readonly or {}).items():
            cmd += ["--ro-bind", str(host), str(inside)]
        cmd += ["--chdir", SCRATCH, "--clearenv"]
        for k, v in env.items():
            cmd += ["--setenv", k, v]
        return cmd + list(argv)


@dataclass
class NoSandbox:
    """No isolation: the command runs as the grader's user, seeing everything it sees. For a learner
    grading their own notebook only; points are still computed by the judge."""
    name: str = "none"

    def available(self) -> str | None:
        return None

    def command(self, argv: list[str], scratch: Path, env: dict, gpu: bool = False,
                readonly: dict | None = None) -> list[str]:
        env = {**env, "HOME": str(scratch), "GRADER_CACHE_DIR": str(scratch / ".cache"),
               "PYTHONPATH": str(PACKAGE.parent)}
        for host, inside in (readonly or {}).items():
            env = {k: v.replace(str(inside), str(host)) for k, v in env.items()}
            argv = [a.replace(str(inside), str(host)) for a in argv]
        argv = [a.replace(SCRATCH, str(scratch)) for a in argv]
        env = {k: v.replace(SCRATCH, str(scratch)) for k, v in env.items()}
        return ["env", "-i", *[f"{k}={v}" for k, v in env.items()], *argv]


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
        raise RuntimeError(f"the bwrap sandbox was asked for, but {why}")
    print(f"warning: no sandbox: {why}. The notebook's code runs with your permissions; fine for your "
          "own notebook, never for a class (install bubblewrap).", file=sys.stderr)
    return NoSandbox()


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
    """A started sandbox, killed (with everything it started) past ``wall_s`` seconds or
    ``memory_bytes`` of resident memory. ``why`` says which, once it was killed. What it writes to
    stderr is kept as a bounded tail (``log_tail``) and written to ``stderr_path`` when it ends:
    a flood of output costs neither memory nor disk."""

    TAIL = 64 * 1024

    def __init__(self, cmd: list[str], wall_s: float, memory_bytes: int, stdin=subprocess.PIPE,
                 stdout=subprocess.PIPE, stderr_path: Path | None = None):
        self.stderr_path, self._tail, self._dropped = stderr_path, bytearray(), 0
        self.proc = subprocess.Popen(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.why: str | None = None
        self.wall_s, self.memory_bytes, self.start = wall_s, memory_bytes, time.monotonic()
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()
        self._watch = threading.Thread(target=self._watchdog, daemon=True)
        self._watch.start()

    def _read_stderr(self) -> None:
        while True:
            chunk = self.proc.stderr.read1(65536) if hasattr(self.proc.stderr, "read1") else self.proc.stderr.read(65536)
            if not chunk:
                break
            self._tail += chunk
            if len(self._tail) > 2 * self.TAIL:
                self._dropped += len(self._tail) - self.TAIL
                del self._tail[:-self.TAIL]
        if self.stderr_path:
            head = f"[{self._dropped} earlier bytes not kept]\n".encode() if self._dropped else b""
            Path(self.stderr_path).write_bytes(head + bytes(self._tail[-self.TAIL:]))

    @property
    def log_tail(self) -> str:
        return bytes(self._tail[-self.TAIL:]).decode(errors="replace")

    def _watchdog(self) -> None:
        while self.proc.poll() is None:
            if time.monotonic() - self.start > self.wall_s:
                self.kill(f"it ran past its time limit ({self.wall_s:g} s)")
            elif _rss_bytes(_tree(self.proc.pid)) > self.memory_bytes:
                self.kill(f"it used more than {self.memory_bytes / 2**30:g} GiB of memory")
            time.sleep(0.2)

    def kill(self, why: str) -> None:
        if self.proc.poll() is None:
            self.why = self.why or why
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def wait(self, timeout: float | None = None) -> int:
        code = self.proc.wait(timeout)
        self._drain.join(5)
        return code

    def close(self) -> None:
        self.kill("closed")
        self.proc.wait()
        self._drain.join(5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream:
                try:
                    stream.close()
                except OSError:          # stdin's buffered bytes to a sandbox that already hung up
                    pass


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
        total = 16 * 2**30
    return int(min(32 * 2**30, total // 2))
