"""Reading what the compilers say: errors mapped to the cell's own lines, the ptxas resource
report, and kernel names (plain, name expressions, C++-mangled).

* :func:`error_report` turns an NVRTC / nvcc / ptxas log into a short report whose lines point at
  the learner's cell (an error deep inside a CuTe header points back at the line that
  instantiated it); :func:`cell_diagnostics` gives ``(line, kind, message)`` tuples.
* :func:`parse_ptxas_report` is the one parser of ``ptxas -v`` output (registers, stack, spills,
  shared memory) for every caller: compiled cells, SASS rubrics, Numba kernels.
* :func:`find_mangled` is the one way a plain kernel name finds its C++-mangled symbol.
"""
from __future__ import annotations

import re
from pathlib import Path

from .toolchain import COURSE_INCLUDE, cuda_home, cutlass_include_dir

# ---------------------------------------------------------------- names
def find_mangled(name: str, symbols) -> list[str]:
    """The C++-mangled symbols among ``symbols`` whose function name is ``name``
    (``_Z<len><name>…`` or in a namespace, ``_ZN…<len><name>…``)."""
    pattern = re.compile(r"^_Z(?:N\d+\w+?)?%d%s" % (len(name), re.escape(name)))
    return [s for s in symbols if pattern.match(s)]


# ---------------------------------------------------------------- ptxas -v
# A function's block ends at its "Used N registers" line; a called (noinline) device function has no
# such line, so its block must not run on into the next kernel's (whose figures it would take).
_RESOURCES = re.compile(
    r"Function properties for (?P<fn>\S+)\s*\n"
    r".*?(?P<stack>\d+) bytes stack frame, (?P<ss>\d+) bytes spill stores, (?P<sl>\d+) bytes spill loads\s*\n"
    r"(?:(?!.*Function properties).*\n)*?.*?Used (?P<regs>\d+) registers(?P<rest>[^\n]*)",
)


def parse_ptxas_report(log: str) -> dict[str, dict[str, int]]:
    """Per function (mangled name, as ptxas prints it): ``{registers, stack, spill_stores,
    spill_loads, smem, cmem0}`` from a ``ptxas -v`` report."""
    out: dict[str, dict[str, int]] = {}
    for m in _RESOURCES.finditer(log):
        rest = m.group("rest")
        smem = re.search(r"(\d+) bytes smem", rest)
        cmem = re.search(r"(\d+) bytes cmem\[0\]", rest)
        out[m.group("fn").strip("'")] = dict(
            registers=int(m.group("regs")), stack=int(m.group("stack")),
            spill_stores=int(m.group("ss")), spill_loads=int(m.group("sl")),
            smem=int(smem.group(1)) if smem else 0, cmem0=int(cmem.group(1)) if cmem else 0)
    return out


# ---------------------------------------------------------------- compile logs
_DIAG = re.compile(r"^(?P<file>[^\s()][^()]*?)\((?P<line>\d+)\): (?P<kind>error|warning|catastrophic error|remark)[^:]*: (?P<msg>.*)$")
_NVCC_DIAG = re.compile(r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+):(?:\d+:)? (?P<kind>error|warning)[^:]*: (?P<msg>.*)$")
_PTXAS_ERR = re.compile(r"^ptxas(?: application ptx input, line \d+;|\s+\S+, line \d+;)?\s*(?:fatal|error)\s*:\s*(?P<msg>.*)$")
_AT_CELL_LINE = re.compile(r"at line (\d+) of (\S+)")


def shorten_paths(text: str) -> str:
    """Replace long include prefixes by <cutlass>/, <cuda>/, <course>/."""
    subs = []
    cutlass = cutlass_include_dir()
    if cutlass:
        subs.append((str(cutlass) + "/", "<cutlass>/"))
    home = cuda_home()
    if home:
        subs += [(str(home / "include") + "/", "<cuda>/"), (str(home.resolve() / "include") + "/", "<cuda>/")]
    subs.append((str(COURSE_INCLUDE) + "/", "<course>/"))
    for long, short in subs:
        text = text.replace(long, short)
    return text


