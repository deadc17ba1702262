"""An in-process worker for a test's task queue, the cleanup of the queue's singletons, the
search attributes a time-skipping server needs, and the check that a recorded history replays
with today's workflows."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.worker import Replayer, Worker

from jobctl.activities.registry import load_handlers
from jobctl.starter.operations import handler_watch
from jobctl.worker import WORKFLOWS, WorkerSettings, build_worker, publish_handlers, sandbox_runner
from jobctl.workflows import names
from tests.helpers.poll import eventually


@asynccontextmanager
async def running_worker(
    client: Client, task_queue: str, publish: bool = False
) -> AsyncIterator[Worker]:
    """An in-process worker with the built-in and test handlers. ``publish``: tell the
    handler registry its names, as ``jobctl worker`` does (the API and CLI accept only
    published names); the test then ends the registry with ``end_singletons``."""
    registry = load_handlers("tests.handlers")
    settings = WorkerSettings(task_queue=task_queue)
    async with build_worker(client, settings, registry).running() as worker:
        if publish:
            await publish_handlers(client, settings, registry)
        yield worker


async def live_now(client: Client, task_queue: str, handler: str) -> list[str]:
    """The identities of the workers polling ``handler``'s queue now, past the doors' cache
    (a cached answer would outlive a first poll or a worker's stop)."""
    handler_watch._seen.clear()
    workers = await handler_watch.live_workers(client, task_queue, handler)
    handler_watch._seen.clear()
    return [w.identity for w in workers or []]


async def until_polled(client: Client, task_queue: str, *handlers: str) -> None:
    """Wait until the server lists a poller on each handler's queue: a worker is "live" to
    the doors from its first poll, which a loaded machine delays past its start."""
    for handler in handlers:
        probe = partial(live_now, client, task_queue, handler)
        await eventually(probe, what=f"a poller of {handler!r}")


async def _gone(client: Client, workflow_id: str) -> bool:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError:
        return True
    return False


async def end_singletons(client: Client) -> None:
    """The singletons (DLQ, handler registry) live on the task queue of the worker that
    started them; each dev-server test has its own queue, so delete them with the test."""
    for singleton in (names.DLQ_WORKFLOW_ID, names.REGISTRY_WORKFLOW_ID):
        request = DeleteWorkflowExecutionRequest(
            namespace=client.namespace, workflow_execution=WorkflowExecution(workflow_id=singleton)
        )
        with contextlib.suppress(RPCError):
            await client.workflow_service.delete_workflow_execution(request)
        # deletion is asynchronous on the server
        await eventually(partial(_gone, client, singleton), what=f"{singleton} deleted")


async def assert_replays(history: WorkflowHistory) -> None:
    """The history replays with today's workflows, in the worker's sandbox and converter."""
    replayer = Replayer(
        workflows=WORKFLOWS,
        data_converter=pydantic_data_converter,
        workflow_runner=sandbox_runner(),
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
