"""Where a closed-loop step's rates stop reading: at a whole number of request cycles.

Contract: `whole_cycles_end(closed_loop, lo_ns, hi_ns, cycle_ns)` is the end of the window that
a step's rates (output, good output, input tokens and requests per second, and their intervals)
are read over: `hi_ns` in open loop, with no cycle, or when [lo_ns, hi_ns) is shorter than one
cycle; otherwise lo_ns plus the most whole cycles that fit (the rest, under one cycle, is left
out of the rates only). `metrics.step` takes the cycle as the mean E2E of the step's measured ok
requests: in a closed loop each user sends its next request as its last one ends.

Why: a closed loop of fixed-length requests is periodic, each user sending its next request as
its last ends, so the tokens it streams rise and fall with the period of one request's lifetime
(prefills stall the decodes of the others). The window opens at a fixed phase of that period (the
first wave's end: `metrics.steady`), so a window of 2.4 periods reads a different rate from one of
2 or 7: on the simulator, 15-60 s windows of the same run read 875-1083 tok/s where whole cycles
read 976-978 at every length from one to seven. Read over whole cycles, a step gives the same
rate at any length, as the issue asks ("the same answer at any pace"). With varied lengths there is
no period, and the trim only leaves out less than one lifetime of the window.
"""

from __future__ import annotations


def whole_cycles_end(closed_loop: bool, lo_ns: int, hi_ns: int, cycle_ns: float) -> int:
    """The end of the rates' window (module contract)."""
    if not closed_loop or hi_ns < 0 or not cycle_ns > 0 or hi_ns - lo_ns < cycle_ns:
        return hi_ns
    return lo_ns + int((hi_ns - lo_ns) // cycle_ns * cycle_ns)
