"""The asynchronous client: schedule jobs, get handles on them, list them, schedule in bulk.

Everything goes through the operations library (:mod:`starter.operations`), the code path of
``jobs`` and the HTTP API: the same validation, the same Temporal calls, the same typed
errors (:mod:`jobctl.starter.errors`).
"""

from __future__ import annotations

import builtins
import os
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, overload

from pydantic import BaseModel
from temporalio.client import Client

from jobctl.connection import tracing
from jobctl.connection.client import PROFILE_ENV, connect
from jobctl.starter import operations
from jobctl.starter.errors import SpecError
from jobctl.starter.jobsclient.handle import JobHandle
from jobctl.starter.operations import ItemResult, JobPage, JobRow, batches
from jobctl.starter.operations.batches import BatchScheduled
from jobctl.workflows.models import JobSpec
from jobctl.workflows.models.batch import BatchReport

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000  # as `jobctl list --limit`
# Keyword arguments of ``schedule`` that stand for a spec field of another name.
ALIASES = {"at": "run_at", "in_": "delay", "tz": "timezone"}


def default_actor() -> str:
    """Who acts, for the audit trail: ``python:<OS user>`` (``jobctl`` records ``cli:<user>``)."""
    return operations.local_actor("python")


def build_spec(name: str, handler: str, payload: Any, **fields: Any) -> dict[str, Any]:
    """The raw spec of a :meth:`JobsClient.schedule` call (the model does the validating).

    ``at`` / ``in_`` / ``tz`` become ``run_at`` / ``delay`` / ``timezone``; None means "not
    given"; a pydantic model as ``payload`` is sent as its JSON form. Giving a field under
    both names (``at=`` and ``run_at=``) is a :class:`SpecError`.
    """
    raw: dict[str, Any] = {"name": name, "handler": handler}
    if isinstance(payload, BaseModel):
        payload = payload.model_dump(mode="json")
    if payload is not None:
        raw["payload"] = payload
    for key, value in fields.items():
        if value is None:
            continue
        field = ALIASES.get(key, key)
        if field in raw:
            alias = next(a for a, f in ALIASES.items() if f == field)
            raise SpecError([(field, f"given twice (as {alias}= and {field}=)")])
        raw[field] = value
    return raw


