"""The settings dialog: the SLA bounds, the error-rate bound and the price, changed mid-session.

Enter in any field checks them all (`ui.terms_input`): a mistake stays on screen as one line
under the fields, and the dialog stays open; good values close it with the new `SessionTerms`
(the live screen hands them to the source, which re-judges the finished steps). Escape cancels.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from gputui.metrics.sla_terms import SessionTerms
from gputui.ui.terms_input import TermsError, field_texts, parse_terms

FIELDS = (
    ("ttft", "TTFT p95 ≤", "e.g. 1s, 800ms"),
    ("tpot", "TPOT p95 ≤", "e.g. 35ms"),
    ("e2e", "E2E p95 ≤", "e.g. 20s (none: no bound)"),
    ("ttfat", "TTFAT p95 ≤", "e.g. 5s (answer after thinking)"),
    ("errors", "error rate ≤", "e.g. 1% or 0.01"),
    ("price", "price per hour", "e.g. 7 (none: no cost)"),
)
"""(input id, label, placeholder) of each field, in screen order."""

TEXT_ORDER = ("ttft", "tpot", "errors", "price", "e2e", "ttfat")
"""The input ids in the order `parse_terms` takes them and `field_texts` gives them."""


class SessionSettingsScreen(ModalScreen[SessionTerms | None]):
    """Edit the SLA bounds and the price; enter applies, esc cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "escape", "cancel", "Cancel", id="cancel_settings", tooltip="Back, nothing changed"
        ),
    ]

    def __init__(self, terms: SessionTerms) -> None:
        super().__init__()
        self._terms = terms

    def compose(self) -> ComposeResult:
        """Title, the labelled fields, the error line, the hint."""
        values = dict(zip(TEXT_ORDER, field_texts(self._terms), strict=True))
        with Vertical(id="settings-dialog", classes="dialog"):
            yield Label("SLA and price (finished steps are re-judged)", classes="dialog-title")
            for field_id, label, hint in FIELDS:
                value = values[field_id]
                with Horizontal(classes="settings-row"):
                    yield Label(label, classes="settings-label")
                    # compact: six fields and the hint fit an 80x24 terminal
                    yield Input(
                        value=value,
                        placeholder=hint,
                        id=field_id,
                        select_on_focus=True,
                        compact=True,
                    )
            yield Static("", id="settings-error")
            yield Static(
                "units: 1s 350ms · 1% · none = no bound  ·  enter apply · tab next · esc cancel",
                classes="dialog-hint",
            )

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Check every field; apply, or say what is wrong in one line."""
        event.stop()
        texts = [self.query_one(f"#{field_id}", Input).value for field_id in TEXT_ORDER]
        error = self.query_one("#settings-error", Static)
        try:
            terms = parse_terms(*texts)
        except TermsError as exc:
            error.update(str(exc))
            return
        self.dismiss(terms)

    def action_cancel(self) -> None:
        """Change nothing."""
        self.dismiss(None)
