"""Typed failures of the job operations, shared by the CLI (exit codes), the API (HTTP codes)
and the Python client: the one list of them (``from jobctl import SpecError`` ...).

Every exception the client raises on purpose is a :class:`JobsError`; its ``exit_code`` is
the code ``jobs`` exits with for the same failure, and the HTTP API answers with the status
in the last column:

=========================  =========  ==========================================  ======
exception                  exit_code  raised when                                 HTTP
=========================  =========  ==========================================  ======
:class:`JobsError`         1          the base class (catch-all)
:class:`SpecError`         2          bad input: a spec field, a note, a pause     422
                                      time, an unknown profile; ``problems`` is a
                                      list of (field, reason)
:class:`JobNotFound`       3          no job with that id                          404
:class:`JobExists`         4          the id is taken by a different request       409
:class:`InvalidTransition` 5          the job's state forbids the control (trigger 409
                                      a finished job, requeue a job not dead)
:class:`TemporalUnavailable` 6        Temporal cannot be reached, or no worker     503
                                      processed a control in time
:class:`TemporalBusy`      6          a subclass: Temporal refused for load (a     503
                                      rate limit); the same call a moment later
                                      usually succeeds
=========================  =========  ==========================================  ======

Waiting in :meth:`jobctl.JobHandle.result` past its ``timeout`` raises the
built-in :class:`TimeoutError` (the job is fine, the caller stopped waiting).
"""

from __future__ import annotations

from jobctl.connection.errors import JobsError, SpecError, TemporalUnavailable

__all__ = [
    "EXIT_CODES",
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


# Each exception class and the CLI exit code it carries (the same as ``cls.exit_code``).
EXIT_CODES: dict[type[JobsError], int] = {
    cls: cls.exit_code
    for cls in (
        JobsError,
        SpecError,
        JobNotFound,
        JobExists,
        InvalidTransition,
        TemporalUnavailable,
        TemporalBusy,
    )
}
