"""Built-in handlers through real jobs on the time-skipping server."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.testing import WorkflowEnvironment

from jobctl.workflows.models import JobStatus
from tests.helpers.httpserver import serve
from tests.helpers.jobs import finished, submit, wait_for_status
from tests.helpers.temporal import running_worker


@pytest.fixture(autouse=True)
def _allow_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBS_HTTP_ALLOWED_HOSTS", "127.0.0.1")  # the endpoint is on loopback


async def test_http_post_success_sends_body_and_idempotency_key(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    with serve() as endpoint:
        async with running_worker(ts_env.client, task_queue):
            handle = await submit(
                ts_env,
                task_queue,
                handler="http.post",
                delay=0,
                payload={"url": f"{endpoint.url}/status/201", "json": {"order": 7}},
            )
            report = await finished(ts_env, handle)
    assert report.status == JobStatus.DONE and report.result == {"status": 201}
    [hit] = endpoint.hits
    assert (hit.body, hit.key) == ({"order": 7}, handle.id)


@pytest.mark.parametrize(
    ("code", "attempts", "error_type"),
    [
        (404, 1, "PermanentError"),
        (400, 1, "PermanentError"),
        (429, 3, "HTTPStatusError"),
        (408, 3, "HTTPStatusError"),
        (503, 3, "HTTPStatusError"),
    ],
)
async def test_http_post_4xx_is_permanent_but_408_429_and_5xx_retry(
    ts_env: WorkflowEnvironment, task_queue: str, code: int, attempts: int, error_type: str
) -> None:
    with serve() as endpoint:
        async with running_worker(ts_env.client, task_queue):
            handle = await submit(
                ts_env,
                task_queue,
                handler="http.post",
                delay=0,
                max_attempts=3,
                backoff_base=1,
                payload={"url": f"{endpoint.url}/status/{code}"},
            )
            await ts_env.sleep(timedelta(seconds=20))  # the retry backoffs, skipped
            report = await wait_for_status(ts_env, handle.id, JobStatus.DEAD)
    assert len(endpoint.hits) == attempts == len(report.attempts)
    assert {a.error_type for a in report.attempts} == {error_type}
    assert {hit.key for hit in endpoint.hits} == {handle.id}


async def test_http_post_without_a_url_is_permanent(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with running_worker(ts_env.client, task_queue):
        handle = await submit(
            ts_env, task_queue, handler="http.post", delay=0, payload={"url": "ftp://x"}
        )
        report = await wait_for_status(ts_env, handle.id, JobStatus.DEAD)
    assert [a.error for a in report.attempts] == ["payload.url must be an http(s) URL"]


async def test_log_handler_runs_on_a_worker_that_serves_it(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with running_worker(ts_env.client, task_queue):
        logged = await submit(ts_env, task_queue, handler="log", delay=0, payload={"m": 1})
        assert (await finished(ts_env, logged)).result == {"logged": True}
