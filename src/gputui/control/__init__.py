"""What drives a session: step-end rules, plans and the one runner; repeats, bursts, queues."""
