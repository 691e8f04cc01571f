"""Checks kspark's import structure: imports point down the layers (README "Layout"), and no
modules import each other in a cycle, counting imports inside functions too (imports under
``if TYPE_CHECKING:`` are for the type checker only and are not counted).

    python scripts/check_layers.py        # exit 1 and a list of violations, if any
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "kspark"

#: the layer of each top-level module or package of kspark; imports go to the same or lower
LAYERS: dict[str, int] = {
    "_duration": 1, "_json_codec": 1, "errors": 1, "hashing": 1, "windows": 1, "serdes": 1,
    "records": 1, "record_columns": 1, "config": 1, "drop_log": 1, "jvm": 1, "compiled": 1,
    "frozen": 1,
    "state": 2,
    "processor": 3,
    "topology": 4,
    "dsl": 5,
    "runtime": 6,
    "testing": 7,
    "kafka": 8,
    "io": 9,
    "spark": 10,
    "examples": 11, "demo": 11, "cli_store": 11, "cli_run": 11, "cli": 12,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(path: Path, name: str, modules: set[str]) -> list[tuple[str, int]]:
    """The kspark modules ``path`` imports (with line numbers), anywhere but under
    ``if TYPE_CHECKING:``. ``from package import module`` counts as importing the module."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = name.split(".")
                    base = base[: len(base) - child.level + (1 if is_package else 0)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                submodules = [f"{target}.{a.name}" for a in child.names
                              if f"{target}.{a.name}" in modules]
                if len(submodules) == len(child.names):  # "from kspark.dsl import processors"
                    found.extend((m, child.lineno) for m in submodules)
                else:
                    found.append((target, child.lineno))
            visit(child)

    visit(tree)
    return [(t, line) for t, line in found if t == PACKAGE or t.startswith(PACKAGE + ".")]


def layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def main() -> int:
    files = {module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}
    graph: dict[str, set[str]] = {m: set() for m in files}
    problems = []
    for module, path in files.items():
        own = layer(module)
        if module != PACKAGE and own is None:
            problems.append(f"{path.relative_to(ROOT)}: no layer for {module!r} in LAYERS")
        for target, line in imports(path, module, set(files)):
            target_module = target if target in files else target.rsplit(".", 1)[0]
            if target_module not in files or target_module == module:
                continue
            if target_module in graph[module]:
                continue
            graph[module].add(target_module)
            theirs = layer(target_module)
            if own is not None and theirs is not None and theirs > own:
                problems.append(
                    f"{path.relative_to(ROOT)}:{line}: {module} (layer {own}) imports "
                    f"{target_module} (layer {theirs})")
    problems += [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
    for p in problems:
        print(p)
    print(f"{len(files)} modules, {sum(map(len, graph.values()))} imports: "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (package
    ``__init__`` modules that only re-export are part of the graph like any other)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


if __name__ == "__main__":
    sys.exit(main())
