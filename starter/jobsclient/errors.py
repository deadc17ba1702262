"""The client's exceptions: the operations library's own typed errors, re-exported.

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

Waiting in :meth:`~starter.jobsclient.JobHandle.result` past its ``timeout`` raises the
built-in :class:`TimeoutError` (the job is fine, the caller stopped waiting).
"""

from __future__ import annotations

from jobctl.starter.errors import (
    InvalidTransition,
    JobExists,
    JobNotFound,
    JobsError,
    SpecError,
    TemporalBusy,
    TemporalUnavailable,
)

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
