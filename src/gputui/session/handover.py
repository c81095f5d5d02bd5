"""The hand-over as the live view shows it: "step 7 closing: 12 requests finishing at 64, ~4 s".

Contract: `handover_state(ledger, now_ns)` (pure, on the session loop's thread) is None unless a
step is pending (`session.ledger.StepLedger.pending`); then it names the last step still waiting
for its measured requests, how many of its requests are out, and about how long they need: the
P90 of its finished requests' E2E less the time since it closed (the slow ones go last).
"""

from __future__ import annotations

import numpy as np

from gputui.session.frames import Handover
from gputui.session.ledger import StepLedger

_ETA_QUANTILE = 90.0


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
