"""Issue 40: every dead job's alert comes from the dead-letter queue, one line (and one POST
with a webhook) per park, whatever ended the round; the attempt that ends it alerts nothing
itself (time-skipping server)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from jobctl.activities.notify import WEBHOOK_ENV
from jobctl.starter import dlq
from jobctl.workflows.names import DLQ_WORKFLOW_ID, NOTIFY_DEAD_JOBS
from tests.helpers.dlq import POISON_ONCE, dlq_log, wait_for_log
from tests.helpers.httpserver import serve
from tests.helpers.jobs import finished, submit
from tests.helpers.temporal import running_worker

# A handler that fails every attempt, retried: the round ends by running out of attempts.
EXHAUSTED: dict[str, Any] = {
    "handler": "demo.sleep",
    "payload": {"seconds": 0, "fail_times": 2},
    "max_attempts": 2,
    "backoff_base": 1,
}


async def dlq_activities(client: Client) -> list[str]:
    history = await client.get_workflow_handle(DLQ_WORKFLOW_ID).fetch_history()
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]


def alert_lines(caplog: pytest.LogCaptureFixture, job_id: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "jobs.alerts" and job_id in r.getMessage()
    ]


@pytest.mark.parametrize("poison", [POISON_ONCE, EXHAUSTED], ids=["permanent", "exhausted"])
async def test_with_no_webhook_the_dlq_alerts_once_by_log(
    ts_env: WorkflowEnvironment,
    task_queue: str,
    poison: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.delenv(WEBHOOK_ENV, raising=False)
    caplog.set_level(logging.WARNING, logger="jobs.alerts")
    client = ts_env.client
    async with running_worker(client, task_queue):
        job = await submit(ts_env, task_queue, name="nightly", delay=0, **poison)
        await wait_for_log(client, "parked", job.id)
        await wait_for_log(client, "alerted", "")
        [entry] = await dlq.recent_entries(client)
        attempts = poison.get("max_attempts", 1)
        [line] = alert_lines(caplog, job.id)
        # A normal job (the requeued one) still runs, and alerts nothing.
        await job.signal("requeue")
        await finished(ts_env, job)
        await wait_for_log(client, "requeued", job.id)
        ran = await dlq_activities(client)
        actions = [x.action for x in await dlq_log(client)]
    assert entry.job_id == job.id
    assert entry.attempts == attempts
    assert f"after {attempts} attempts" in line and "nightly" in line
    assert ran == [NOTIFY_DEAD_JOBS]
    assert actions.count("alerted") == 1
    assert alert_lines(caplog, job.id) == [line]  # one alert per park, none on success


async def test_with_a_webhook_the_dlq_posts_and_logs_once(
    ts_env: WorkflowEnvironment,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="jobs.alerts")
    client = ts_env.client
    with serve() as endpoint:
        monkeypatch.setenv(WEBHOOK_ENV, f"{endpoint.url}/status/204")
        async with running_worker(client, task_queue):
            job = await submit(ts_env, task_queue, delay=0, **EXHAUSTED)
            await wait_for_log(client, "alerted", "")
            [entry] = await dlq.recent_entries(client)
            ran = await dlq_activities(client)
    assert entry.job_id == job.id
    assert ran == [NOTIFY_DEAD_JOBS]
    assert len(endpoint.hits) == 1
    # The one log line is the DLQ activity's (its notifier logs as well as posting).
    assert len(alert_lines(caplog, job.id)) == 1
