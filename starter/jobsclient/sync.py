"""The synchronous facade, for WSGI apps (Flask, Django), scripts and notebooks.

Why a loop of its own in a background thread, not ``asyncio.run`` per call: a Temporal client
belongs to the event loop it was connected on (its RPCs complete as futures of that loop), so
``asyncio.run`` per call would have to connect again on every call (a new connection, TLS
handshake included) or reuse a client across dead loops, which breaks. ``asyncio.run`` also
refuses to run where a loop is already running (a notebook, an async framework's thread). So
:class:`SyncJobsClient` starts one daemon thread running one event loop, connects there, and
runs every call on it with ``asyncio.run_coroutine_threadsafe``: one connection for the
client's life, and any number of caller threads at once (a threaded WSGI server) share it,
their calls interleaving on the loop as tasks do. :meth:`SyncJobsClient.close` (or ``with``)
stops the loop and the thread; it also happens at interpreter exit.
"""

from __future__ import annotations

import asyncio
import builtins
import threading
import weakref
from collections.abc import Coroutine, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, TypeVar

from pydantic import BaseModel
from temporalio.client import Client

from jobctl.starter.jobsclient.client import DEFAULT_PAGE_SIZE, JobsClient
from jobctl.starter.jobsclient.handle import DEFAULT_POLL_INTERVAL, JobHandle
from jobctl.starter.operations import ItemResult, JobPage, JobRow, Limits, Report
from jobctl.starter.operations.batches import BatchScheduled
from jobctl.workflows.models import JobSpec
from jobctl.workflows.models.batch import BatchReport
from jobctl.workflows.models.cron import BackfillAnswer

T = TypeVar("T")
STOP_TIMEOUT = 10.0


