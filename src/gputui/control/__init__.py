"""What drives a session: step limits, the auto sweep, repeats, burst and queue verdicts."""
