"""gputui: live LLM serving-load experiments in the terminal.

Importing this package loads nothing heavy (no textual, rich or httpx): the CLI imports what each
subcommand needs.
"""

__version__ = "0.1.0"
