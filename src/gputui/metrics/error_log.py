"""The server's own words for failed requests, and when a step is flooded with rejections.

A step whose requests the server rejects (HTTP 4xx: a prompt over the context, an unknown model, a
field it does not take) measures nothing about load: every further request is rejected too. So:

- `first_messages(records)`: per failure reason, the first `MESSAGES_PER_REASON` distinct messages
  (the engine keeps the server's message in `error_detail`, e.g. vLLM's 400 JSON
  `{"error": {"message": ...}}`), for the step's snapshot entry and its verdict;
- `flood_reason(records)`: why the step should end early, when `FLOOD_STREAK` requests in a row
  were rejected with a 4xx, or at least `FLOOD_SHARE` of at least `FLOOD_MIN` requests were. 408
  and 429 are load (a timeout, a rate limit), not rejections of what was sent, and do not count;
- `errors_text(counts, messages)`: "http_400 x 976: 'This model's maximum context length ...'",
  and `said_text(messages)`, a line per message, for the verdict and the step's warnings;
- `step_error_evidence(records, result)`: the `errors` rule's fields of `metrics.bottleneck`;
- `ErrorLog`: the same, kept live from every batch of records (thread-safe), for the event log
  (each distinct message once, at most `MESSAGES_PER_REASON` per reason), the step loop
  (`flooded(step)`: `gputui run` ends the step and the sweep, the TUI pauses) and the run's last
  line (`run_verdict`: `gputui run` then exits 1).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Final, TypedDict

from gputui.engine.records import RequestRecord

MESSAGES_PER_REASON: Final = 3
FLOOD_STREAK: Final = 16
"""Rejections in a row that end a step."""
FLOOD_MIN: Final = 32
FLOOD_SHARE: Final = 0.9
_LOAD_STATUSES: Final = (408, 429)
_MESSAGE_CHARS: Final = 400
_ANNOUNCED_MAX: Final = 12
"""Distinct messages shown in the event log per session (a server may put an id in each)."""


def is_rejection(record: RequestRecord) -> bool:
    """The server refused the request itself (HTTP 4xx but a timeout or a rate limit)."""
    status = record.status_code
    return (
        not record.ok
        and status is not None
        and 400 <= status < 500
        and status not in _LOAD_STATUSES
    )


def _message(record: RequestRecord) -> str | None:
    detail = (record.error_detail or "").strip()
    if not detail:
        return None
    return detail if len(detail) <= _MESSAGE_CHARS else detail[: _MESSAGE_CHARS - 3] + "..."


def first_messages(records: Iterable[RequestRecord]) -> dict[str, list[str]]:
    """Per reason, the first few distinct messages of the failed records (in arrival order)."""
    found: dict[str, list[str]] = {}
    for record in records:
        if record.ok or record.error is None:
            continue
        message = _message(record)
        seen = found.setdefault(record.error, [])
        if message is not None and message not in seen and len(seen) < MESSAGES_PER_REASON:
            seen.append(message)
    return {reason: messages for reason, messages in found.items() if messages}


def flood_reason(records: Sequence[RequestRecord]) -> str | None:
    """Why a step's requests show it flooded with rejections (module contract); None if not."""
    ordered = sorted(records, key=lambda r: r.end_ns)
    streak = 0
    for record in ordered:
        streak = streak + 1 if is_rejection(record) else 0
    rejected = [r for r in ordered if is_rejection(r)]
    if streak >= FLOOD_STREAK:
        what = f"{streak} requests in a row"
    elif len(ordered) >= FLOOD_MIN and len(rejected) >= FLOOD_SHARE * len(ordered):
        what = f"{len(rejected)} of {len(ordered)} requests"
    else:
        return None
    reasons = Counter(r.error for r in rejected if r.error is not None)
    named = ", ".join(reason for reason, _ in reasons.most_common(3)) or "HTTP 4xx"
    return f"{what} were rejected ({named}): the server refuses what is sent, not the load"


