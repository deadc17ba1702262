"""The dead-letter queue on the time-skipping server: park, alert, requeue, discard."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from jobctl.activities.notify import WEBHOOK_ENV
from jobctl.starter import dlq
from jobctl.workflows.models import JOB_STATUS, DeadEntry, JobStatus
from jobctl.workflows.names import DLQ_WORKFLOW_ID
from tests.helpers.dlq import POISON_ONCE, dlq_log, wait_for_log
from tests.helpers.httpserver import serve
from tests.helpers.jobs import finished, submit, wait_for_status
from tests.helpers.poll import eventually
from tests.helpers.temporal import running_worker


@pytest.fixture(autouse=True)
def _no_webhook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WEBHOOK_ENV, raising=False)


async def test_a_dead_job_is_parked_alerted_and_requeued_through_the_dlq(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    client = ts_env.client
    async with running_worker(client, task_queue):
        handle = await submit(ts_env, task_queue, name="nightly", delay=0, **POISON_ONCE)
        dead = await wait_for_status(ts_env, handle.id, JobStatus.DEAD)
        assert dead.parked_at is not None
        await wait_for_log(client, "parked", handle.id)
        [entry] = await dlq.recent_entries(client)
        assert (entry.job_id, entry.name, entry.handler, entry.attempts) == (
            handle.id,
            "nightly",
            "demo.sleep",
            1,
        )
        assert entry.last_error and "demo failure on attempt 1" in entry.last_error
        await wait_for_log(client, "alerted", "")

        await client.get_workflow_handle(DLQ_WORKFLOW_ID).signal("requeue", handle.id)
        report = await finished(ts_env, handle)
        assert [(a.attempt, a.round, a.outcome) for a in report.attempts] == [
            (1, 1, "failed"),
            (2, 2, "succeeded"),
        ]
        await wait_for_log(client, "requeued", handle.id)
        assert await dlq.recent_entries(client) == []
        actions = [x.action for x in await dlq_log(client) if x.job_id == handle.id]
        assert actions == ["parked", "forwarded", "requeued"]


async def test_requeue_twice_runs_once_and_requeue_of_a_live_job_is_a_logged_no_op(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    client = ts_env.client
    dlq_handle = client.get_workflow_handle(DLQ_WORKFLOW_ID)
    async with running_worker(client, task_queue):
        dead = await submit(ts_env, task_queue, delay=0, **POISON_ONCE)
        await wait_for_log(client, "parked", dead.id)
        waiting = await submit(ts_env, task_queue, handler="log", delay="1h")
        await dlq_handle.signal("requeue", dead.id)
        await dlq_handle.signal("requeue", dead.id)
        await dlq_handle.signal("requeue", waiting.id)
        await dlq_handle.signal("requeue", "no-such-job")
        report = await finished(ts_env, dead)
        assert len(report.attempts) == 2  # one fresh attempt, not two
        [ignored_dead] = await wait_for_log(client, "ignored", dead.id)
        assert "requeue: job is" in ignored_dead.detail
        [ignored_waiting] = await wait_for_log(client, "ignored", waiting.id)
        assert ignored_waiting.detail == "requeue: job is scheduled"
        [missing] = await wait_for_log(client, "ignored", "no-such-job")
        assert "no running job" in missing.detail
        assert (await dlq.recent_entries(client)) == []


async def test_discard_through_the_dlq_ends_the_job_dead_for_good(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    client = ts_env.client
    async with running_worker(client, task_queue):
        handle = await submit(ts_env, task_queue, delay=0, **POISON_ONCE)
        await wait_for_log(client, "parked", handle.id)
        await client.get_workflow_handle(DLQ_WORKFLOW_ID).signal("discard", handle.id)
        with pytest.raises(WorkflowFailureError) as failure:
            await finished(ts_env, handle)
        assert "discarded after 1 attempts" in str(failure.value.cause)
        await wait_for_log(client, "discarded", handle.id)
        assert await dlq.recent_entries(client) == []
        status = (await handle.describe()).typed_search_attributes
        assert status.get(JOB_STATUS) == "discarded"  # decision: upserted just before it ends


async def test_requeue_signal_on_the_job_itself_updates_the_dlq(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    client = ts_env.client
    async with running_worker(client, task_queue):
        handle = await submit(ts_env, task_queue, delay=0, **POISON_ONCE)
        await wait_for_log(client, "parked", handle.id)
        await handle.signal("requeue")
        report = await finished(ts_env, handle)
        assert [a.round for a in report.attempts] == [1, 2]
        await wait_for_log(client, "requeued", handle.id)
        assert await dlq.recent_entries(client) == []


async def test_webhook_receives_the_parked_entries(
    ts_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve() as endpoint:
        monkeypatch.setenv(WEBHOOK_ENV, f"{endpoint.url}/status/204")
        async with running_worker(ts_env.client, task_queue):
            handle = await submit(ts_env, task_queue, delay=0, **POISON_ONCE)
            await wait_for_log(ts_env.client, "alerted", "")
    [hit] = endpoint.hits
    body: dict[str, Any] = hit.body
    assert body["event"] == "jobs.parked" and body["count"] == 1
    assert DeadEntry.model_validate(body["entries"][0]).job_id == handle.id


async def test_a_failing_webhook_is_retried_and_never_loses_an_entry(
    ts_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve() as endpoint:
        monkeypatch.setenv(WEBHOOK_ENV, f"{endpoint.url}/status/500")
        async with running_worker(ts_env.client, task_queue):
            handle = await submit(ts_env, task_queue, delay=0, **POISON_ONCE)
            await wait_for_log(ts_env.client, "parked", handle.id)

            async def hits() -> int:
                return len(endpoint.hits)

            # The alert's 5-minute budget starts with its first attempt: skip past it only
            # once that attempt has run (queries do not skip time; a budget that began after
            # the skip would take minutes of real time).
            await eventually(hits, lambda count: count >= 1, what="the alert's first attempt")
            await ts_env.sleep(timedelta(minutes=6))  # past the alert's 5-minute budget
            [failed] = await wait_for_log(ts_env.client, "alert-failed", "")
            assert [e.job_id for e in await dlq.recent_entries(ts_env.client)] == [handle.id]
    assert len(endpoint.hits) > 3  # retried with backoff before giving up
    assert "1 parked job(s)" in failed.detail
