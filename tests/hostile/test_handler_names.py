"""Handler names come from what workers published (the ``handler-registry`` workflow) or from
``JOBS_ALLOWED_HANDLERS``, never from handler modules the client side imports. What workers
published advises (issue 41): a well-formed name no live worker serves is accepted with a
warning, a did-you-mean when it looks like a typo, and its job waits; only the allow-list
refuses names outside it, before anything starts."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.client import Client

from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.starter.errors import SpecError
from jobctl.starter.operations.handlers import ALLOWED_HANDLERS_ENV
from jobctl.worker import WorkerSettings, publish_handlers
from jobctl.workflows import names
from tests.helpers.temporal import end_singletons, running_worker, until_polled
from tests.hostile.common import assert_nothing_started, normal_job_completes, started_count

pytestmark = pytest.mark.devserver

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
        await until_polled(dev_client, task_queue, "test.record")
        yield registry.names()
        await normal_job_completes(dev_client, task_queue)
    await end_singletons(dev_client)


async def accepted_with_warning(client: Client, queue: str, handler: str) -> str:
    """Schedule ``handler`` on ``queue``; it starts (then is cancelled); its one warning."""
    scheduled = await operations.schedule(client, spec(handler), task_queue=queue)
    assert scheduled.created
    await operations.cancel(client, scheduled.job_id, actor="test")
    [warning] = scheduled.warnings
    assert f"no live worker on task queue {queue!r} serves handler {handler!r}" in warning
    return warning


@pytest.mark.parametrize(
    ("handler", "guess"), [("no.such.handler", None), ("test.record", None), ("Log", "log")]
)
async def test_nothing_published_accepts_a_name_with_a_warning(
    dev_client: Client, task_queue: str, no_allow_list: None, handler: str, guess: str | None
) -> None:
    await end_singletons(dev_client)  # no registry workflow: no worker ever published
    warning = await accepted_with_warning(dev_client, task_queue, handler)
    assert "no worker has published this handler" in warning
    assert (f"(did you mean {guess!r}?)" in warning) == (guess is not None), warning
    async with running_worker(dev_client, task_queue):
        await normal_job_completes(dev_client, task_queue)
    await end_singletons(dev_client)


@pytest.mark.parametrize("handler", BUILTINS)
async def test_nothing_published_accepts_a_builtin(
    dev_client: Client, task_queue: str, no_allow_list: None, handler: str
) -> None:
    """Every worker serves the built-ins: a job may use one before the first worker starts."""
    await end_singletons(dev_client)
    assert await operations.known_handlers(dev_client, task_queue) == set(BUILTINS)
    scheduled = await operations.schedule(dev_client, spec(handler), task_queue=task_queue)
    assert scheduled.created
    await operations.cancel(dev_client, scheduled.job_id, actor="test")


@pytest.mark.parametrize("handler", UNKNOWN)
async def test_a_name_no_worker_published_is_accepted_with_a_warning(
    dev_client: Client, task_queue: str, published: list[str], handler: str
) -> None:
    assert handler not in published
    warning = await accepted_with_warning(dev_client, task_queue, handler)
    assert "no worker has published this handler" in warning
    if handler in ("Log", "test.record.x"):
        assert f"(did you mean {handler.lower().removesuffix('.x')!r}?)" in warning


async def test_a_published_name_a_live_worker_serves_is_accepted_without_warning(
    dev_client: Client, task_queue: str, published: list[str]
) -> None:
    assert await operations.known_handlers(dev_client, task_queue) == set(published)
    scheduled = await operations.schedule(dev_client, spec("test.record"), task_queue=task_queue)
    assert scheduled.created and scheduled.warnings == []
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
