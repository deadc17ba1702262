"""Hostile values of the listing's status filter, at every door: ``GET /jobs?status=``,
``jobctl list --status`` and ``operations.list_jobs``.

Each case asserts the answer (422 with the ``{"error", "detail"}`` shape naming ``status``;
exit 2 with one line naming ``--status``; a ``SpecError`` naming ``status``), that nothing
started, and the module ends with a normal job that still runs. A valid status is answered
(the filter is not simply closed).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from temporalio.client import Client

from jobctl.starter import operations
from jobctl.starter.api import create_app
from jobctl.starter.api.guards import LOOPBACK_HOSTS
from jobctl.starter.dev.devserver import DevServer
from jobctl.starter.errors import SpecError
from jobctl.workflows.models import JobStatus
from tests.helpers.processes import cli_env, jobs
from tests.helpers.temporal import end_singletons, running_worker
from tests.hostile.common import assert_nothing_started, normal_job_completes, started_count

pytestmark = pytest.mark.devserver

QUEUE = f"hostile-status-{uuid.uuid4().hex[:8]}"

# (case, value sent as the status)
HOSTILE = [
    ("unknown word", "bogus"),
    ("upper case", "DEAD"),
    ("padded", " dead "),
    ("empty", ""),
    ("visibility query injection", 'dead" OR JobStatus != "x'),
    ("sql injection", "dead'; DROP TABLE executions;--"),
    ("nul byte", "dead\x00"),
    ("very long", "d" * 10_000),
    ("unicode lookalike", "d\u0435ad"),  # Cyrillic e
]
IDS = [case for case, _ in HOSTILE]


@pytest.fixture(scope="module")
async def http(dev_client: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(
        token="", client=dev_client, task_queue=QUEUE, allowed_hosts=list(LOOPBACK_HOSTS)
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://127.0.0.1:8000", timeout=30
    ) as client:
        yield client
    await end_singletons(dev_client)


@pytest.mark.parametrize(("case", "value"), HOSTILE, ids=IDS)
async def test_the_api_refuses_an_unknown_status(
    dev_client: Client, http: httpx.AsyncClient, case: str, value: str
) -> None:
    before = await started_count(dev_client, QUEUE)
    answer = await http.get("/jobs", params={"status": value})
    assert answer.status_code == 422, (case, answer.text)
    body = answer.json()
    assert set(body) == {"error", "detail"} and body["error"] == "invalid", body
    assert any(p["field"] == "status" for p in body["detail"]), body
    await assert_nothing_started(dev_client, before, QUEUE)


@pytest.mark.parametrize(("case", "value"), HOSTILE, ids=IDS)
async def test_the_library_refuses_an_unknown_status(
    dev_client: Client, case: str, value: str
) -> None:
    before = await started_count(dev_client, QUEUE)
    with pytest.raises(SpecError) as refused:
        await operations.list_jobs(dev_client, value)
    assert [field for field, _ in refused.value.problems] == ["status"], (case, refused.value)
    await assert_nothing_started(dev_client, before, QUEUE)


@pytest.mark.parametrize(
    ("case", "value"),
    [h for h in HOSTILE if "\x00" not in h[1]],
    ids=[i for i in IDS if i != "nul byte"],
)  # argv cannot carry a NUL byte
async def test_the_cli_refuses_an_unknown_status(
    dev_server: DevServer, dev_client: Client, case: str, value: str
) -> None:
    before = await started_count(dev_client, QUEUE)
    result = await asyncio.to_thread(
        jobs, cli_env(dev_server.address, QUEUE), "list", "--status", value
    )
    assert result.returncode == 2, (case, result.stderr)
    assert "--status" in result.stderr and result.stdout == "", result
    await assert_nothing_started(dev_client, before, QUEUE)


async def test_a_valid_status_is_answered_and_a_normal_job_still_runs(
    dev_client: Client, http: httpx.AsyncClient
) -> None:
    async with running_worker(dev_client, QUEUE):
        await normal_job_completes(dev_client, QUEUE)
    answer = await http.get("/jobs", params={"status": JobStatus.DONE.value})
    assert answer.status_code == 200, answer.text
    assert any(row["status"] == "done" for row in answer.json()["jobs"]), answer.json()
