"""The core never imports the UI toolkit, `import gputui` stays light, imports form no cycle.

Each core module is imported on its own, in a process that had imported no gputui module before:
importing only a package's `__init__` would miss a module that drags in rich through a dependency
(httpx's CLI did, in ten modules). One clean interpreter imports the third-party libraries the core
uses (checked not to load the toolkit themselves), then forks a child per module: the same verdict
as a fresh interpreter per module, without paying numpy's and pydantic's import ~200 times.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import gputui

SRC = Path(__file__).resolve().parents[2] / "src" / "gputui"
BANNED = ("textual", "rich")
FRONT_END = (
    "gputui.ui",
    "gputui.cli",
    "gputui.frontends.demo",
    "gputui.__main__",
    "gputui.node.__main__",
)
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


PRELOAD = (
    # Importing any gputui module runs the package's __init__ first (it keeps httpx's CLI, and so
    # rich, out): it comes first here too.
    "gputui",
    "asyncio",
    "multiprocessing",
    "numpy",
    "httpx",
    "httptools",
    "pydantic",
    "orjson",
    "prometheus_client",
    "platformdirs",
    "uvloop",
    "pynvml",
)
"""What the core imports from outside gputui, loaded once before the forks (where installed)."""

_FORK_CHECKER = r"""
import importlib, json, os, sys
banned, modules, preload = json.loads(sys.stdin.read())
found = {}
for name in preload:
    try:
        importlib.import_module(name)
    except ImportError:
        continue
    loaded = [m for m in banned if m in sys.modules]
    if loaded:  # the preload itself loads the toolkit: no child could be judged
        print(json.dumps({"preload " + name: "loads " + ",".join(loaded)}))
        sys.exit(0)
sys.stdout.flush()
running = {}  # child pid -> (module, the read end of its pipe)
def reap():
    pid, status = os.wait()
    module, read = running.pop(pid)
    with os.fdopen(read, "rb") as pipe:  # a verdict is a line: it fits the pipe's buffer
        found[module] = pipe.read().decode() or None
    if status != 0:  # died in the import (a crash in an extension, say): not a clean import
        found[module] = f"import crashed (wait status {status})"
for module in modules:
    if len(running) >= max(2, os.cpu_count() or 1):
        reap()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(module)
            loaded = ",".join(m for m in banned if m in sys.modules)
            verdict = "loads " + loaded if loaded else ""
        except BaseException as exc:
            verdict = "import failed: " + repr(f"{type(exc).__name__}: {exc}")
        os.write(write, verdict.encode())
        os._exit(0)
    os.close(write)
    running[pid] = (module, read)
while running:
    reap()
print(json.dumps(found))
"""


def _modules_loading_ui(modules: list[str]) -> dict[str, str | None]:
    """Module -> what importing it alone loads of `BANNED` (or why it failed), None if nothing."""
    result = subprocess.run(
        [sys.executable, "-c", _FORK_CHECKER],
        input=json.dumps([BANNED, modules, PRELOAD]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    verdicts: dict[str, str | None] = json.loads(result.stdout)
    return verdicts


_ALL_IN_ONE = r"""
import importlib, json, sys
banned, modules = json.loads(sys.stdin.read())
failed = []
for module in modules:
    try:
        importlib.import_module(module)
    except BaseException as exc:
        failed.append(module)
print(json.dumps({"failed": failed, "loaded": [m for m in banned if m in sys.modules]}))
"""


def _all_core_modules_are_clean() -> bool:
    """Every core module imported in one interpreter leaves the toolkit out, and none fails.

    What one module loads, the union loads too: a clean union clears every module at once (about
    2 s against about 20 s of forks on 2 cores); only a dirty union needs the forks to name who.
    """
    result = subprocess.run(
        [sys.executable, "-c", _ALL_IN_ONE],
        input=json.dumps([BANNED, CORE_MODULES]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    union = json.loads(result.stdout)
    return not union["failed"] and not union["loaded"]


def test_no_core_module_loads_the_ui_toolkit() -> None:
    if _all_core_modules_are_clean():
        return
    verdicts = _modules_loading_ui(CORE_MODULES)
    assert set(verdicts) == set(CORE_MODULES), sorted(set(verdicts) ^ set(CORE_MODULES))
    offenders = [f"{module}: {why}" for module, why in verdicts.items() if why]
    assert offenders == []


def test_the_fork_check_sees_a_module_that_loads_the_toolkit() -> None:
    """The check can fail: a front-end module (which may load textual) is caught."""
    verdicts = _modules_loading_ui(["gputui.ui.app", "gputui.sim.fixed", "gputui.no_such_module"])
    assert verdicts["gputui.ui.app"] is not None and "textual" in verdicts["gputui.ui.app"]
    assert verdicts["gputui.sim.fixed"] is None
    assert (verdicts["gputui.no_such_module"] or "").startswith("import failed")


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


def _import_graph() -> dict[str, set[str]]:
    """Module -> the gputui modules it imports anywhere: module level, `TYPE_CHECKING`, functions.

    A package stands for its `__init__`, which may re-export its own submodules.
    """
    modules = _all_modules()
    known = set(modules)
    return {m: {n for n in _imported_names(_source(m)) if n in known} - {m} for m in modules}


def test_no_import_cycles() -> None:
    """No two modules import each other, directly or around, counting every import."""
    graph = _import_graph()
    cycles = [
        " -> ".join(_find_cycle({m: graph[m] & set(group) for m in group}) or sorted(group))
        for group in _cycle_groups(graph)
    ]
    assert sorted(cycles) == []


def _cycle_groups(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or around (the cycles' modules)."""
    groups: list[list[str]] = []
    seen: set[str] = set()
    for start in sorted(graph):
        if start in seen:
            continue
        reach = _reachable(graph, start)
        group = sorted(m for m in reach if start in _reachable(graph, m))
        seen.update(group)
        if len(group) > 1:
            groups.append(group)
    return groups


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    found = {start}
    todo = [start]
    while todo:
        for nxt in graph[todo.pop()] - found:
            found.add(nxt)
            todo.append(nxt)
    return found


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle between modules, as a path that ends where it starts (None: there is none)."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
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


