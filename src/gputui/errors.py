"""Typed errors that the CLI turns into one line and an exit code (never a traceback)."""

from __future__ import annotations


class GputuiError(Exception):
    """Base of every error gputui reports to the user as one line."""

    exit_code = 1


class UsageError(GputuiError):
    """A bad flag or argument value."""

    exit_code = 2


class FlagError(UsageError):
    """A bad combination of flags: the CLI reports it through the subcommand's parser (exit 2)."""


class ServerUnreachable(GputuiError):
    """The target did not answer before any load was sent."""


class ModelNotServed(GputuiError):
    """The target answers but does not list the requested model."""


class SnapshotError(GputuiError):
    """A snapshot file is missing, corrupt, or of an unknown schema version."""


class TelemetryUnavailable(GputuiError):
    """A telemetry source (NVML, nvidia-smi, an exporter, a /metrics endpoint) cannot be read."""


class NvmlUnavailable(TelemetryUnavailable):
    """NVML cannot be used here: no nvidia-ml-py, no driver library, or no NVIDIA GPU."""


class MetricsUnavailable(TelemetryUnavailable):
    """A Prometheus endpoint is unreachable, answers an error, or does not speak Prometheus text."""


class EngineFailed(GputuiError):
    """The load engine process could not start or died."""
