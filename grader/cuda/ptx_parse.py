"""PTX text parsed into functions of instructions (:mod:`grader.cuda.ptx`'s front end): labels,
predicates, operands split at top-level commas, module-scope shared / global variables with their
initial bytes, each function's parameters, registers, shared and local declarations. Standard library."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .ptx_values import _TYPES

@dataclass
class Instr:
    op: str                 # "add.s32"
    args: list              # operand strings
    pred: str | None = None  # "%p1" / "!%p1"
    line: int = 0
    text: str = ""


@dataclass
class Function:
    name: str
    params: list                                  # names of .param in order
    rets: list                                    # names of return .param
    body: list = field(default_factory=list)      # Instr
    labels: dict = field(default_factory=dict)    # label -> index
    shared: list = field(default_factory=list)    # (name, align, size) declared inside
    local: list = field(default_factory=list)     # (name, align, size)
    is_entry: bool = False
    param_sizes: dict = field(default_factory=dict)
    regs: set = field(default_factory=set)        # plain register names declared (inline asm: p, remote)


class Program:
    """A parsed PTX module: functions, module-scope shared / global variables and their initial data."""

    def __init__(self, text: str):
        self.text = text
        self.functions: dict[str, Function] = {}
        self.shared: list = []            # (name, align, size, extern)
        self.globals: dict = {}           # name -> bytes (initialised .global / .const)
        self._parse(text)

    @staticmethod
    def _split_args(s: str) -> list:
        out, depth, cur = [], 0, []
        for ch in s:
            if ch in "{[(":
                depth += 1
            elif ch in "}])":
                depth -= 1
            if ch == "," and depth == 0:
                out.append("".join(cur).strip())
                cur = []
            else:
                cur.append(ch)
        if "".join(cur).strip():
            out.append("".join(cur).strip())
        return out

    def _parse(self, text: str):
        text = re.sub(r"//[^\n]*", "", text)
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        lines = text.split("\n")
        cur: Function | None = None
        depth = 0
        header: list | None = None
        i = 0
        stmt_buf = ""
        for lineno, raw in enumerate(lines, 1):
            line = raw.strip()
            if not line:
                continue
            if cur is None:
                if header is not None:
                    header.append(line)
                    if line.endswith(";") and "{" not in line:        # a declaration (.extern .func …;)
                        header = None
                        continue
                    if line.startswith("{") or line.endswith("{"):
                        cur = self._function_header(" ".join(header))
                        header = None
                        depth = 1
                    continue
                m = re.match(r"(\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\b", line)
                if m and not line.endswith(";"):
                    header = [line]
                    if line.endswith("{"):
                        cur = self._function_header(line)
                        header, depth = None, 1
                    continue
                self._module_statement(line)
                continue
            # inside a function body
            stmt_buf += " " + line
            while True:
                s = stmt_buf.strip()
                if not s:
                    stmt_buf = ""
                    break
                if s.startswith("{"):
                    depth += 1
                    stmt_buf = s[1:]
                    continue
                if s.startswith("}"):
                    depth -= 1
                    stmt_buf = s[1:]
                    if depth == 0:
                        self.functions[cur.name] = cur
                        cur = None
                        stmt_buf = ""
                        break
                    continue
                m = re.match(r"([$\w]+):(?!:)", s)
                if m and not s.startswith("."):
                    cur.labels[m.group(1)] = len(cur.body)
                    stmt_buf = s[m.end():]
                    continue
                semi = s.find(";")
                if semi < 0:
                    stmt_buf = s
                    break
                self._body_statement(cur, s[:semi].strip(), lineno)
                stmt_buf = s[semi + 1:]
            if cur is None:
                stmt_buf = ""

    def _function_header(self, h: str) -> Function:
        m = re.search(r"\.(entry|func)\s*(\(([^)]*)\))?\s*([\w$]+)\s*(\(([^)]*)\))?", h, re.S)
        kind = m.group(1)
        rets = [p.split()[-1] for p in self._split_args(m.group(3) or "")]
        name = m.group(4)
        params_raw = self._split_args(m.group(6) or "")
        params, sizes = [], {}
        for p in params_raw:
            pm = re.search(r"([\w$]+)(\[(\d+)\])?\s*$", p)
            params.append(pm.group(1))
            t = re.search(r"\.(b8|u8|s8|b16|u16|s16|f16|b32|u32|s32|f32|b64|u64|s64|f64)\b", p)
            unit = _TYPES[t.group(1)][1] // 8 if t else 8
            sizes[pm.group(1)] = unit * int(pm.group(3) or 1)
        rets_clean = [re.sub(r"\[.*", "", r) for r in rets]
        return Function(name=name, params=params, rets=rets_clean, is_entry=kind == "entry", param_sizes=sizes)

    def _module_statement(self, line: str):
        m = re.match(r"(\.extern\s+)?\.shared\s+(\.align\s+(\d+)\s+)?\.\w+\s+([\w$]+)\s*(\[(\d*)\])?", line)
        if m:
            self.shared.append((m.group(4), int(m.group(3) or 1), int(m.group(6) or 0), bool(m.group(1))))
            return
        m = re.match(r"(\.visible\s+|\.weak\s+)?\.(global|const)\s+(\.align\s+(\d+)\s+)?\.(\w+)\s+([\w$]+)\s*(\[(\d*)\])?\s*(=\s*(.*))?;", line)
        if m:
            t = _TYPES.get(m.group(5), ("b", 8))[1] // 8
            n = int(m.group(8) or 1) if m.group(7) else 1
            data = bytearray(t * n)
            if m.group(10):
                vals = re.findall(r"-?0[xX][0-9a-fA-F]+|-?\d+", m.group(10))
                for k, v in enumerate(vals[:n]):
                    data[k * t:(k + 1) * t] = (int(v, 0) & ((1 << (8 * t)) - 1)).to_bytes(t, "little")
            self.globals[m.group(6)] = bytes(data)

    def _body_statement(self, f: Function, s: str, lineno: int):
        if s.startswith(".reg"):
            for name in s.split()[-1:] + [x.strip() for x in s.split(None, 2)[-1].split(",")]:
                name = name.strip()
                if name and "<" not in name and not name.startswith("."):
                    f.regs.add(name)
            return
        if s.startswith("."):
            m = re.match(r"\.(shared|local)\s+(\.align\s+(\d+)\s+)?\.\w+\s+([\w$]+)\s*(\[(\d*)\])?", s)
            if m:
                (f.shared if m.group(1) == "shared" else f.local).append(
                    (m.group(4), int(m.group(3) or 1), int(m.group(6) or 1)))
            return            # .reg and other directives
        pred = None
        m = re.match(r"@(!?[%\w$]+)\s+", s)
        if m:
            pred, s = m.group(1), s[m.end():]
        parts = s.split(None, 1)
        op = parts[0]
        args = self._split_args(parts[1]) if len(parts) > 1 else []
        f.body.append(Instr(op=op, args=args, pred=pred, line=lineno, text=s))