RANKS: dict[str, int] = {
    "gputui": 0,
    "gputui.errors": 0,
    "gputui.durations": 0,
    "gputui.sla_defaults": 0,
    "gputui.jsontypes": 0,
    "gputui.folders": 0,
    "gputui.catalog": 0,
    "gputui.engine": 1,
    "gputui.metrics": 1,
    "gputui.telemetry": 1,
    "gputui.sim": 1,
    "gputui.workloads": 2,
    "gputui.diagnosis": 2,
    "gputui.node": 2,
    "gputui.session": 3,
    "gputui.control": 4,
    "gputui.snapshot": 5,
    "gputui.settings": 6,
    "gputui.frontends": 7,
    "gputui.ui": 8,
    "gputui.cli": 9,
    "gputui.__main__": 10,
    "gputui.node.__main__": 10,
}
"""design.md's package order: a module imports only modules of its own rank or below."""
SNAPSHOT_DATA = {
    "gputui.snapshot": 2,
    "gputui.snapshot.models": 2,
    "gputui.snapshot.sections": 2,
    "gputui.snapshot.step_models": 2,
    "gputui.snapshot.store": 2,
    "gputui.snapshot.journal": 2,
}
"""The snapshot's schema and its files sit with the data the lower packages record into them;
assembling, comparing and recovering sessions sit above the session (design.md)."""
ORDER_EXCEPTIONS = {("gputui.frontends.demo", "gputui.ui.command")}
"""`gputui demo` starts either front end: the TUI's own runner, imported when it is chosen."""


def _ranked_as(module: str) -> str | None:
    """The entry of RANKS a module falls under (the root `gputui` covers only its `__init__`)."""
    under = [p for p in RANKS if module == p or (p != "gputui" and module.startswith(p + "."))]
    return max(under, key=len) if under else None


def _rank(module: str) -> int:
    if module in SNAPSHOT_DATA:
        return SNAPSHOT_DATA[module]
    entry = _ranked_as(module)
    assert entry is not None, f"{module} has no rank: add it to RANKS"
    return RANKS[entry]


def test_every_package_has_a_rank() -> None:
    assert [m for m in _all_modules() if _ranked_as(m) is None] == []


def test_imports_follow_the_package_order() -> None:
    upward = [
        f"{module} -> {name}"
        for module, names in _import_graph().items()
        for name in sorted(names)
        if _rank(name) > _rank(module) and (module, name) not in ORDER_EXCEPTIONS
    ]
    assert upward == []


ARGPARSE_LEFT: set[str] = set()
"""Modules outside `gputui.cli` that still read argparse (none: the CLI builds typed options)."""


def test_argparse_stops_at_the_cli() -> None:
    """Only `gputui.cli` parses flags: everything past it takes the typed Settings tree."""
    readers = {
        module
        for module in _all_modules()
        if module != "gputui.cli" and not module.startswith("gputui.cli.")
        if "argparse" in _imported_names(_source(module))
    }
    assert sorted(readers - ARGPARSE_LEFT) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "a.x": set()}
    assert _find_cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle_groups(graph) == [["a", "b", "c"]]
    assert _find_cycle({"a": {"a.x"}, "a.x": set()}) is None
    # A package's module that imports its own package, which re-exports it: a cycle.
    assert _cycle_groups({"p": {"p.m"}, "p.m": {"p"}}) == [["p", "p.m"]]


def test_the_walk_counts_imports_in_functions_and_type_checking(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from gputui.session import Session\n"
        "def f() -> None:\n    from gputui.control.auto import AutoControl\n"
    )
    assert {"gputui.session", "gputui.control.auto"} <= set(_imported_names(path))


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
