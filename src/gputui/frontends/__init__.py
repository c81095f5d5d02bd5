"""The front ends' wiring: `gputui run` (headless), the TUI's live controller, the view, demo."""
