"""gputui.telemetry."""