class LoopThread:
    """One event loop running in a daemon thread; :meth:`call` runs a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="jobsclient-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()

    def call(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the loop and wait for its answer (its exception is raised here).
        Interrupted (Ctrl-C), the work is cancelled."""
        if threading.current_thread() is self.thread:
            work.close()
            raise RuntimeError("SyncJobsClient called from its own loop: use JobsClient there")
        if self.loop.is_closed() or not self.thread.is_alive():
            work.close()
            raise RuntimeError("this SyncJobsClient is closed")
        future = asyncio.run_coroutine_threadsafe(work, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def stop(self) -> None:
        """Stop the loop (cancelling what still runs on it) and wait for the thread."""
        if self.thread.is_alive() and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self.thread:
            self.thread.join(STOP_TIMEOUT)


class SyncJobHandle:
    """The blocking twin of :class:`~starter.jobsclient.JobHandle`: same methods, same
    arguments, same answers and exceptions."""

    def __init__(self, runner: LoopThread, handle: JobHandle) -> None:
        self._runner = runner
        self._handle = handle

    def __repr__(self) -> str:
        return f"SyncJobHandle(job_id={self.job_id!r})"

    @property
    def job_id(self) -> str:
        return self._handle.job_id

    @property
    def next_run_at(self) -> datetime | None:
        """See :attr:`JobHandle.next_run_at`."""
        return self._handle.next_run_at

    @property
    def created(self) -> bool | None:
        """See :attr:`JobHandle.created`."""
        return self._handle.created

    def status(self) -> Report:
        """See :meth:`JobHandle.status`."""
        return self._runner.call(self._handle.status())

    def cancel(self, note: str | None = None) -> None:
        """See :meth:`JobHandle.cancel`."""
        self._runner.call(self._handle.cancel(note))

    def pause(self, until: datetime | str | None = None, *, note: str | None = None) -> Report:
        """See :meth:`JobHandle.pause` (default ``until`` None: until resumed)."""
        return self._runner.call(self._handle.pause(until, note=note))

    def resume(self, *, note: str | None = None) -> Report:
        """See :meth:`JobHandle.resume`."""
        return self._runner.call(self._handle.resume(note=note))

    def trigger(self, *, note: str | None = None) -> Report:
        """See :meth:`JobHandle.trigger`."""
        return self._runner.call(self._handle.trigger(note=note))

    def backfill(
        self,
        from_: datetime | str,
        to: datetime | str,
        overlap: str | None = None,
        *,
        note: str | None = None,
    ) -> BackfillAnswer:
        """See :meth:`JobHandle.backfill` (default ``overlap`` None: the cron's own)."""
        return self._runner.call(self._handle.backfill(from_, to, overlap, note=note))

    def requeue(self, note: str | None = None) -> None:
        """See :meth:`JobHandle.requeue`."""
        self._runner.call(self._handle.requeue(note))

    def discard(self, note: str | None = None) -> None:
        """See :meth:`JobHandle.discard`."""
        self._runner.call(self._handle.discard(note))

    def result(
        self,
        timeout: float | timedelta | None = None,
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> Report:
        """See :meth:`JobHandle.result` (default ``timeout`` None: wait as long as it takes;
        ``TimeoutError`` when it passes first)."""
        return self._runner.call(self._handle.result(timeout, poll_interval=poll_interval))


class SyncJobsClient:
    """The blocking twin of :class:`~starter.jobsclient.JobsClient`, for code without an event
    loop::

        with SyncJobsClient.connect() as jobs:
            handle = jobs.schedule("report", handler="log", in_="5m")
            print(handle.status().status)

    Make one with :meth:`connect`; safe to share between threads. Do not call it from a
    coroutine: use :class:`JobsClient` there.
    """

    def __init__(self, runner: LoopThread, client: JobsClient) -> None:
        self._runner = runner
        self._client = client
        self._finalizer = weakref.finalize(self, runner.stop)  # also at interpreter exit

    @classmethod
    def connect(
        cls,
        address: str | None = None,
        namespace: str | None = None,
        profile: str | None = None,
        *,
        task_queue: str | None = None,
        actor: str | None = None,
    ) -> SyncJobsClient:
        """See :meth:`JobsClient.connect`: the same arguments and defaults."""
        runner = LoopThread()
        try:
            connected = JobsClient.connect(
                address, namespace, profile, task_queue=task_queue, actor=actor
            )
            client = runner.call(connected)
        except BaseException:
            runner.stop()
            raise
        return cls(runner, client)

    def close(self) -> None:
        """Stop the client's loop and thread; calls made afterwards raise RuntimeError."""
        self._finalizer()

    def __enter__(self) -> SyncJobsClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def temporal_client(self) -> Client:
        """The Temporal client underneath; it lives on this client's loop (call it there)."""
        return self._client.temporal_client

    def get_handle(self, job_id: str) -> SyncJobHandle:
        """See :meth:`JobsClient.get_handle`."""
        return SyncJobHandle(self._runner, self._client.get_handle(job_id))

    def schedule(
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
    ) -> SyncJobHandle:
        """See :meth:`JobsClient.schedule`: the same arguments, defaults and errors."""
        scheduled = self._client.schedule(
            name, handler=handler, payload=payload, at=at, in_=in_, cron=cron, tz=tz, **spec_fields
        )
        return SyncJobHandle(self._runner, self._runner.call(scheduled))

    def schedule_many(
        self, specs: Sequence[dict[str, Any] | JobSpec], *, handlers: Iterable[str] | None = None
    ) -> builtins.list[ItemResult]:
        """See :meth:`JobsClient.schedule_many`."""
        return self._runner.call(self._client.schedule_many(specs, handlers=handlers))

    def schedule_batch(
        self,
        specs: Sequence[dict[str, Any] | JobSpec],
        batch: Mapping[str, Any],
        *,
        handlers: Iterable[str] | None = None,
    ) -> BatchScheduled:
        """See :meth:`JobsClient.schedule_many` with ``batch``."""
        return self._runner.call(self._client.schedule_many(specs, handlers=handlers, batch=batch))

    def batch_status(self, batch_id: str) -> BatchReport:
        """See :meth:`JobsClient.batch_status`."""
        return self._runner.call(self._client.batch_status(batch_id))

    def cancel_batch(self, batch_id: str, note: str | None = None) -> BatchReport:
        """See :meth:`JobsClient.cancel_batch`."""
        return self._runner.call(self._client.cancel_batch(batch_id, note))

    def list_page(
        self,
        status: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        page_token: str | None = None,
    ) -> JobPage:
        """See :meth:`JobsClient.list_page`."""
        return self._runner.call(self._client.list_page(status, page_size, page_token))

    def list(
        self,
        status: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        limit: int | None = None,
    ) -> Iterator[JobRow]:
        """See :meth:`JobsClient.list`: rows, fetched a page at a time as you iterate."""
        rows = self._client.list(status, page_size, limit)

        async def step() -> JobRow | None:
            try:
                return await anext(rows)
            except StopAsyncIteration:
                return None

        try:
            while (row := self._runner.call(step())) is not None:
                yield row
        finally:
            if not self._runner.loop.is_closed():
                self._runner.call(rows.aclose())

    def limits(self) -> Limits:
        """See :meth:`JobsClient.limits`."""
        return self._runner.call(self._client.limits())
