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

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import PACKAGE
from .bounds import Bounds

MOUNT = "/gpu-course"                # where the sandbox sees the grader package (MOUNT/grader)
SCRATCH = "/sandbox"                 # the sandbox's writable home: a sized tmpfs
INPUTS = "/judge"                    # what the host prepared for this run: read-only
PASS_ENV = ("LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
            "CUDA_HOME", "CUDA_PATH", "GRADER_FORCE_SIM", "NUMBA_ENABLE_CUDASIM", "GRADER_SIM_TIMEOUT",
            "GRADER_GPU_TIMEOUT", "GRADER_CUDA_ARCH", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST")
GiB = 2**30


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
    """Whether ``p`` or a folder above it holds a course (an editable install's path entry, say),
    and ``p`` is not inside a Python environment there (a course's own .venv: its packages are bound,
    again on top of the course's cover)."""
    above = (p, *p.parents)
    if any((q / "pyvenv.cfg").is_file() for q in above):
        return False
    return any(_is_course(q) for q in above if q != Path("/"))


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


@functools.cache
def grader_bytecode() -> None:
    """The grader package's bytecode, written by the host once per process where it may write: a
    sandbox reads the package read-only and writes no bytecode, so a module only runners import
    (the runner itself, what the notebooks import) would otherwise be compiled from source by every
    runner. Modules already up to date are left alone."""
    import compileall

    try:
        compileall.compile_dir(str(PACKAGE), quiet=2, workers=1)
    except OSError:
        pass                           # a read-only install: pip wrote its bytecode when it installed it


def write_input(folder: Path, name: str, data: bytes | str) -> Path:
    """A file of the host's inputs, readable inside (mode 0644)."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o755)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    os.chmod(path, 0o644)
    return path


@functools.cache
def font_list() -> dict:
    """Matplotlib's font list as the host built it ({file name: bytes}; {} without matplotlib).
    Each runner starts with an empty MPLCONFIGDIR and would scan the system's fonts again (seconds
    a notebook, in every sandbox): the host hands its list in with the plan (grader.judge.remote),
    and the runner copies it there before matplotlib is imported. Fonts in folders the sandbox does
    not bind (a user's own fonts) are left out of it: matplotlib would rebuild the list, and say so
    in a cell's output, on finding one missing."""
    import json

    try:
        import matplotlib
        from matplotlib import font_manager  # noqa: F401  (reads or builds the list in this process's cache)

        inside = tuple(r.rstrip("/") + "/" for r in [*_system_roots(), *_python_roots()])
        out = {}
        for path in Path(matplotlib.get_cachedir()).glob("fontlist-v*.json"):
            if not path.is_file() or path.is_symlink() or path.stat().st_size > 8 * 2**20:
                continue
            data = json.loads(path.read_text())
            for key in ("ttflist", "afmlist"):
                data[key] = [f for f in data.get(key, []) if isinstance(f, dict) and isinstance(f.get("fname"), str)
                             and (not os.path.isabs(f["fname"]) or f["fname"].startswith(inside))]
            out[path.name] = json.dumps(data).encode()
        return out
    except Exception:
        return {}
