"""The core never imports the UI toolkit, `import gputui` stays light, imports form no cycle.

Each core module is imported on its own in a fresh interpreter: importing only a package's
`__init__` would miss a module that drags in rich through a dependency (httpx's CLI did, in ten
modules).
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import gputui

SRC = Path(__file__).resolve().parents[2] / "src" / "gputui"
BANNED = ("textual", "rich")
FRONT_END = ("gputui.ui", "gputui.cli", "gputui.frontends.demo", "gputui.__main__")
"""Modules that may load the UI toolkit; every other module of gputui is core."""


def _all_modules() -> list[str]:
    found = pkgutil.walk_packages(gputui.__path__, prefix="gputui.")
    return sorted(["gputui", *(m.name for m in found)])


def _is_front_end(module: str) -> bool:
    return any(module == f or module.startswith(f + ".") for f in FRONT_END)


CORE_MODULES = [m for m in _all_modules() if not _is_front_end(m)]


def test_the_walk_finds_every_core_package() -> None:
    packages = {m.split(".")[1] for m in CORE_MODULES if "." in m}
    expected = {"engine", "metrics", "telemetry", "sim", "snapshot", "workloads", "node"}
    assert expected <= packages
    assert len(CORE_MODULES) > 80


def _loads_ui(module: str) -> str | None:
    code = (
        f"import sys, importlib; importlib.import_module({module!r}); "
        f"print(','.join(m for m in {BANNED!r} if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    if result.returncode != 0:
        return f"{module}: import failed: {result.stderr.strip().splitlines()[-1:]}"
    loaded = result.stdout.strip()
    return f"{module}: loads {loaded}" if loaded else None


@pytest.mark.timeout(600)
def test_no_core_module_loads_the_ui_toolkit() -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        offenders = [r for r in pool.map(_loads_ui, CORE_MODULES) if r is not None]
    assert offenders == []


def test_core_sources_do_not_name_the_ui() -> None:
    offenders = [
        f"{module}: {name}"
        for module in CORE_MODULES
        for name in _imported_names(_source(module))
        if name.split(".")[0] in BANNED or _is_front_end(name)
    ]
    assert offenders == []


def test_import_gputui_is_light() -> None:
    code = (
        "import sys, gputui; "
        "heavy = [m for m in ('textual', 'rich', 'httpx', 'numpy') if m in sys.modules]; "
        "sys.exit(1 if heavy else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def _source(module: str) -> Path:
    relative = Path(*module.split(".")[1:])
    package = SRC / relative / "__init__.py"
    return package if package.exists() else SRC / relative.with_suffix(".py")


def _imported_names(path: Path) -> list[str]:
    """Every module a file imports, at any depth (lazy imports inside functions included)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _top_level_imports(path: Path, known: set[str]) -> set[str]:
    """The gputui modules a file imports at import time (not inside functions or `if` blocks)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            candidates = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        else:
            continue
        for name in candidates:
            if name in known:
                found.add(name)
    return found


def test_no_import_cycles() -> None:
    modules = _all_modules()
    known = set(modules)
    graph = {m: _top_level_imports(_source(m), known) - {m} for m in modules}
    cycle = _find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle between modules (a package's `__init__` importing its own submodules excepted)."""
    state: dict[str, int] = {}
    path: list[str] = []

    def parent_of(child: str, parent: str) -> bool:
        return child.startswith(parent + ".")

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if parent_of(nxt, node):
                continue  # a package re-exporting its own modules
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if state.get(nxt) is None and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if state.get(start) is None and (found := visit(start)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "a.x": set()}
    assert _find_cycle(graph) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"a.x"}, "a.x": set()}) is None


def test_the_catalog_sits_below_everything() -> None:
    catalog = [m for m in CORE_MODULES if m.startswith("gputui.catalog")]
    assert {"gputui.catalog.specs", "gputui.catalog.memory"} <= set(catalog)
    outside = [
        f"{module}: {name}"
        for module in catalog
        for name in _imported_names(_source(module))
        if name.startswith("gputui") and not name.startswith("gputui.catalog")
    ]
    assert outside == []
