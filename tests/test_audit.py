"""The operator's audit trail: every control records who, when (the server's time) and why on
the job or cron itself, through the CLI (``cli:<user>``) and the API (the token's name)."""

from __future__ import annotations

import asyncio
import getpass
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from jobctl.starter import dlq as dead_letters
from jobctl.starter import operations
from jobctl.workflows.models import JobStatus
from tests.helpers.api import wait_status
from tests.helpers.cli import jobs_here_blocking as ask
from tests.helpers.cron import report as cron_report
from tests.helpers.cron import start_cron
from tests.helpers.processes import Api, Workers, jobs_json, wait_for_async
from tests.helpers.temporal import running_worker

pytestmark = pytest.mark.devserver

CLI_ACTOR = f"cli:{getpass.getuser()}"
POISON = '{"seconds": 0, "fail_times": 1}'  # fails attempt 1; a requeued attempt 2 succeeds
# Controls as their history events name them (an update's name, a signal's name).
CONTROLS = {
    "pause": "pause",
    "resume": "resume",
    "trigger": "trigger",
    "update": "update",
    "requeue": "requeue",
    "discard": "discard",
    "cancel_requested": "cancel",
}


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def applied_at(client: Client, job_id: str) -> list[tuple[str, datetime]]:
    """Each control in the job's history with the server time the workflow applied it: an
    update at the start of the workflow task that accepted it, a signal at the start of the
    next workflow task after it. This is what ``workflow.now()`` reads there."""
    applied: list[tuple[str, datetime]] = []
    waiting: list[str] = []  # signals not yet handed to a workflow task
    task_started: datetime | None = None
    async for event in client.get_workflow_handle(job_id).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            task_started = event.event_time.ToDatetime(tzinfo=UTC)
            applied += [(name, task_started) for name in waiting]
            waiting = []
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            attrs = event.workflow_execution_update_accepted_event_attributes
            assert task_started is not None
            applied.append((CONTROLS[attrs.accepted_request.input.name], task_started))
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            name = event.workflow_execution_signaled_event_attributes.signal_name
            if name in CONTROLS:
                waiting.append(CONTROLS[name])
    return applied


async def assert_server_times(client: Client, job_id: str, trail: list[dict[str, Any]]) -> None:
    """The trail's times are the server's, in order: each equals the start of the workflow
    task that applied the control (to the millisecond: the SDK's clock is a float)."""
    expected = await applied_at(client, job_id)
    assert [action for action, _ in expected] == [entry["action"] for entry in trail]
    for (action, server_time), entry in zip(expected, trail, strict=True):
        at = instant(entry["at"])
        assert abs(at - server_time) <= timedelta(milliseconds=1), (action, at, server_time)
    times = [instant(entry["at"]) for entry in trail]
    assert times == sorted(times) and len(set(times)) == len(times)


def trail_of(report: dict[str, Any]) -> list[tuple[str, str, str | None, str | None]]:
    return [(e["action"], e["actor"], e["note"], e["detail"]) for e in report["audit"]]


