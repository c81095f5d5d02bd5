"""Print the orchestration layer's structure counts (issue 22), so a change can show its effect.

Counts, over the modules under SRC (default: this checkout's src/gputui):
  cycles      import cycles between modules, counting every import: module level, under
              `TYPE_CHECKING` and inside functions (`ast.walk`); a package stands for its
              `__init__`, which may re-export its submodules. Counted as groups of modules
              that import each other (strongly connected components); `paths` counts the
              distinct cycles in them.
  mixins      classes whose name ends in `Mixin`
  long        functions (and methods) over 100 lines, decorators excluded
  loose       modules directly under src/gputui, `__init__` and `__main__` excluded
  any         occurrences of the word `Any` in the .py files
Usage: python scripts/structure_counts.py [--src DIR] [-v]   (-v also lists what was counted)
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

MAX_FUNCTION_LINES = 100
CYCLE_LIMIT = 10_000
"""Stop enumerating beyond this many cycles: the count then reads as a lower bound."""


def module_files(src: Path) -> dict[str, Path]:
    """Every module's dotted name and its file (`src` is the package directory, e.g. src/gputui)."""
    found: dict[str, Path] = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The known modules a file imports anywhere in it (module level, `if`, functions)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            candidates = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        found.update(name for name in candidates if name in known)
    return found


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules it imports (a package: what its `__init__` imports)."""
    known = set(files)
    return {module: imported_modules(path, known) - {module} for module, path in files.items()}


def cycle_groups(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group: list[str] = []
                    while not group or group[-1] != node:
                        group.append(stack.pop())
                        on_stack.discard(group[-1])
                    if len(group) > 1:
                        groups.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(groups)


def elementary_cycles(graph: dict[str, set[str]]) -> Iterator[list[str]]:
    """Each simple cycle once, rooted at its smallest module (plain DFS; the graph is small)."""
    order = sorted(graph)
    rank = {m: i for i, m in enumerate(order)}
    for start in order:
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph[node], reverse=True):
                if nxt == start:
                    yield [*path, start]
                elif rank[nxt] > rank[start] and nxt not in path:
                    stack.append((nxt, [*path, nxt]))


def long_functions(files: dict[str, Path]) -> list[str]:
    """`module:function (lines)` for each function longer than MAX_FUNCTION_LINES."""
    found: list[str] = []
    for module, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found.append(f"{module}:{node.name} ({lines})")
    return found


def mixins(files: dict[str, Path]) -> list[str]:
    """`module:Class` for each class named as a mixin."""
    return [
        f"{module}:{node.name}"
        for module, path in files.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.name.endswith("Mixin")
    ]


def loose_modules(src: Path) -> list[str]:
    """Modules directly in the package directory, not counting `__init__` and `__main__`."""
    return sorted(p.stem for p in src.glob("*.py") if p.stem not in ("__init__", "__main__"))


def any_count(files: dict[str, Path]) -> int:
    """Occurrences of the word `Any` (imports, annotations, comments: every one)."""
    return sum(len(re.findall(r"\bAny\b", path.read_text())) for path in files.values())


def main() -> None:
    """Print the counts, one per line (`name value`), then with -v what each one counted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_src = Path(__file__).resolve().parents[1] / "src" / "gputui"
    parser.add_argument("--src", type=Path, default=default_src, help="the package directory")
    parser.add_argument("-v", "--verbose", action="store_true", help="list what was counted")
    args = parser.parse_args()
    files = module_files(args.src)
    graph = import_graph(files)
    paths: list[list[str]] = []
    for cycle in elementary_cycles(graph):
        paths.append(cycle)
        if len(paths) >= CYCLE_LIMIT:
            break
    details = {
        "cycles": [", ".join(group) for group in cycle_groups(graph)],
        "paths": [" -> ".join(c) for c in paths],
        "mixins": mixins(files),
        "long": long_functions(files),
        "loose": loose_modules(args.src),
    }
    for name, items in details.items():
        bound = "+" if name == "paths" and len(items) >= CYCLE_LIMIT else ""
        sys.stdout.write(f"{name:7} {len(items)}{bound}\n")
    sys.stdout.write(f"{'any':7} {any_count(files)}\n")
    if args.verbose:
        for name, items in details.items():
            sys.stdout.write("".join([f"\n{name}:\n", *(f"  {item}\n" for item in items)]))


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # piped into `head`
        sys.stderr.close()
