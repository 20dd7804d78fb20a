"""Kernel parameter lists read from the source, so scalar arguments get their C types.

``int n`` -> int32, ``float alpha`` -> float32, ``size_t`` -> uint64, any pointer -> a 64-bit
address. Templates and parameter lists written with macros are skipped: their arguments are typed
from the sizes the driver reports at launch (grader.cuda.module).
"""
from __future__ import annotations

import dataclasses
import re

SCALAR_TYPES = {
    "bool": "bool",
    "char": "int8", "signed char": "int8", "unsigned char": "uint8", "int8_t": "int8", "uint8_t": "uint8",
    "short": "int16", "unsigned short": "uint16", "int16_t": "int16", "uint16_t": "uint16",
    "int": "int32", "signed": "int32", "unsigned": "uint32", "unsigned int": "uint32",
    "int32_t": "int32", "uint32_t": "uint32",
    "long": "int64", "unsigned long": "uint64", "long long": "int64", "unsigned long long": "uint64",
    "int64_t": "int64", "uint64_t": "uint64", "size_t": "uint64", "ptrdiff_t": "int64",
    "intptr_t": "int64", "uintptr_t": "uint64",
    "float": "float32", "double": "float64",
    "half": "float16", "__half": "float16",
}

_KERNEL_DECL = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*|__cluster_dims__\s*\([^)]*\)\s*|static\s+|inline\s+)*"
    r"void\s+(?:__launch_bounds__\s*\([^)]*\)\s*|__cluster_dims__\s*\([^)]*\)\s*)*(?P<name>[A-Za-z_]\w*)\s*\((?P<params>[^)]*)\)"
)


@dataclasses.dataclass
class Param:
    name: str
    ctype: str               # as written, qualifiers removed
    kind: str                # "pointer", "scalar" or "other"
    dtype: str | None = None  # NumPy dtype name for scalars


def strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def parse_param(text: str) -> Param:
    t = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict|__grid_constant__|struct)\b", " ", text)
    t = re.sub(r"(\w+)\s*\[\s*\d*\s*\]", r"* \1", t)     # "float x[]" is a pointer
    t = " ".join(t.replace("*", " * ").replace("&", " & ").split())
    toks = t.split(" ")
    last_is_name = len(toks) > 1 and re.fullmatch(r"[A-Za-z_]\w*", toks[-1]) and toks[-1] not in SCALAR_TYPES
    name = toks[-1] if last_is_name else ""
    typ = " ".join(toks[:-1] if name else toks)
    if "*" in typ:
        return Param(name, typ, "pointer", "uint64")
    base = re.sub(r"\b(std|cuda::std)::", "", typ).replace("signed int", "int").replace("long int", "long").strip()
    if base in SCALAR_TYPES:
        return Param(name, typ, "scalar", SCALAR_TYPES[base])
    return Param(name, typ, "other", None)


def split_params(s: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in s:
        depth += ch in "<("
        depth -= ch in ">)"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def kernel_signatures(source: str) -> dict[str, list[Param]]:
    """Plain name -> parameter list for every ``__global__`` declaration that is not a template."""
    src = strip_comments(source)
    out: dict[str, list[Param]] = {}
    for m in _KERNEL_DECL.finditer(src):
        before = src[max(0, m.start() - 200): m.start()]
        if re.search(r"template\s*<[^;{}]*>\s*(extern\s+\"C\"\s*)?$", before):
            continue
        params = m.group("params").strip()
        if any(re.search(rf"#\s*define\s+{re.escape(tok)}\b", src) for tok in re.findall(r"[A-Za-z_]\w*", params)):
            continue      # a macro in the parameter list: typed from the driver at launch
        plist = [] if params in ("", "void") else [parse_param(p) for p in split_params(params)]
        out.setdefault(m.group("name"), plist)
    return out