async def test_cli_trail_pause_resume_trigger_then_requeue_through_the_dlq(
    cli: dict[str, str], workers: Workers, dev_client: Client
) -> None:
    workers.start()
    job_id = new_id("audit-cli")
    jobs_json(
        cli,
        "schedule",
        "audited",
        "--handler",
        "demo.sleep",
        "--payload",
        POISON,
        "--in",
        "1h",
        "--max-attempts",
        "1",
        "--id",
        job_id,
    )
    paused = jobs_json(cli, "pause", job_id, "--note", "waiting for the db migration")
    assert trail_of(paused) == [("pause", CLI_ACTOR, "waiting for the db migration", None)]
    assert ask(cli, "resume", job_id).returncode == 0
    assert ask(cli, "trigger", job_id, "--note", "migration done").returncode == 0
    await wait_for_async(cli, job_id, "dead")
    requeued = ask(cli, "dlq", "requeue", job_id, "--note", "handler fixed")
    assert requeued.returncode == 0, requeued.stderr
    done = await wait_for_async(cli, job_id, "done")

    assert trail_of(done) == [
        ("pause", CLI_ACTOR, "waiting for the db migration", None),
        ("resume", CLI_ACTOR, None, None),
        ("trigger", CLI_ACTOR, "migration done", "runs now"),
        ("requeue", CLI_ACTOR, "handler fixed", "round 2: 1 fresh attempt(s)"),
    ]
    await assert_server_times(dev_client, job_id, done["audit"])
    # The requeue is recorded when it reaches the job: after the attempt that killed it.
    [failed, succeeded] = done["attempts"]
    requeued_at = instant(done["audit"][-1]["at"])
    assert instant(failed["ended_at"]) <= requeued_at <= instant(succeeded["started_at"])

    text = ask(cli, "status", job_id)
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("audit trail"))
    rows = lines[header + 1 : header + 5]
    for row, (action, note) in zip(
        rows,
        [
            ("pause", "waiting for the db migration"),
            ("resume", ""),
            ("trigger", "migration done"),
            ("requeue", "handler fixed"),
        ],
        strict=True,
    ):
        assert f" {action} " in row and CLI_ACTOR in row and note in row, row
    assert "round 2: 1 fresh attempt(s)" in rows[3]

    too_long = ask(cli, "pause", job_id, "--note", "x" * 501)
    assert too_long.returncode == 2
    assert too_long.stderr.startswith("error: note: must be at most 500 characters")
    assert len(jobs_json(cli, "status", job_id)["audit"]) == 4


async def test_api_records_the_token_name(
    cli: dict[str, str], workers: Workers, dev_client: Client
) -> None:
    workers.start()
    env = {**cli, "JOBS_API_TOKENS": "alice:tok-alice, bob:tok-bob", "JOBS_API_TOKEN": "tok-api"}
    api = Api(env).start()
    clients = {
        name: httpx.Client(
            base_url=api.url, timeout=30, headers={"Authorization": f"Bearer tok-{name}"}
        )
        for name in ("alice", "bob", "api")
    }
    alice, bob, single = clients["alice"], clients["bob"], clients["api"]
    try:
        stranger = alice.post("/jobs/x/pause", headers={"Authorization": "Bearer no"})
        assert stranger.status_code == 401
        job_id = new_id("audit-api")
        created = alice.post(
            "/jobs",
            json={
                "id": job_id,
                "name": "audited",
                "handler": "demo.sleep",
                "payload": {"seconds": 0, "fail_times": 1},
                "delay": "1h",
                "max_attempts": 1,
            },
        )
        assert created.status_code == 201, created.text
        paused = alice.post(f"/jobs/{job_id}/pause", json={"note": "hold for the vendor"})
        assert paused.status_code == 200, paused.text
        assert trail_of(paused.json()) == [("pause", "alice", "hold for the vendor", None)]
        resumed = bob.post(f"/jobs/{job_id}/resume", params={"note": "vendor ready"})
        assert resumed.status_code == 200, resumed.text
        assert single.post(f"/jobs/{job_id}/trigger").status_code == 200  # no body, as before
        wait_status(alice, job_id, "dead")
        # A body sent as bytes, declared as JSON (a body needs Content-Type: application/json).
        requeued = alice.post(
            f"/dlq/{job_id}/requeue",
            content=b'{"note": "retry after fix"}',
            headers={"Content-Type": "application/json"},
        )
        assert requeued.status_code == 200, requeued.text
        done = wait_status(alice, job_id, "done")
        assert trail_of(done) == [
            ("pause", "alice", "hold for the vendor", None),
            ("resume", "bob", "vendor ready", None),
            ("trigger", "api", None, "runs now"),
            ("requeue", "alice", "retry after fix", "round 2: 1 fresh attempt(s)"),
        ]
        await assert_server_times(dev_client, job_id, done["audit"])
        # The dead-letter queue's own log names who released the job too.
        async with asyncio.timeout(30):
            while not [
                line
                for line in await dead_letters.audit_log(dev_client, 500)
                if line.action == "requeued" and line.job_id == job_id
            ]:
                await asyncio.sleep(0.3)
        [line] = [
            line
            for line in await dead_letters.audit_log(dev_client, 500)
            if line.action == "requeued" and line.job_id == job_id
        ]
        assert line.detail == "round 1 by alice: retry after fix"

        other = new_id("audit-api")
        alice.post("/jobs", json={"id": other, "name": "x", "handler": "log", "delay": "2h"})
        long_note = bob.post(f"/jobs/{other}/pause", json={"note": "x" * 501})
        assert long_note.status_code == 422 and long_note.json()["detail"][0]["field"] == "note"
        twice = bob.post(f"/jobs/{other}/pause", params={"note": "a"}, json={"note": "b"})
        assert twice.status_code == 422 and twice.json()["detail"][0]["field"] == "note"
        cancelled = bob.request("DELETE", f"/jobs/{other}", json={"note": "not needed"})
        assert cancelled.status_code == 202, cancelled.text
        report = wait_status(bob, other, "cancelled")
        assert trail_of(report) == [("cancel", "bob", "not needed", None)]  # no refused ones
        await assert_server_times(dev_client, other, report["audit"])
    finally:
        for http in clients.values():
            http.close()
        api.stop()


