"""Finding the array library at run time: PyTorch, then CuPy (or the one asked for), or NumPy.

Contract: `open_runtime(choice, command)` returns a `Runtime` that sees a CUDA device, or raises
`NodeUnavailable` with one line saying what is missing. `_import_optional` is the one place torch
and cupy are imported (through `importlib`), so tests can make them absent. Kept apart from
`backends`, which the runtimes themselves import (no import cycle).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from gputui.node.backends import INSTALL_HINT, NodeUnavailable, Runtime


def _import_optional(name: str) -> tuple[ModuleType | None, str | None]:
    """(module, None) or (None, why): the one place torch and cupy are imported."""
    try:
        return importlib.import_module(name), None
    except ImportError as exc:
        return None, f"{name} not installed ({exc})"
    except OSError as exc:  # a wheel whose CUDA libraries do not load
        return None, f"{name} cannot load: {exc}"


def open_runtime(choice: str, command: str) -> Runtime:
    """The array library to use: "auto" (PyTorch, then CuPy), "torch", "cupy" or "numpy"."""
    if choice == "numpy":
        from gputui.node.hostmem import NumpyRuntime

        return NumpyRuntime()
    wanted = ("torch", "cupy") if choice == "auto" else (choice,)
    found: list[str] = []
    for name in wanted:
        module, _why = _import_optional(name)
        if module is None:
            continue
        runtime: Runtime
        if name == "torch":
            from gputui.node.cuda import TorchRuntime

            runtime = TorchRuntime(module)
        else:
            from gputui.node.cuda import CupyRuntime

            runtime = CupyRuntime(module)
        reason = runtime_problem(runtime)
        if reason is None:
            return runtime
        found.append(reason)
    if not found:
        needs = "PyTorch or CuPy" if choice == "auto" else {"torch": "PyTorch"}.get(choice, "CuPy")
        raise NodeUnavailable(f"{command} needs {needs} ({INSTALL_HINT})")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    hint = "" if visible is None else f"; CUDA_VISIBLE_DEVICES={visible!r}"
    raise NodeUnavailable(f"no CUDA GPU visible ({'; '.join(found)}{hint})")


def runtime_problem(runtime: Runtime) -> str | None:
    """Why this library cannot run the check here (no device), or None."""
    try:
        count = len(runtime.devices())
    except RuntimeError as exc:  # CUDA driver missing or broken: the library says so
        return f"{runtime.name} {runtime.version}: {str(exc).splitlines()[0]}"
    if count == 0:
        return f"{runtime.name} {runtime.version} sees no CUDA device"
    return None
