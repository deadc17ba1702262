"""Test environments: real Temporal only.

* ``ts_env``: the time-skipping test server, for timer-heavy workflow logic.
* ``dev_server``: ``temporal server start-dev`` on a SQLite file, for end-to-end, CLI and
  visibility tests (the time-skipping server has no list/count).

Both register the job search attributes first: an unknown attribute would fail every workflow
task and hang the test.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from jobctl.starter.dev.binaries import test_server
from jobctl.starter.dev.devserver import DevServer
from jobctl.testing import register_search_attributes
from tests.helpers.api import Stack
from tests.helpers.dev_servers import dev_server_fixtures
from tests.helpers.drills import FULL, ROWS_ENV, drill_rows, render_report
from tests.helpers.processes import Api, Workers, cli_env
from tests.helpers.temporal import end_singletons

# A test that uses one of these fixtures (directly or through another fixture) talks to a dev
# server or starts worker processes: it is marked ``devserver`` at collection, so
# ``-m "not devserver"`` (``scripts/test --fast``) selects exactly the tests that need neither.
# ``lab``: the metered dev server some modules start for themselves (server-work counts).
DEVSERVER_FIXTURES = frozenset({"dev_server", "dev_client", "cli", "workers", "stack", "lab"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if DEVSERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.devserver)
        if item.get_closest_marker("alone") is not None:
            spelled_in_file(item)


def spelled_in_file(item: pytest.Item) -> None:
    """``scripts/test`` runs the ``alone`` pass on the files whose text says
    ``pytest.mark.alone`` (collecting the whole suite for two tests took ~5 s): a test marked
    some other way would silently run in neither pass."""
    if "pytest.mark.alone" not in item.path.read_text():
        raise pytest.UsageError(f"{item.nodeid}: spell its mark `@pytest.mark.alone` in its file")


@pytest.fixture
async def ts_env() -> AsyncIterator[WorkflowEnvironment]:
    """A fresh time-skipping server per test (~0.3 s): no state, clock or DLQ shared."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=test_server(), data_converter=pydantic_data_converter
    )
    await register_search_attributes(env.client)
    yield env
    await env.shutdown()


# The session's dev server and its client (tests/helpers/dev_servers.py).
dev_server, dev_client = dev_server_fixtures("session")


@pytest.fixture
def task_queue() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


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


DRILL_ROWS_OWNED = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """Name the session's drill-row file before any pytest-xdist worker starts (the workers
    inherit the variable; a worker's own configure keeps what it inherited)."""
    if ROWS_ENV not in os.environ:
        rows = Path(tempfile.mkdtemp(prefix="jobs-drills-")) / "rows.jsonl"
        os.environ[ROWS_ENV] = str(rows)
        config.stash[DRILL_ROWS_OWNED] = rows


def pytest_unconfigure(config: pytest.Config) -> None:
    """The process that named the drill-row file removes it (after the report)."""
    rows = config.stash.get(DRILL_ROWS_OWNED, None)
    if rows is not None:
        shutil.rmtree(rows.parent, ignore_errors=True)
        os.environ.pop(ROWS_ENV, None)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The drills' one-screen report (drill, jobs, lost, duplicated, max lag)."""
    if hasattr(terminalreporter.config, "workerinput"):
        return  # an xdist worker: the controller prints it
    rows = drill_rows()
    if rows:
        from bench.common import write_result  # only when drills ran

        terminalreporter.section("failure drills")
        terminalreporter.write_line(render_report(rows))
        path = write_result("drills", {"full_size": FULL, "rows": [asdict(r) for r in rows]})
        terminalreporter.write_line(f"(also in {path})")
