"""Test environments: real Temporal only.

* ``ts_env``: the time-skipping test server, for timer-heavy workflow logic.
* ``dev_server``: ``temporal server start-dev`` on a SQLite file, for end-to-end, CLI and
  visibility tests (the time-skipping server has no list/count).

Both register the job search attributes first: an unknown attribute would fail every workflow
task and hang the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.registry import load_handlers
from bench.common import write_result
from starter.binaries import test_server
from starter.devserver import DevServer
from tests.drills import FULL, REPORT, render_report
from tests.processes import Api, Workers, cli_env
from worker import WorkerSettings, build_worker
from workflows.models import DLQ_WORKFLOW_ID, REGISTRY_WORKFLOW_ID, SEARCH_ATTRIBUTES


@pytest.fixture
async def ts_env() -> AsyncIterator[WorkflowEnvironment]:
    """A fresh time-skipping server per test (~0.3 s): no state, clock or DLQ shared."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=test_server(), data_converter=pydantic_data_converter
    )
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes={
                key.name: IndexedValueType.ValueType(key.indexed_value_type)
                for key in SEARCH_ATTRIBUTES
            },
        )
    )
    yield env
    await env.shutdown()


@pytest.fixture(scope="session")
async def dev_server() -> AsyncIterator[DevServer]:
    """In memory, for speed; the drills use a SQLite file (tests/sqlite_fixtures.py)."""
    server = DevServer(db_file=None)
    await server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
async def dev_client(dev_server: DevServer) -> Client:
    from starter.client import connect

    return await connect(dev_server.address, "default")


@pytest.fixture
def task_queue() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


@asynccontextmanager
async def running_worker(client: Client, task_queue: str) -> AsyncIterator[Worker]:
    """An in-process worker with the built-in and test handlers."""
    registry = load_handlers("tests.handlers")
    job_worker = build_worker(client, WorkerSettings(task_queue=task_queue), registry)
    try:
        async with job_worker.worker as worker:
            yield worker
    finally:
        job_worker.close()


async def end_singletons(client: Client) -> None:
    """The singletons (DLQ, handler registry) live on the task queue of the worker that
    started them; each dev-server test has its own queue, so delete them with the test."""
    for singleton in (DLQ_WORKFLOW_ID, REGISTRY_WORKFLOW_ID):
        request = DeleteWorkflowExecutionRequest(
            namespace=client.namespace, workflow_execution=WorkflowExecution(workflow_id=singleton)
        )
        with contextlib.suppress(RPCError):
            await client.workflow_service.delete_workflow_execution(request)
        async with asyncio.timeout(30):  # deletion is asynchronous on the server
            while True:
                try:
                    await client.get_workflow_handle(singleton).describe()
                except RPCError:
                    break
                await asyncio.sleep(0.2)


@pytest.fixture
def cli(dev_server: DevServer, task_queue: str) -> dict[str, str]:
    """Environment for ``jobs`` subprocesses against the session's dev server."""
    return cli_env(dev_server.address, task_queue)


@pytest.fixture
async def workers(
    cli: dict[str, str], tmp_path: Path, dev_client: Client
) -> AsyncIterator[Workers]:
    """Worker subprocesses on the test's task queue; killed at teardown."""
    group = Workers(cli, tmp_path)
    yield group
    group.stop_all()
    await end_singletons(dev_client)


@dataclass
class Stack:
    api: Api
    http: httpx.Client
    env: dict[str, str]


@pytest.fixture(scope="module")
async def stack(
    dev_server: DevServer, dev_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    env = cli_env(dev_server.address, f"api-{uuid.uuid4().hex[:8]}")
    workers = Workers(env, tmp_path_factory.mktemp("api-workers"))
    workers.start()
    api = Api(env).start()
    with httpx.Client(base_url=api.url, timeout=30) as http:
        yield Stack(api, http, env)
    api.stop()
    workers.stop_all()
    await end_singletons(dev_client)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The drills' one-screen report (drill, jobs, lost, duplicated, max lag)."""
    if REPORT:
        terminalreporter.section("failure drills")
        terminalreporter.write_line(render_report())
        path = write_result("drills", {"full_size": FULL, "rows": [asdict(r) for r in REPORT]})
        terminalreporter.write_line(f"(also in {path})")
