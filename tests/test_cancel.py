"""Cancel you can trust, on a dev server with real worker processes: a cancel reaches a running
handler within the promised bound on the default lease, ``jobctl status`` (and the board) say
``cancelling`` until the job settles, and a handler that finishes just as the cancel arrives
ends the job ``cancelled`` with the handler's result kept and the audit trail saying so."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client

from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.starter.board import Snapshot
from jobctl.starter.errors import SpecError
from jobctl.worker import WorkerSettings
from jobctl.workflows.models import JobReport, JobStatus
from tests.helpers.drills import read_records
from tests.helpers.jobs import job_report
from tests.helpers.poll import eventually
from tests.helpers.processes import Workers, jobs

pytestmark = pytest.mark.devserver
HANDLERS = load_handlers("tests.handlers").names()
# The README's promise for the default worker (JOBS_CANCEL_LATENCY 10 s): at most 15 s.
PROMISE = 15.0
DEFAULT_CANCEL_WITHIN = 10.0


async def run_now(client: Client, queue: str, handler: str, payload: dict[str, Any]) -> str:
    """Schedule a job due now, with the default lease (60 s)."""
    job_id = f"cancel-{uuid.uuid4().hex[:8]}"
    spec = {"id": job_id, "name": "cancel me", "handler": handler, "delay": 0}
    await operations.schedule(client, {**spec, "payload": payload}, HANDLERS, task_queue=queue)
    return job_id


async def record(path: Path, event: str, timeout: float) -> dict[str, Any]:
    """The handler's first ``event`` line, waiting up to ``timeout`` seconds."""

    async def found() -> list[dict[str, Any]]:
        return [r for r in read_records(path) if r["event"] == event]

    return (await eventually(found, timeout=timeout, interval=0.1, what=f"{event} record"))[0]


async def settled(client: Client, job_id: str, timeout: float = 60) -> JobReport:
    async def look() -> tuple[JobReport, bool]:
        # Closed first, then the report: read the other way round, a job that closed between
        # the two reads was seen closed with its report from before (one CI run: "cancelling").
        desc = await client.get_workflow_handle(job_id).describe()
        report = await job_report(client, job_id)
        return report, desc.close_time is not None

    report, _ = await eventually(
        look, lambda seen: seen[1], timeout=timeout, interval=0.3, what=f"{job_id} closed"
    )
    return report


async def cancel_at(client: Client, job_id: str, moment: float) -> float:
    """Cancel at ``moment`` (epoch seconds); returns when the cancel was sent."""
    await asyncio.sleep(max(0.0, moment - time.time()))
    sent = time.time()
    await operations.cancel(client, job_id, note="test", actor="test")
    return sent


@pytest.mark.parametrize("handler", ["test.cancel_watch", "test.cancel_watch_async"])
async def test_cancel_reaches_a_running_handler_within_the_promise_on_the_default_lease(
    dev_client: Client, task_queue: str, workers: Workers, tmp_path: Path, handler: str
) -> None:
    """Default 60 s lease, a 40 s handler, cancelled 3 s in: it sees ctx.cancelled (sync) or
    CancelledError (async) within 15 s, and the job ends cancelled."""
    workers.start()
    records = tmp_path / "records.jsonl"
    job_id = await run_now(dev_client, task_queue, handler, {"path": str(records), "seconds": 40})
    start = await record(records, "start", timeout=30)
    sent = await cancel_at(dev_client, job_id, start["at"] + 3)
    on_its_way = await job_report(dev_client, job_id)  # the next heartbeat is ~7 s away
    assert on_its_way.status == JobStatus.CANCELLING
    assert on_its_way.cancel_within == DEFAULT_CANCEL_WITHIN
    seen = await record(records, "cancel_seen", timeout=40)  # longer than the promise: a figure
    delay = seen["at"] - sent
    assert delay <= PROMISE, f"the cancel took {delay:.1f}s to reach the handler"
    report = await settled(dev_client, job_id)
    assert report.status == JobStatus.CANCELLED
    assert [a.outcome for a in report.attempts] == ["cancelled"]
    assert "done" not in {r["event"] for r in read_records(records)}


