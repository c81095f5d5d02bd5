"""Fakes injected at the ports of gputui (NVML, ...)."""