class JobsClient:
    """A client of the job scheduler, on a Temporal client.

    Make one with :meth:`connect` (connects as ``jobs`` does), or wrap a Temporal client you
    already have: ``JobsClient(client)`` (it must use the pydantic data converter, and the
    encryption codec when ``JOBS_ENCRYPTION_KEY`` is set, as :func:`connection.client.connect`
    gives). The client is safe to share between tasks of one event loop. Wrapping the client
    a worker of this process runs on makes a job due now start on that worker directly
    (eager start: see ``operations.starting``), a task-queue trip fewer.

    Args:
        client: The Temporal client.
        task_queue: Where new jobs run (default None: ``JOBS_TASK_QUEUE``, else ``jobs``).
        actor: Who acts, recorded with every control in a job's audit trail (default None:
            ``python:<OS user>``).
    """

    def __init__(
        self, client: Client, *, task_queue: str | None = None, actor: str | None = None
    ) -> None:
        self._client = client
        self._task_queue = task_queue
        self._actor = actor or default_actor()

    @classmethod
    async def connect(
        cls,
        address: str | None = None,
        namespace: str | None = None,
        profile: str | None = None,
        *,
        task_queue: str | None = None,
        actor: str | None = None,
    ) -> JobsClient:
        """Connect the way ``jobs`` does: Temporal's environment configuration (a profile of
        ``temporal.toml`` from ``TEMPORAL_CONFIG_FILE`` or the user's config directory, then
        ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS*``
        on top), payload encryption with ``JOBS_ENCRYPTION_KEY``, tracing when on.

        Args:
            address: ``host:port`` over all settings (default None: the profile's, else
                ``localhost:7233``).
            namespace: Over all settings (default None: the profile's, else ``default``).
            profile: The ``temporal.toml`` profile (default None: ``TEMPORAL_PROFILE``, else
                ``default``).
            task_queue: See the class (default None: ``JOBS_TASK_QUEUE``, else ``jobs``).
            actor: See the class (default None: ``python:<OS user>``).

        Raises:
            SpecError: Bad settings (unknown profile, unreadable certificate, bad key).
            TemporalUnavailable: The server cannot be reached.
        """
        environ = dict(os.environ)
        if profile is not None:
            environ[PROFILE_ENV] = profile
        # ``environ`` is connect_options' own parameter: the settings are read from it.
        client = await connect(address, namespace, environ=environ)
        return cls(client, task_queue=task_queue, actor=actor)

    async def _now(self) -> datetime:
        """The clock ``in_`` counts from (the testing kit reads its test server's)."""
        return datetime.now(UTC)

    @property
    def temporal_client(self) -> Client:
        """The Temporal client underneath (for what this client does not cover)."""
        return self._client

    def get_handle(self, job_id: str) -> JobHandle:
        """A handle on an existing job or cron; asks the server nothing (an unknown id raises
        :class:`~starter.errors.JobNotFound` on first use); a ``job_id`` that is not a
        string raises :class:`SpecError` at once."""
        if not isinstance(job_id, str):
            raise SpecError([("job_id", f"must be a string, not {type(job_id).__name__}")])
        return JobHandle(self._client, job_id, actor=self._actor)

    async def schedule(
        self,
        name: str,
        *,
        handler: str,
        payload: dict[str, Any] | BaseModel | None = None,
        at: datetime | str | None = None,
        in_: float | timedelta | str | None = None,
        cron: str | None = None,
        tz: str | None = None,
        **spec_fields: Any,
    ) -> JobHandle:
        """Schedule a job; exactly one of ``at``, ``in_`` or ``cron`` says when. Nothing starts
        if anything is wrong. The same checks as ``jobctl schedule`` and ``POST /jobs``.

        Args:
            name: A human name (1-200 characters).
            handler: A handler a worker serves (the built-ins, or what workers published).
            payload: Handed to the handler: a JSON object, or a pydantic model instance (sent
                as its JSON form). Default None: ``{}``.
            at: ``run_at``: an aware datetime or ISO-8601 text with an offset, at most 10 years
                ahead.
            in_: ``delay``: seconds, a timedelta or text (``"90"``, ``"90s"``, ``"5m"``,
                ``"2h"``), counted from this machine's clock now.
            cron: A cron expression (5 fields, or 6 with seconds first).
            tz: ``timezone``: the IANA zone of ``cron`` (default None: ``UTC``).
            spec_fields: Any other spec field by its name: ``id``, ``max_attempts``,
                ``backoff_base``, ``backoff_max``, ``jitter``, ``lease``, ``timeout``,
                ``idempotency_key``, ``dispatch_lead``, ``after`` (job ids) and
                ``on_failed_dependency``, and for crons ``overlap``,
                ``catchup_window``, ``schedule_jitter`` (durations as for ``in_``). None
                leaves a field at its default.

        Returns:
            A handle on the job (``handle.next_run_at``; ``handle.created`` is False when an
            identical request with the same ``id`` had already created it).

        Raises:
            SpecError: Bad spec (``err.problems`` lists every (field, reason)), unknown handler.
            JobExists: ``id`` is taken by a different request.
            TemporalUnavailable: The server cannot be reached.
        """
        raw = build_spec(name, handler, payload, at=at, in_=in_, cron=cron, tz=tz, **spec_fields)
        now = await self._now()
        checked = operations.submission(raw, now)  # every spec problem before any RPC
        with tracing.schedule_span(raw) as span:
            scheduled = await operations.schedule(
                self._client, checked, now=now, task_queue=self._task_queue
            )
            span.scheduled(scheduled)
        return JobHandle(self._client, scheduled.job_id, actor=self._actor, scheduled=scheduled)

    @overload
    async def schedule_many(
        self,
        specs: Sequence[dict[str, Any] | JobSpec],
        *,
        handlers: Iterable[str] | None = None,
        batch: None = None,
    ) -> builtins.list[ItemResult]: ...

    @overload
    async def schedule_many(
        self,
        specs: Sequence[dict[str, Any] | JobSpec],
        *,
        handlers: Iterable[str] | None = None,
        batch: Mapping[str, Any],
    ) -> BatchScheduled: ...

    async def schedule_many(
        self,
        specs: Sequence[dict[str, Any] | JobSpec],
        *,
        handlers: Iterable[str] | None = None,
        batch: Mapping[str, Any] | None = None,
    ) -> builtins.list[ItemResult] | BatchScheduled:
        """Schedule up to ``operations.MAX_BATCH`` (1,000) specs at once: one
        :class:`~starter.operations.ItemResult` per spec, in order (``item.ok``,
        ``item.scheduled.job_id``, ``item.error``: the typed error a single schedule would
        raise for it). Not all-or-nothing: every valid spec starts.

        Specs use the spec's own field names (``run_at``, ``delay``, ``timezone``; the JSON
        Lines of ``jobctl schedule --from-file``). ``handlers``: the names to accept (default
        None: what workers published).

        With ``batch={"id": ..., "on_complete": spec, "on_success": spec}`` the specs form a
        batch (docs/batches.md): all or nothing, answered by a ``BatchScheduled``
        (``batch_id``, ``job_ids``, ``callbacks``, ``created``).

        Raises:
            SpecError: More than 1,000 specs, or ``specs`` not a list of specs (a string or
                a dict, say): then nothing starts. With ``batch``: any problem anywhere.
            JobExists: With ``batch``: the batch id (or a callback's id) is taken.
            TemporalUnavailable: The server cannot be reached.
        """
        if isinstance(specs, str | bytes | Mapping) or not isinstance(specs, Sequence):
            kind = type(specs).__name__
            raise SpecError([("specs", f"must be a list of job specs, not a {kind}")])
        if batch is not None:
            raw = [
                s.model_dump(mode="json", exclude_unset=True) if isinstance(s, JobSpec) else s
                for s in specs
            ]
            return await batches.schedule_batch(
                self._client, dict(batch), raw, handlers, task_queue=self._task_queue
            )
        return await operations.schedule_many(
            self._client, specs, handlers, task_queue=self._task_queue
        )

    async def batch_status(self, batch_id: str) -> BatchReport:
        """A batch's report (``jobctl batch status --json``). Raises JobNotFound."""
        return await batches.batch_status(self._client, batch_id)

    async def cancel_batch(self, batch_id: str, note: str | None = None) -> BatchReport:
        """Cancel every unsettled member of a batch. Raises InvalidTransition once it has
        completed."""
        return await batches.cancel_batch(self._client, batch_id, note, self._actor)

    async def list_page(
        self,
        status: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        page_token: str | None = None,
    ) -> JobPage:
        """One page of ``jobctl list``: ``page.jobs`` and ``page.next_page_token`` (None on the
        last page). A page may hold fewer than ``page_size`` rows, even none, and still have a
        next page (a rare status scans at most 1,000 jobs per page).

        Raises:
            SpecError: An unknown status, a bad page token, ``page_size`` not 1-1000.
        """
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise SpecError([("page_size", f"must be 1-{MAX_PAGE_SIZE} (got {page_size})")])
        return await operations.list_jobs(self._client, status, page_size, page_token)

    async def pages(
        self, status: str | None = None, page_size: int = DEFAULT_PAGE_SIZE
    ) -> AsyncGenerator[JobPage, None]:
        """Every page of ``jobctl list`` in turn (see :meth:`list_page`)."""
        token: str | None = None
        while True:
            page = await self.list_page(status, page_size, token)
            yield page
            token = page.next_page_token
            if token is None:
                return

    async def list(
        self,
        status: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        limit: int | None = None,
    ) -> AsyncGenerator[JobRow, None]:
        """Jobs and crons, newest first within a page, as ``jobctl list`` rows
        (:class:`~starter.operations.JobRow`: ``job_id``, ``kind``, ``name``, ``handler``,
        ``status``, ``run_at``...), fetched a page at a time::

            async for row in client.list(status="dead"):
                print(row.job_id, row.status)

        Args:
            status: Only jobs in this public status (default None: every job).
            page_size: Rows asked for per page (default 50, at most 1,000).
            limit: Stop after this many rows (default None: all).

        Raises:
            SpecError: An unknown status.
        """
        if limit is not None and limit <= 0:
            return
        count = 0
        async for page in self.pages(status, page_size):
            for row in page.jobs:
                yield row
                count += 1
                if limit is not None and count >= limit:
                    return

    async def limits(self) -> operations.Limits:
        """Every rate key and concurrency key in use (``jobctl limits``): ``limits``, one
        :class:`~starter.operations.LimitInfo` each (``kind``, ``key``, ``limit``,
        ``recent_starts``, ``running``, ``waiting``, ``next_start``...)."""
        return await operations.list_limits(self._client)
