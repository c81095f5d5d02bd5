"""Inter-arrival times for the open loop: Poisson, constant, or gamma (burstier or smoother).

Gamma with shape k and mean 1/R is the convention of `vllm bench serve --burstiness k`: k = 1 is
Poisson, k < 1 burstier, k > 1 more regular. Gaps are drawn from a seeded generator so that the same
seed gives the same schedule.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Arrival = Literal["poisson", "constant", "gamma"]


class ArrivalProcess:
    """Draws the gap to the next arrival, in ns, for a rate that may change between draws."""

    def __init__(self, kind: Arrival, *, burstiness: float = 1.0, seed: int = 0) -> None:
        if burstiness <= 0:
            raise ValueError("burstiness must be > 0")
        self.kind = kind
        self.burstiness = burstiness
        self._rng = np.random.default_rng(seed)

    def gap_ns(self, rate_per_s: float) -> int:
        """Nanoseconds until the next arrival at `rate_per_s` requests per second."""
        mean_s = 1.0 / rate_per_s
        if self.kind == "constant":
            gap_s = mean_s
        elif self.kind == "poisson":
            gap_s = float(self._rng.exponential(mean_s))
        else:
            shape = self.burstiness
            gap_s = float(self._rng.gamma(shape, mean_s / shape))
        return int(gap_s * 1e9)
