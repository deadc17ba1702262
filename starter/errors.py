"""Typed failures of the job operations, shared by the CLI (exit codes) and the API (HTTP codes)."""

from __future__ import annotations

from jobctl.connection.errors import JobsError, SpecError, TemporalUnavailable

__all__ = [
    "InvalidTransition",
    "JobExists",
    "JobNotFound",
    "JobsError",
    "SpecError",
    "TemporalBusy",
    "TemporalUnavailable",
]


class JobNotFound(JobsError):
    exit_code = 3


class JobExists(JobsError):
    exit_code = 4


class InvalidTransition(JobsError):
    """The job is not in a state where this control applies (e.g. trigger a finished job)."""

    exit_code = 5


class TemporalBusy(TemporalUnavailable):
    """Temporal refused the call for load (RESOURCE_EXHAUSTED: a namespace rate limit, such as
    the visibility APIs' 10 calls a second per frontend by default). The server is up and the
    same call a moment later usually succeeds: the API answers 503 with ``Retry-After``."""

    retry_after = 1  # seconds
