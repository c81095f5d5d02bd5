"""gputui.sim."""
