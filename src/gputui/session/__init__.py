"""The session both front ends drive, and its parts (no argparse, no Textual).

`Session` and `StatsFrame` are re-exported here: callers import them from `gputui.session`.
"""

from gputui.session.facade import Session as Session
from gputui.session.frames import StatsFrame as StatsFrame

__all__ = ["Session", "StatsFrame"]
