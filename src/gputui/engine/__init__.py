"""gputui.engine."""
