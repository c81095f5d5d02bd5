"""Requests in flight over time, one sample per published frame: written and read on the loop.

Contract: the session loop adds a sample as it publishes each frame (`session.live_frames`), and
answers the readers' questions on its own thread (`Session.in_flight_between`,
`Session.in_flight_frames`, `Session.client_saturation`), so one thread writes and reads it and
a sample is one frozen tuple: its fields can never differ in length. The validation hold's queue
verdict (`metrics.validation`), the bursts' recovery (`metrics.bursts`) and the client's
saturation (`metrics.client_state`) judge from what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gputui.metrics.client_state import ClientSaturation, client_saturation
from gputui.session.frames import StatsFrame


@dataclass(frozen=True, slots=True)
class InFlightSample:
    """One frame's requests in flight and the client's state, stamped when it was published."""

    t_ns: int
    in_flight: int
    saturated: bool
    busiest_cpu_percent: float
    contended: bool


class InFlightTrace:
    """The samples (module contract)."""

    def __init__(self, samples: list[InFlightSample] | None = None) -> None:
        self.samples: list[InFlightSample] = [] if samples is None else samples

    def add(self, frame: StatsFrame, t_ns: int) -> None:
        """A frame published at `t_ns`."""
        self.samples.append(
            InFlightSample(
                t_ns,
                frame.in_flight,
                frame.client_saturated,
                frame.busiest_worker_cpu_percent,
                frame.host_contended,
            )
        )

    def frames(self) -> tuple[list[int], list[int]]:
        """(when, requests in flight) of every frame (`metrics.bursts.burst_recoveries`)."""
        return [s.t_ns for s in self.samples], [s.in_flight for s in self.samples]

    def between(self, lo_ns: int, hi_ns: int) -> tuple[np.ndarray, np.ndarray]:
        """(t_s relative to lo, in_flight) for frames inside [lo, hi)."""
        t = np.array([s.t_ns for s in self.samples], dtype=np.int64)
        v = np.array([s.in_flight for s in self.samples], dtype=np.float64)
        mask = (t >= lo_ns) & (t < hi_ns)
        return (t[mask] - lo_ns) / 1e9, v[mask]

    def saturation(self) -> ClientSaturation:
        """How often the client itself was the bottleneck (for the snapshot and a warning)."""
        samples = self.samples
        return client_saturation(
            [s.saturated for s in samples],
            [s.contended for s in samples],
            [s.busiest_cpu_percent for s in samples],
        )
