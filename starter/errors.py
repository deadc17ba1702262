"""Typed failures of the job operations, shared by the CLI (exit codes) and the API (HTTP codes)."""

from __future__ import annotations

from connection.errors import JobsError, SpecError, TemporalUnavailable

__all__ = [
    "InvalidTransition",
    "JobExists",
    "JobNotFound",
    "JobsError",
    "SpecError",
    "TemporalUnavailable",
]


class JobNotFound(JobsError):
    exit_code = 3


class JobExists(JobsError):
    exit_code = 4


class InvalidTransition(JobsError):
    """The job is not in a state where this control applies (e.g. trigger a finished job)."""

    exit_code = 5