def _quote(message: str) -> str:
    """The server's words in quotes, without the "HTTP 400: " the engine put in front."""
    text = message.removeprefix("HTTP ").split(": ", 1)
    body = text[1] if len(text) == 2 and text[0].isdigit() else message
    return f"'{body}'"


def said_text(messages: dict[str, list[str]]) -> list[str]:
    """One line per kept message: "http_400: the server said 'This model's ...'"."""
    return [f"{reason}: the server said {_quote(m)}" for reason, ms in messages.items() for m in ms]


def errors_text(counts: dict[str, int], messages: dict[str, list[str]]) -> str:
    """'http_400 x 976: 'This model's ...'; timeout x 2' (most frequent first)."""
    parts = []
    for reason, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        said = messages.get(reason) or []
        parts.append(f"{reason} x {count}" + (f": {_quote(said[0])}" if said else ""))
    return "; ".join(parts)


class ErrorEvidence(TypedDict):
    """The `errors` rule's fields of `StepEvidence`."""

    step_requests: int
    step_errors: dict[str, int]
    step_rejections: int
    error_messages: dict[str, list[str]] | None
    ended_early: str | None


def step_error_evidence(
    records: Sequence[RequestRecord],
    error_messages: dict[str, list[str]] | None,
    ended_early: str | None,
) -> ErrorEvidence:
    """The `errors` rule's fields for a step's records and what its StepResult says of them."""
    failed = Counter(r.error or "unknown" for r in records if not r.ok)
    return ErrorEvidence(
        step_requests=len(records),
        step_errors=dict(failed),
        step_rejections=sum(1 for r in records if is_rejection(r)),
        error_messages=error_messages,
        ended_early=ended_early,
    )


class ErrorLog:
    """Live account of failures per step (module contract); one instance per session."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_step: dict[int, list[RequestRecord]] = {}
        self._announced: set[tuple[str, str]] = set()
        self._pending: list[str] = []
        self._flooded: dict[int, str] = {}

    def add(self, records: Iterable[RequestRecord]) -> None:
        """Take a batch of finished records (the engine's reader thread)."""
        with self._lock:
            touched: set[int] = set()
            for record in records:
                self._by_step.setdefault(record.step_index, []).append(record)
                touched.add(record.step_index)
                if record.ok or record.error is None:
                    continue
                message = _message(record)
                key = (record.error, message or "")
                shown = sum(1 for reason, _ in self._announced if reason == record.error)
                fresh = key not in self._announced and shown < MESSAGES_PER_REASON
                if message is not None and fresh and len(self._announced) < _ANNOUNCED_MAX:
                    self._announced.add(key)
                    self._pending.append(f"{record.error}: {_quote(message)}")
            for step in touched:
                if step not in self._flooded:
                    reason = flood_reason(self._by_step[step][-2 * FLOOD_MIN :])
                    if reason is not None:
                        self._flooded[step] = reason
                        self._pending.append(f"step {step + 1} flooded: {reason}")
                self._by_step[step] = self._by_step[step][-2 * FLOOD_MIN :]

    def new_messages(self) -> list[str]:
        """Messages not yet shown, each distinct one once ("http_400: 'This model's ...'")."""
        with self._lock:
            pending, self._pending = self._pending, []
        return pending

    def flooded(self, step_index: int) -> str | None:
        """Why the step should end early (`flood_reason`), or None."""
        with self._lock:
            return self._flooded.get(step_index)

    def run_verdict(self) -> str | None:
        """One line for the end of a run when a step was flooded (the run then fails), or None."""
        with self._lock:
            flooded = sorted(self._flooded.items())
        if not flooded:
            return None
        step, reason = flooded[0]
        with self._lock:
            said = first_messages(r for r in self._by_step.get(step, ()) if is_rejection(r))
        first = said_text(said)[:1]
        return f"the run stopped at step {step + 1}, flooded with rejections: {reason}" + (
            f"; {first[0]}" if first else ""
        )
