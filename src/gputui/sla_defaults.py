"""The SLA's defaults, importable without numpy (the CLI's --help reads them)."""

from __future__ import annotations

from typing import Final

DEFAULT_MAX_ERROR_RATE: Final = 0.01
"""The error-rate bound of `run`, `tui` and `demo` when no flag or scenario gives one: the seeds'
错误率 is part of every verdict, so failures never vanish from one (issue 31)."""
