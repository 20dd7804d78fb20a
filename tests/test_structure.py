"""The grader's structure: no import cycles, no module over the size limit, each module says what it owns.

Imports are read from the source (every ``import`` and ``from … import`` of a grader module,
at the top or inside a function: a cycle hidden in a function is still a cycle), so the test
needs no GPU and imports nothing.
"""
from __future__ import annotations

import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parent.parent / "grader"
MAX_LINES = 500


def module_name(path: Path) -> str:
    parts = path.relative_to(GRADER.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(GRADER.rglob("*.py"))}


def _resolve(mod: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = mod.split(".") if is_package else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(mod: str, path: Path, known: set[str]) -> set[str]:
    """The grader modules ``mod`` imports (a package's ``__init__`` runs when a submodule is imported)."""
    out: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(mod, path.name == "__init__.py", node)
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for t in targets:
            if not t.startswith("grader"):
                continue
            parts = t.split(".")
            for i in range(1, len(parts) + 1):          # grader.cuda.toolchain also runs grader.cuda
                prefix = ".".join(parts[:i])
                if prefix in known and prefix != mod and not mod.startswith(prefix + "."):
                    out.add(prefix)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports_of(m, p, set(mods)) for m, p in mods.items()}


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(g.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if state.get(m) is None:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(g):
        if state.get(n) is None:
            found = visit(n)
            if found:
                return found
    return None


def test_no_import_cycle():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_over_the_size_limit():
    big = {m: n for m, p in modules().items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines (split them by what they own): {big}"


def test_every_module_says_what_it_owns():
    silent = [m for m, p in modules().items() if not ast.get_docstring(ast.parse(p.read_text()))]
    assert not silent, f"modules without a docstring: {silent}"
