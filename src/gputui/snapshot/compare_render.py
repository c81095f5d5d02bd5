"""`gputui compare --format`: one comparison in any of `FORMATS`, dispatched in one place.

Kept apart from the formats themselves: the HTML report builds on the terminal table's blocks
(`compare_format`), so the dispatch sits above both (no import cycle).
"""

from __future__ import annotations

from typing import Final

from gputui.snapshot.compare import Comparison
from gputui.snapshot.compare_format import markdown, table
from gputui.snapshot.compare_records import csv_text, json_text
from gputui.snapshot.report_html import html_report

FORMATS: Final = ("table", "md", "csv", "json", "html")


def render(cmp: Comparison, fmt: str) -> str:
    """The comparison in one of `FORMATS`."""
    if fmt == "table":
        return table(cmp)
    if fmt == "md":
        return markdown(cmp)
    if fmt == "csv":
        return csv_text(cmp)
    if fmt == "json":
        return json_text(cmp)
    if fmt == "html":
        return html_report(cmp)
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