async def test_status_says_cancelling_until_the_job_settles(
    dev_client: Client, cli: dict[str, str], task_queue: str, workers: Workers, tmp_path: Path
) -> None:
    """Right after ``jobctl cancel`` returns, the CLI, the API's report and the board say
    cancelling, with the most the cancel takes to reach the handler; then cancelled. A second
    cancel meanwhile changes nothing."""
    # A 30 s cancel latency keeps the cancel on its way long enough for several CLI calls on a
    # loaded machine; the promise shown follows the setting.
    workers.start(JOBS_CANCEL_LATENCY="30s")
    records = tmp_path / "records.jsonl"
    payload = {"path": str(records), "release": str(tmp_path / "never"), "seconds": 40}
    job_id = await run_now(dev_client, task_queue, "test.ignore_cancel", payload)
    await record(records, "start", timeout=30)
    await asyncio.sleep(1)  # the attempt's start is recorded before the handler runs
    cancelled = jobs(cli, "cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    # The handler ignores the cancel: the job settles only once the cancel reached it (the
    # next heartbeat, ~30 s after the handler started) and its grace ran out (5 s).
    report = await job_report(dev_client, job_id)
    assert report.status == JobStatus.CANCELLING
    assert report.cancel_within == 30
    assert report.attempts and report.attempts[-1].outcome == "running"
    shown = jobs(cli, "status", job_id)
    assert shown.returncode == 0, shown.stderr
    [line] = [x for x in shown.stdout.splitlines() if x.startswith("status:")]
    assert "cancelling: requested" in line and "within ~30s" in line, line
    as_json = json.loads(jobs(cli, "status", job_id, "--json").stdout)
    assert as_json["status"] == "cancelling" and as_json["cancel_within"] == 30
    board = await Snapshot(dev_client, datetime.now(UTC)).build()
    [card] = [c for c in board.columns["running"].cards if c.job_id == job_id]
    assert card.cancelling and card.cancel_within == 30
    await operations.cancel(dev_client, job_id, note="again", actor="test")
    assert (await job_report(dev_client, job_id)).status == JobStatus.CANCELLING
    final = await settled(dev_client, job_id)
    assert final.status == JobStatus.CANCELLED
    assert [a.outcome for a in final.attempts] == ["cancelled"]
    assert [e.note for e in final.audit if e.action == "cancel"] == [None]


async def test_a_handler_finishing_as_the_cancel_arrives_ends_cancelled_with_its_result(
    dev_client: Client, task_queue: str, workers: Workers, tmp_path: Path
) -> None:
    """The cancel is accepted while the handler runs; the handler (ignoring ctx.cancelled)
    finishes its work 1 s later, before the cancel reaches it. The job ends cancelled, not
    done: the attempt succeeded, its result is kept, the audit trail says what happened."""
    # A slower cancel (30 s) leaves the handler ample time to finish before the cancel reaches
    # it, whatever the load; the promise it shows follows the setting.
    workers.start(JOBS_CANCEL_LATENCY="30s")
    records, release = tmp_path / "records.jsonl", tmp_path / "release"
    payload = {"path": str(records), "release": str(release), "seconds": 40, "after": 1}
    job_id = await run_now(dev_client, task_queue, "test.ignore_cancel", payload)
    await record(records, "start", timeout=30)
    await asyncio.sleep(1)
    await operations.cancel(dev_client, job_id, note="changed my mind", actor="test")
    cancel_requested = PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED
    await eventually(  # the workflow asked the activity to cancel
        dev_client.get_workflow_handle(job_id).describe,
        lambda desc: (
            (pending := desc.raw_description.pending_activities)
            and pending[0].state == cancel_requested
        ),
        timeout=20,
        interval=0.1,
        what="cancel requested of the activity",
    )
    midway = await job_report(dev_client, job_id)
    assert midway.status == JobStatus.CANCELLING and midway.cancel_within == 30
    release.touch()
    done = await record(records, "done", timeout=20)
    assert done["cancelled"] is False  # the cancel had not reached the handler
    report = await settled(dev_client, job_id)
    assert report.status == JobStatus.CANCELLED
    assert [a.outcome for a in report.attempts] == ["succeeded"]
    assert report.result == {"finished": True}
    [entry] = [e for e in report.audit if e.action == "cancel"]
    assert entry.actor == "test" and entry.note == "changed my mind"
    assert entry.detail and "handler had finished" in entry.detail
    desc = await dev_client.get_workflow_handle(job_id).describe()
    assert desc.status is not None and desc.status.name == "CANCELED"


@pytest.mark.parametrize("value", ["0.5", "0", "-3", "soon", "nan", "inf"])
def test_cancel_latency_setting_is_checked(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBS_CANCEL_LATENCY", value)
    with pytest.raises(SpecError, match="JOBS_CANCEL_LATENCY"):
        WorkerSettings()


def test_cancel_latency_setting_reads_durations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOBS_CANCEL_LATENCY", raising=False)
    assert WorkerSettings().cancel_latency == DEFAULT_CANCEL_WITHIN
    monkeypatch.setenv("JOBS_CANCEL_LATENCY", "1m")
    assert WorkerSettings().cancel_latency == 60.0
