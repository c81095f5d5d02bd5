"""gputui: live LLM serving-load experiments in the terminal.

Importing this package loads nothing heavy (no textual, rich or httpx): the CLI imports what each
subcommand needs.

httpx's package `__init__` imports its own command-line tool when it can, and that tool imports
rich, click and pygments: any core module using httpx would load the UI toolkit. A `None` entry in
`sys.modules` makes that one optional import fail as httpx expects (its `main` then only says the
CLI is not installed), so the engine side stays free of rich. No gputui code uses httpx's CLI.
"""

import sys

sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

__version__ = "0.1.0"
