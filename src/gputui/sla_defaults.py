"""The SLA's defaults, importable without numpy (the CLI's --help reads them)."""

from __future__ import annotations

from typing import Final

DEFAULT_MAX_ERROR_RATE: Final = 0.05
"""The error-rate bound of `run`, `tui` and `demo` when no flag or scenario gives one (issue 31):
the seeds' 错误率 is part of every verdict, so failures never vanish from one. 5 %, because a
verdict judges the Wilson interval of the failures (docs/domain.md §8): a step without failures
proves 5 % on 73 requests, about what its P95 needs (59), where 1 % would need 381 and leave most
steps undecided. A scenario or `--max-error-rate` sets a stricter one (shipped scenarios: 1 %).
"""
