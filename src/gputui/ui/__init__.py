"""gputui.ui."""
