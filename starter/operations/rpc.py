"""Temporal's failures as the typed errors of :mod:`starter.errors`, and how long a read waits.

Every operation runs its RPCs inside :func:`temporal_errors`, so callers (CLI exit codes, HTTP
statuses) never see a raw SDK error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from temporalio.service import RPCError, RPCStatusCode

from jobctl.starter.errors import (
    InvalidTransition,
    JobNotFound,
    SpecError,
    TemporalBusy,
    TemporalUnavailable,
)

QUERY_TIMEOUT = timedelta(seconds=10)


@asynccontextmanager
async def temporal_errors(job_id: str | None = None) -> AsyncIterator[None]:
    """Translate SDK failures into :mod:`starter.errors`."""
    try:
        yield
    except RPCError as err:
        refused = err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT)
        if refused and job_id is not None:
            raise JobNotFound(f"no job with id {job_id!r}") from err
        if err.status == RPCStatusCode.INVALID_ARGUMENT:  # a malformed query or token
            raise SpecError([("request", err.message)]) from err
        if err.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            raise TemporalUnavailable(f"Temporal is unreachable: {err.message}") from err
        if err.status == RPCStatusCode.RESOURCE_EXHAUSTED:
            raise TemporalBusy(f"Temporal is busy ({err.message}); try again shortly") from err
        raise


def closed_meanwhile(err: RPCError) -> bool:
    """Whether a refused update or signal means the job closed between our describe and it:
    the server answers "workflow execution already completed", or NOT_FOUND for the update
    (seen in CI: "update <id> not found", the run completed with the update in flight). The
    job was there a moment ago, so it has finished; it is not a job that never existed."""
    return err.status == RPCStatusCode.NOT_FOUND or "completed" in err.message.lower()


@asynccontextmanager
async def finished_meanwhile(job_id: str, action: str) -> AsyncIterator[None]:
    """Around an update or signal to a job just described as open: a refusal that means it
    closed meanwhile (:func:`closed_meanwhile`) becomes InvalidTransition "has finished"."""
    try:
        yield
    except RPCError as err:
        if closed_meanwhile(err):
            raise InvalidTransition(f"cannot {action}: job {job_id!r} has finished") from err
        raise
