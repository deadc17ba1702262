"""Handler names come from what workers published (the ``handler-registry`` workflow) or from
``JOBS_ALLOWED_HANDLERS``, never from handler modules the client side imports: a name no
worker published is refused before anything starts, and a published one is accepted."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.client import Client

from activities.registry import load_handlers
from starter import operations
from starter.errors import SpecError
from starter.operations.handlers import ALLOWED_HANDLERS_ENV
from tests.helpers.temporal import end_singletons, running_worker
from tests.hostile.common import assert_nothing_started, normal_job_completes, started_count
from worker import WorkerSettings, publish_handlers
from workflows import names

pytestmark = pytest.mark.devserver

NONE_PUBLISHED = "no worker has published handlers of its own (is `jobs worker` running?)"
BUILTINS = sorted(names.BUILTIN_HANDLERS)
UNKNOWN = ["no.such.handler", "Log", "demo", "log.extra", "test.record.x"]


def spec(handler: str) -> dict[str, Any]:
    return {"id": f"names-{uuid.uuid4().hex[:8]}", "name": "n", "handler": handler, "delay": 60}


@pytest.fixture
def no_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOWED_HANDLERS_ENV, raising=False)


@pytest.fixture
async def published(
    dev_client: Client, task_queue: str, no_allow_list: None
) -> AsyncIterator[list[str]]:
    """A worker on the test's queue that published the built-in and test handlers."""
    registry = load_handlers("tests.handlers")
    async with running_worker(dev_client, task_queue):
        await publish_handlers(dev_client, WorkerSettings(task_queue=task_queue), registry)
        yield registry.names()
        await normal_job_completes(dev_client, task_queue)
    await end_singletons(dev_client)


@pytest.mark.parametrize("handler", ["no.such.handler", "test.record", "Log"])
async def test_nothing_published_refuses_every_name_but_the_builtins(
    dev_client: Client, task_queue: str, no_allow_list: None, handler: str
) -> None:
    await end_singletons(dev_client)  # no registry workflow: no worker ever published
    before = await started_count(dev_client, task_queue)
    with pytest.raises(SpecError) as err:
        await operations.schedule(dev_client, spec(handler), task_queue=task_queue)
    reason = f"unknown handler {handler!r}; known: {BUILTINS}; {NONE_PUBLISHED}"
    assert err.value.problems == [("handler", reason)]
    await assert_nothing_started(dev_client, before, task_queue)
    async with running_worker(dev_client, task_queue):
        await normal_job_completes(dev_client, task_queue)
    await end_singletons(dev_client)


@pytest.mark.parametrize("handler", BUILTINS)
async def test_nothing_published_accepts_a_builtin(
    dev_client: Client, task_queue: str, no_allow_list: None, handler: str
) -> None:
    """Every worker serves the built-ins: a job may use one before the first worker starts."""
    await end_singletons(dev_client)
    assert await operations.known_handlers(dev_client) == set(BUILTINS)
    scheduled = await operations.schedule(dev_client, spec(handler), task_queue=task_queue)
    assert scheduled.created
    await operations.cancel(dev_client, scheduled.job_id, actor="test")


@pytest.mark.parametrize("handler", UNKNOWN)
async def test_a_name_no_worker_published_is_refused(
    dev_client: Client, task_queue: str, published: list[str], handler: str
) -> None:
    assert handler not in published
    before = await started_count(dev_client, task_queue)
    with pytest.raises(SpecError) as err:
        await operations.schedule(dev_client, spec(handler), task_queue=task_queue)
    reason = f"unknown handler {handler!r}; known: {sorted(published)}"
    assert err.value.problems == [("handler", reason)]
    await assert_nothing_started(dev_client, before, task_queue)


async def test_a_published_name_is_accepted(
    dev_client: Client, task_queue: str, published: list[str]
) -> None:
    assert await operations.known_handlers(dev_client) == set(published)
    scheduled = await operations.schedule(dev_client, spec("test.record"), task_queue=task_queue)
    assert scheduled.created
    await operations.cancel(dev_client, scheduled.job_id, actor="test")


@pytest.mark.parametrize("handler", ["demo.sleep", "test.record"])
async def test_the_allow_list_replaces_what_workers_published(
    dev_client: Client,
    task_queue: str,
    published: list[str],
    monkeypatch: pytest.MonkeyPatch,
    handler: str,
) -> None:
    assert handler in published
    monkeypatch.setenv(ALLOWED_HANDLERS_ENV, "log, other.name")
    before = await started_count(dev_client, task_queue)
    with pytest.raises(SpecError) as err:
        await operations.schedule(dev_client, spec(handler), task_queue=task_queue)
    reason = f"unknown handler {handler!r}; known: ['log', 'other.name']"
    assert err.value.problems == [("handler", reason)]
    await assert_nothing_started(dev_client, before, task_queue)
