"""Modal dialogs: the snapshot label, the offer to recover a session that died unsaved, yes/no."""

from __future__ import annotations

from typing import ClassVar, Literal

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from gputui.snapshot.recovery import LeftoverJournal

RecoveryChoice = Literal["recover", "discard", "later"]


class SaveSnapshotScreen(ModalScreen[str | None]):
    """Asks for the snapshot's label; Enter saves, Escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="cancel_save", tooltip="Back without saving"),
    ]

    def __init__(self, default_label: str) -> None:
        super().__init__()
        self._default = default_label

    def compose(self) -> ComposeResult:
        """Title, label input, hint."""
        with Vertical(id="dialog", classes="dialog"):
            yield Label("Save a snapshot of the finished steps", classes="dialog-title")
            yield Input(
                value=self._default,
                placeholder="label, e.g. a100 vllm bf16",
                id="label",
                select_on_focus=True,
            )
            yield Static("enter save · esc cancel", classes="dialog-hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Save with this label."""
        event.stop()
        self.dismiss(event.value.strip() or self._default)

    def action_cancel(self) -> None:
        """Do not save."""
        self.dismiss(None)


class RecoverJournalScreen(ModalScreen[RecoveryChoice]):
    """A session died without saving: recover its snapshot from the journal, or discard it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "choose('recover')", "Recover", id="recover", tooltip="Save its snapshot"),
        Binding("d", "choose('discard')", "Discard", id="discard", tooltip="Delete the journal"),
        Binding("escape", "choose('later')", "Later", id="later", tooltip="Ask again next time"),
    ]

    def __init__(self, leftovers: tuple[LeftoverJournal, ...]) -> None:
        super().__init__()
        self._leftovers = leftovers

    def compose(self) -> ComposeResult:
        """What was found and the three choices."""
        with Vertical(id="dialog", classes="dialog"):
            n = len(self._leftovers)
            title = "A session ended without saving" if n == 1 else f"{n} sessions ended unsaved"
            yield Label(title, classes="dialog-title")
            for j in self._leftovers:
                label = f" '{j.label}'" if j.label else ""
                yield Static(
                    f"{j.started_at}{label}: {j.model} at {j.target_url}, "
                    f"{j.steps} finished steps, {j.requests} requests",
                    classes="dialog-item",
                )
            yield Static(
                "r recover (rebuild and save the snapshot) · d discard · esc later",
                classes="dialog-hint",
            )

    def action_choose(self, choice: RecoveryChoice) -> None:
        """Close with the choice."""
        self.dismiss(choice)


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question (e.g. before deleting a file): y or enter confirms, n or escape not."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,enter", "answer(True)", "Yes", id="confirm_yes", tooltip="Go ahead"),
        Binding("n,escape", "answer(False)", "No", id="confirm_no", tooltip="Leave it as it is"),
    ]

    def __init__(self, question: str, detail: str = "") -> None:
        super().__init__()
        self._question = question
        self._detail = detail

    def compose(self) -> ComposeResult:
        """The question, what it is about, and the two answers."""
        with Vertical(id="dialog", classes="dialog"):
            yield Label(self._question, classes="dialog-title", markup=False)
            if self._detail:
                yield Static(self._detail, classes="dialog-item", markup=False)
            yield Static("y yes · n no", classes="dialog-hint")

    def action_answer(self, yes: bool) -> None:
        """Close with the answer."""
        self.dismiss(yes)
