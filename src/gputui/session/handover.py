"""The hand-over as the live view shows it: "step 7 closing: 12 requests finishing at 64, ~4 s".

Also the loop's hand-over rules (`handover_waits`, `handover_cut_event`, up to `HANDOVER_MAX_S`)
and the burst's own event once all its requests are back (`bursts_back`).

Contract: `handover_state(ledger, now_ns)` (pure, on the session loop's thread) is None unless a
step is pending (`session.ledger.StepLedger.pending`); then it names the last step still waiting
for its measured requests, how many of its requests are out, and about how long they need: the
P90 of its finished requests' E2E less the time since it closed (the slow ones go last).
"""

from __future__ import annotations

import numpy as np

from gputui.engine.records import RequestRecord
from gputui.session.events import Event, burst_event
from gputui.session.frames import Handover
from gputui.session.ledger import StepLedger

_ETA_QUANTILE = 90.0
HANDOVER_MAX_S = 60.0
"""The longest the next level waits for the last step's measured requests: past it, those
still out finish under the next level (`handover_cut_event` says how many)."""


def handover_waits(ledger: StepLedger, now_ns: int) -> bool:
    """Whether the pending step's level must still wait (steps before it are unfinished)."""
    waiting = ledger.handing_over()
    closed_ns = min((s.end_ns for s in waiting), default=now_ns)
    return bool(waiting) and now_ns - closed_ns < HANDOVER_MAX_S * 1e9


def handover_cut_event(ledger: StepLedger) -> Event | None:
    """The warning when the next level starts with measured requests still out (the cap)."""
    waiting = ledger.handing_over()
    left = sum(ledger.outstanding(s.index) for s in waiting)
    if not left:
        return None
    text = f"hand-over cut at {HANDOVER_MAX_S:g} s: {left} measured requests of step"
    return "warning", f"{text} {waiting[-1].index + 1} finish under the next level"


def ends(records: list[RequestRecord]) -> list[int]:
    """When each of `records` ended."""
    return [r.end_ns for r in records]


def bursts_back(ledger: StepLedger, told: set[int]) -> list[Event]:
    """The events of the bursts whose requests are all back since the last call (`told`)."""
    events: list[Event] = []
    for index, (count, fired_ns) in list(ledger.bursts.items()):
        back = ledger.burst_records(index)
        if index >= 0 and index not in told and len(back) >= count:
            told.add(index)
            events.append(burst_event(ledger.specs[index], count, fired_ns, back))
            if index in ledger.resettled:
                # A fixed warm-up may have opened the window already: it starts after the burst.
                start = max(ledger.specs[index].measure_start_ns, *ends(back))
                ledger.move_measure_start(index, start)
    return events


def handover_state(ledger: StepLedger, now_ns: int) -> Handover | None:
    """The hand-over under way at `now_ns`, if any (module contract)."""
    index = ledger.pending
    if index is None:
        return None
    waiting = ledger.handing_over()
    if not waiting:
        return None  # the next batch starts the level
    closing = waiting[-1]
    records = ledger.records.get(closing.index, [])
    e2e_ns = [r.end_ns - r.sent_ns for r in records if r.ok]
    eta_s = None
    if e2e_ns:
        lifetime_ns = float(np.percentile(np.asarray(e2e_ns, dtype=np.float64), _ETA_QUANTILE))
        eta_s = max(lifetime_ns - (now_ns - closing.end_ns), 0.0) / 1e9
    return Handover(
        index=closing.index,
        level=closing.level,
        requests_left=sum(ledger.outstanding(s.index) for s in waiting),
        eta_s=eta_s,
        next_level=ledger.specs[index].level,
    )
