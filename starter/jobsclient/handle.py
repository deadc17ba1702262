"""A handle on one job (or cron): read it, control it, wait for it to settle."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio.client import Client

from jobctl.starter import dlq, operations
from jobctl.starter.operations import Report, Scheduled
from jobctl.workflows.models import JobStatus
from jobctl.workflows.models.cron import BackfillAnswer

# The statuses a job does not leave by itself: ``result()`` returns on the first of them.
# (``dead`` waits for a human, who may requeue it; ``discarded`` and the others are final.)
SETTLED = frozenset({JobStatus.DONE, JobStatus.DEAD, JobStatus.CANCELLED, JobStatus.DISCARDED})
DEFAULT_POLL_INTERVAL = 1.0


def seconds_of(value: float | timedelta | None) -> float | None:
    """A timeout given as seconds or a timedelta, in seconds (None stays None)."""
    return value.total_seconds() if isinstance(value, timedelta) else value


class JobHandle:
    """A job or cron by id, as :meth:`JobsClient.schedule` or :meth:`JobsClient.get_handle`
    return it. Like Temporal's ``WorkflowHandle``, making one asks the server nothing: an
    unknown id raises :class:`~starter.errors.JobNotFound` (exit code 3) on first use.

    Every control records who (the client's ``actor``) and why (``note``, optional) in the
    job's audit trail, as ``jobs`` does.
    """

    def __init__(
        self,
        client: Client,
        job_id: str,
        *,
        actor: str | None = None,
        scheduled: Scheduled | None = None,
    ) -> None:
        self._client = client
        self._actor = actor
        self._scheduled = scheduled
        self.job_id = job_id

    def __repr__(self) -> str:
        return f"JobHandle(job_id={self.job_id!r})"

    @property
    def next_run_at(self) -> datetime | None:
        """When the job runs (a cron: its first slot), as scheduling answered; None on a handle
        from :meth:`JobsClient.get_handle` (ask :meth:`status`)."""
        return self._scheduled.next_run_at if self._scheduled else None

    @property
    def warnings(self) -> list[str]:
        """What scheduling warned about (e.g. no live worker serves the handler: the job
        waits for one); empty on a handle from :meth:`JobsClient.get_handle`."""
        return list(self._scheduled.warnings) if self._scheduled else []

    @property
    def created(self) -> bool | None:
        """False when scheduling found the job already created by an identical request (same
        ``id``, same fields); None on a handle from :meth:`JobsClient.get_handle`."""
        return self._scheduled.created if self._scheduled else None

    async def status(self) -> Report:
        """The job's report, the object ``jobctl status --json`` prints (``report.status`` is the
        public status, a :class:`~workflows.models.JobStatus`; ``report.attempts`` the attempt
        history; a cron's report has ``next_slots`` and ``recent_slots``). Works without a
        worker running."""
        return await operations.status(self._client, self.job_id)

    async def cancel(self, note: str | None = None) -> None:
        """Request cancellation; the job reads ``cancelling`` until it settles as
        ``cancelled`` (a running attempt is stopped through its heartbeat). Cancelling twice
        is harmless. A finished job raises :class:`~starter.errors.InvalidTransition`."""
        await operations.cancel(self._client, self.job_id, note, self._actor)

    async def pause(
        self, until: datetime | str | None = None, *, note: str | None = None
    ) -> Report:
        """Hold the job (a cron: its slots) until :meth:`resume`, or until ``until`` (an aware
        datetime or ISO-8601 text with an offset; default None: until resumed). Returns the
        job's report once a worker processed the pause (within ``CONTROL_TIMEOUT``, 30 s, or
        :class:`~starter.errors.TemporalUnavailable`)."""
        return await operations.pause(self._client, self.job_id, until, note, self._actor)

    async def resume(self, *, note: str | None = None) -> Report:
        """Undo a pause; returns the job's report (a worker must be running, as for pause)."""
        return await operations.resume(self._client, self.job_id, note, self._actor)

    async def trigger(self, *, note: str | None = None) -> Report:
        """Run now instead of at ``run_at`` (a cron: one extra slot now); returns the report."""
        return await operations.trigger(self._client, self.job_id, note, self._actor)

    async def backfill(
        self,
        from_: datetime | str,
        to: datetime | str,
        overlap: str | None = None,
        *,
        note: str | None = None,
    ) -> BackfillAnswer:
        """Run every slot of this cron in [``from_``, ``to``] (aware datetimes or ISO-8601
        text; ``to`` not in the future) that has no job yet, each with its slot's id, so a
        slot that already ran is not run again. ``overlap``: ``"allow_all"`` starts them all
        at once, ``"buffer_all"`` one after another (default: ``allow_all`` for an
        ``allow_all`` cron, else ``buffer_all``). Answers how many slots the range holds;
        each slot's outcome (``backfilled`` or ``duplicate``) shows in :meth:`status`. More
        than 2,000 slots raise :class:`~starter.errors.SpecError`."""
        return await operations.backfill(
            self._client, self.job_id, from_, to, overlap, note, self._actor
        )

    async def requeue(self, note: str | None = None) -> None:
        """Give a dead job a fresh round of ``max_attempts`` (``jobctl dlq requeue``). A job that
        is not dead raises :class:`~starter.errors.InvalidTransition`."""
        await dlq.release(self._client, self.job_id, "requeue", note, self._actor)

    async def discard(self, note: str | None = None) -> None:
        """End a dead job for good, status ``discarded`` (``jobctl dlq discard``). A job that is
        not dead raises :class:`~starter.errors.InvalidTransition`."""
        await dlq.release(self._client, self.job_id, "discard", note, self._actor)

    async def result(
        self,
        timeout: float | timedelta | None = None,
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> Report:
        """Wait until the job settles (``done``, ``dead``, ``cancelled`` or ``discarded``) and
        return its final report: the handler's return value is ``report.result``, the last
        failure ``report.last_error``. Unlike Temporal's ``WorkflowHandle.result()`` a failed
        job does not raise: a ``dead`` report is an answer (it waits for a human in the
        dead-letter queue).

        ``timeout`` (seconds or a timedelta; default None: wait as long as it takes) raises
        the built-in :class:`TimeoutError` when it passes first; the job is left alone.
        The status is read every ``poll_interval`` seconds (default 1). A cron settles only
        when cancelled or ended.
        """
        async with asyncio.timeout(seconds_of(timeout)):
            while True:
                report = await self.status()
                if report.status in SETTLED:
                    return report
                await asyncio.sleep(poll_interval)