def clean_log(log: str, cellfile: str) -> str:
    log = log.replace("\x00", "")
    log = re.sub(r"(?m)^\S*/" + re.escape(cellfile), cellfile, log)   # nvcc's temporary path
    return shorten_paths(log).strip()


def parse_errors(log: str, cellfile: str) -> list[dict]:
    """Compiler log -> [{file, line, kind, msg, cell_line, ptxas}] in order. ``cell_line`` is the
    cell's own line: the diagnostic's when it is in the cell, else the outermost "at line N of
    <cell>" of its instantiation chain."""
    out: list[dict] = []
    cur = None
    for raw in log.splitlines():
        m = _DIAG.match(raw) or _NVCC_DIAG.match(raw)
        if m:
            in_cell = Path(m.group("file")).name == cellfile
            cur = dict(file=m.group("file"), line=int(m.group("line")), kind=m.group("kind"),
                       msg=m.group("msg").strip(), cell_line=int(m.group("line")) if in_cell else None,
                       ptxas=False)
            out.append(cur)
            continue
        pm = _PTXAS_ERR.match(raw)
        if pm:
            cur = None
            msg = pm.group("msg").strip()
            if not (msg.startswith("Ptx assembly aborted") and any(e["kind"] != "warning" for e in out)):
                out.append(dict(file="ptxas", line=0, kind="error", msg=msg, cell_line=None, ptxas=True))
            continue
        if cur is not None and cur["cell_line"] is None:
            for lm in _AT_CELL_LINE.finditer(raw):
                if Path(lm.group(2)).name == cellfile:
                    cur["cell_line"] = int(lm.group(1))
    return out


def cell_diagnostics(log: str, cellfile: str) -> list[tuple[int, str, str]]:
    """(cell line, "error" | "warning" | "remark", message) for each diagnostic that maps to the cell."""
    return [(e["cell_line"], e["kind"] if e["kind"] in ("warning", "remark") else "error", e["msg"])
            for e in parse_errors(log, cellfile) if e["cell_line"] is not None]


def error_report(log: str, cellfile: str, source_lines: list[str], limit: int = 5) -> str:
    """The first ``limit`` distinct errors, each pointing at (and quoting) the cell's own line; an
    error inside a header names the header but not its whole instantiation chain."""
    errs = [e for e in parse_errors(log, cellfile) if e["kind"] not in ("warning", "remark")]
    if not errs:
        tail = [ln for ln in log.splitlines() if ln.strip()][-limit:]
        return "\n".join(tail) or "compilation failed (no message)"
    blocks, seen, follow_ons = [], set(), {}
    for e in errs:
        line = e["cell_line"]
        if not e["ptxas"] and line and line in seen:
            follow_ons[line] = follow_ons.get(line, 0) + 1     # knock-on errors of one line
            continue
        if e["ptxas"]:
            key, lines = ("ptxas", e["msg"]), ["ptxas (inline PTX / code generation): " + e["msg"]]
        else:
            inside = "" if Path(e["file"]).name == cellfile else f" (inside {e['file']}:{e['line']})"
            key = line if line else (e["file"], e["line"], e["msg"])
            lines = [f"line {line}: error{inside}: {e['msg']}" if line else f"{e['file']}:{e['line']}: error: {e['msg']}"]
            if line and 1 <= line <= len(source_lines):
                lines.append(f"    {line:4d} | {source_lines[line - 1].rstrip()}")
        if key in seen:
            continue
        seen.add(key)
        blocks.append((line if not e["ptxas"] else None, lines))
    for line, lines in blocks:
        if line and follow_ons.get(line):
            n = follow_ons[line]
            lines.append(f"    (+{n} follow-on error{'s' if n > 1 else ''} from this line, in err.log)")
    text = "\n".join("\n".join(lines) for _, lines in blocks[:limit])
    if len(blocks) > limit:
        text += f"\n... and {len(blocks) - limit} more errors (the full log is err.log)"
    return text