async def test_cron_update_and_cancel_with_notes_show_in_the_cron_trail(
    cli: dict[str, str], workers: Workers, dev_client: Client
) -> None:
    workers.start()
    cron_id = new_id("audit-cron")
    jobs_json(
        cli, "schedule", "nightly", "--handler", "log", "--cron", "0 3 * * *", "--id", cron_id
    )
    updated = jobs_json(
        cli, "update", cron_id, "--cron", "30 4 * * *", "--note", "after the backup window"
    )
    assert updated["cron"] == "30 4 * * *"
    assert trail_of(updated) == [
        ("update", CLI_ACTOR, "after the backup window", "cron 30 4 * * *")
    ]
    assert ask(cli, "cancel", cron_id, "--note", "replaced by v2").returncode == 0
    report = await wait_for_async(cli, cron_id, "cancelled")
    assert trail_of(report) == [
        ("update", CLI_ACTOR, "after the backup window", "cron 30 4 * * *"),
        ("cancel", CLI_ACTOR, "replaced by v2", "no further slots"),
    ]
    await assert_server_times(dev_client, cron_id, report["audit"])
    text = ask(cli, "status", cron_id).stdout
    [update_row] = [line for line in text.splitlines() if " update " in line]
    assert CLI_ACTOR in update_row and "after the backup window" in update_row


async def test_a_cron_carries_its_trail_across_continue_as_new(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    client = ts_env.client
    async with running_worker(client, task_queue):
        # A tiny event budget: a few controls are enough to make the cron continue as new.
        cron = await start_cron(ts_env, task_queue, event_budget=12, cron="0 3 * * *")
        await operations.pause(client, cron.id, note="noisy", actor="tester")
        await operations.resume(client, cron.id, actor="tester")
        async with asyncio.timeout(30):
            while (await cron_report(ts_env, cron.id)).generation < 1:
                await asyncio.sleep(0.2)
        await operations.pause(client, cron.id, note="again", actor="other")
        report = await cron_report(ts_env, cron.id)
        await cron.cancel()
    assert report.status == JobStatus.PAUSED
    assert report.generation >= 1  # continued as new at least once
    assert [(e.action, e.actor, e.note) for e in report.audit] == [
        ("pause", "tester", "noisy"),
        ("resume", "tester", None),
        ("pause", "other", "again"),
    ]
    times = [e.at for e in report.audit]
    assert times == sorted(times)
