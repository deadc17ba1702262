"""Cron backfill on the time-skipping server: every slot of a past range once, by slot id (a
second identical backfill runs none), within the cron's bounds, all at once or one after
another (``buffer_all``), and the client's, the validator's and the range cap's answers."""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from jobctl.starter import operations
from jobctl.starter.api import create_app
from jobctl.starter.errors import InvalidTransition, SpecError
from jobctl.workflows import cronmath, names
from jobctl.workflows.cron_rules import MAX_BACKFILL_SLOTS, MAX_QUEUED_BACKFILLS, backfill_slots
from jobctl.workflows.models import CronReport, JobStatus, parse_spec
from jobctl.workflows.models.cron import BackfillAnswer, BackfillRequest
from tests.helpers.cron import report, time_skipping_lead
from tests.helpers.poll import eventually
from tests.helpers.processes import jobs
from tests.helpers.temporal import end_singletons, running_worker

HOUR = timedelta(hours=1)


def this_hour() -> datetime:
    """The start of the current hour, real time (a backfill's ``to`` is checked against this
    machine's clock; the test server's starts at it and only moves ahead)."""
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


async def start_cron(env: WorkflowEnvironment, task_queue: str, **fields: Any) -> str:
    """A cron started as ``jobctl schedule`` starts it (its memo holds its schedule)."""
    now = await env.get_current_time()
    data = {"name": "backfilled", "handler": "log", "cron": "0 * * * *", **time_skipping_lead(env)}
    data.update(fields)
    spec = parse_spec(data, now, new_id=f"cron-{uuid.uuid4().hex[:10]}")
    await operations.start(env.client, spec, now, task_queue=task_queue)
    return spec.id


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def slot_of(key: str) -> datetime:
    return datetime.fromisoformat(key.rsplit("@", 1)[1])


async def worked_through(client: Client, cron_id: str, outcomes: int) -> CronReport:
    """The cron's report once ``outcomes`` backfill slots were started or found duplicate and
    none of its slot jobs still runs."""

    async def probe() -> CronReport:
        return await report(client, cron_id)

    def done(current: CronReport) -> bool:
        handled = current.counts.get("backfilled", 0) + current.counts.get("duplicate", 0)
        return handled >= outcomes and not current.running

    return await eventually(probe, done, timeout=120, interval=0.2, what=f"{cron_id} backfilled")


@pytest.mark.timeout(240)
async def test_a_week_of_an_hourly_cron_is_168_slots_once_and_a_second_backfill_runs_none(
    ts_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    records = tmp_path / "records.jsonl"
    hour = this_hour()  # once: a test crossing the top of an hour must not mix two
    end = hour - timedelta(seconds=1)
    start = hour - timedelta(days=7)
    async with running_worker(ts_env.client, task_queue):
        cron_id = await start_cron(
            ts_env, task_queue, handler="test.record", payload={"path": str(records)}
        )
        first = await operations.backfill(ts_env.client, cron_id, start, end, "allow_all")
        assert (first.slots, first.first, first.last) == (168, start, end - timedelta(seconds=3599))
        after_first = await worked_through(ts_env.client, cron_id, 168)
        ran = [line for line in lines(records) if line["event"] == "done"]

        second = await operations.backfill(ts_env.client, cron_id, start, end, "allow_all")
        assert second.slots == 168
        final = await worked_through(ts_env.client, cron_id, 2 * 168)

    # The cron's own slot runs too if the test crossed the top of an hour; the records of the
    # week's range are the backfills' alone.
    tops_crossed = (this_hour() - hour) // HOUR
    in_range = [line for line in lines(records) if start <= slot_of(line["key"]) <= end]
    assert after_first.counts.get("backfilled") == 168
    slots = sorted(slot_of(line["key"]) for line in ran if start <= slot_of(line["key"]) <= end)
    assert slots == [start + i * HOUR for i in range(168)], "each slot of the week once"
    assert len(in_range) == 2 * 168, "the second backfill started nothing"
    assert final.counts.get("backfilled") == 168
    assert final.counts.get("duplicate") == 168
    assert final.counts.get("ran", 0) <= tops_crossed  # no other regular slot came due
    audit = [entry for entry in final.audit if entry.action == "backfill"]
    assert len(audit) == 2 and audit[0].detail is not None and "168 slot(s)" in audit[0].detail
    kept = final.recent_slots[0]
    assert (kept.outcome, kept.job_id) == ("duplicate", f"{cron_id}@{cronmath.iso_utc(kept.slot)}")


async def test_slots_the_cron_ran_itself_are_not_run_again(
    ts_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    records = tmp_path / "records.jsonl"
    async with running_worker(ts_env.client, task_queue):
        cron_id = await start_cron(
            ts_env, task_queue, handler="test.record", payload={"path": str(records)}
        )
        begun = await ts_env.get_current_time()
        await ts_env.sleep(timedelta(hours=3, minutes=10))
        await eventually(
            lambda: report(ts_env.client, cron_id),
            lambda current: current.counts.get("ran", 0) >= 3 and not current.running,
            what="three regular slots",
        )
        # Paused first: under load the test server's clock can move on to a fourth slot, and
        # the backfill's range must end where the cron's own slots do.
        await operations.pause(ts_env.client, cron_id)
        regular = await report(ts_env.client, cron_id)
        ran_by_cron = {r.slot for r in regular.recent_slots if r.outcome == "ran"}
        # The test server's clock is ahead of this machine's now: ask the workflow itself.
        handle = ts_env.client.get_workflow_handle(cron_id)
        answer = await handle.execute_update(
            names.UPDATE_BACKFILL,
            BackfillRequest(from_=begun - 2 * HOUR, to=max(ran_by_cron)),
            result_type=BackfillAnswer,
        )
        await operations.resume(ts_env.client, cron_id)
        final = await worked_through(ts_env.client, cron_id, 2 + len(ran_by_cron))

    assert len(ran_by_cron) >= 3
    assert answer.slots == 2 + len(ran_by_cron) and answer.overlap == "buffer_all"
    dupes = {r.slot for r in final.recent_slots if r.outcome == "duplicate"}
    assert dupes == ran_by_cron
    done = [slot_of(line["key"]) for line in lines(records) if line["event"] == "done"]
    backfilled = {r.slot for r in final.recent_slots if r.outcome == "backfilled"}
    assert len(backfilled) == 2, "the two hours before the cron began"
    assert len(done) == len(set(done)), "every slot once"
    assert set(done) >= ran_by_cron | backfilled


async def test_buffer_all_runs_one_slot_after_another(
    ts_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    records = tmp_path / "records.jsonl"
    start = this_hour() - 5 * HOUR
    end = start + 4 * HOUR
    async with running_worker(ts_env.client, task_queue):
        cron_id = await start_cron(
            ts_env,
            task_queue,
            handler="test.record",
            payload={"path": str(records), "seconds": 0.3},
            overlap="allow_all",
        )
        answer = await operations.backfill(ts_env.client, cron_id, start, end, "buffer_all")
        final = await worked_through(ts_env.client, cron_id, 5)
    assert answer.slots == 5
    assert final.counts.get("backfilled") == 5
    # Only the backfilled slots: the cron's own slot runs too when the test crosses the top of
    # an hour (a CI run started at 11:59:58 recorded six).
    events = [line for line in lines(records) if start <= slot_of(line["key"]) <= end]
    spans: dict[str, dict[str, float]] = {}
    for line in events:
        spans.setdefault(line["key"], {})[line["event"]] = line["at"]
    ordered = sorted(spans.values(), key=lambda span: span["start"])
    assert len(ordered) == 5
    for earlier, later in itertools.pairwise(ordered):
        assert earlier["done"] <= later["start"], "buffer_all: never two slots at once"
    keys = [line["key"] for line in events if line["event"] == "start"]
    assert [slot_of(k) for k in keys] == [start + i * HOUR for i in range(5)], "in slot order"


async def test_a_backfill_keeps_to_the_crons_bounds(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    hour = this_hour()
    bound = hour - 3 * HOUR
    async with running_worker(ts_env.client, task_queue):
        cron_id = await start_cron(ts_env, task_queue, start=bound.isoformat())
        answer = await operations.backfill(
            ts_env.client, cron_id, hour - 10 * HOUR, hour - timedelta(seconds=1)
        )
        final = await worked_through(ts_env.client, cron_id, 3)
    assert (answer.slots, answer.first) == (3, bound), "no slot before start"
    backfilled = sorted(r.slot for r in final.recent_slots if r.outcome == "backfilled")
    assert backfilled == [bound, bound + HOUR, bound + 2 * HOUR]
    assert {r.status for r in final.recent_slots if r.outcome == "backfilled"} == {JobStatus.DONE}


async def test_a_paused_cron_holds_its_backfills_and_queues_at_most_ten(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    hour = this_hour()
    start, end = hour - 3 * HOUR, hour - HOUR
    async with running_worker(ts_env.client, task_queue):
        cron_id = await start_cron(ts_env, task_queue)
        await operations.pause(ts_env.client, cron_id)
        for count in range(1, MAX_QUEUED_BACKFILLS + 1):
            answer = await operations.backfill(ts_env.client, cron_id, start, end)
            assert (answer.slots, answer.queued) == (3, count)
        with pytest.raises(InvalidTransition, match="10 backfills are already waiting"):
            await operations.backfill(ts_env.client, cron_id, start, end)
        held = await report(ts_env, cron_id)
        await operations.resume(ts_env.client, cron_id)
        final = await worked_through(ts_env.client, cron_id, 3 * MAX_QUEUED_BACKFILLS)
    assert "backfilled" not in held.counts, "nothing starts while the cron is paused"
    assert final.counts["backfilled"] == 3
    assert final.counts["duplicate"] == 3 * (MAX_QUEUED_BACKFILLS - 1)


async def test_an_empty_range_queues_nothing(ts_env: WorkflowEnvironment, task_queue: str) -> None:
    async with running_worker(ts_env.client, task_queue):
        cron_id = await start_cron(ts_env, task_queue)
        at = this_hour() - timedelta(minutes=30)
        answer = await operations.backfill(ts_env.client, cron_id, at, at + timedelta(minutes=1))
        current = await report(ts_env.client, cron_id)
    assert (answer.slots, answer.first, answer.last) == (0, None, None)
    assert "backfilled" not in current.counts


async def test_the_range_cap_is_refused_by_the_client_and_by_the_workflow(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    end = this_hour()
    start = end - timedelta(minutes=MAX_BACKFILL_SLOTS)  # both ends included: one too many
    async with running_worker(ts_env.client, task_queue):
        cron_id = await start_cron(ts_env, task_queue, cron="* * * * *")
        with pytest.raises(SpecError, match=f"more than {MAX_BACKFILL_SLOTS:,} slots"):
            await operations.backfill(ts_env.client, cron_id, start, end)
        handle = ts_env.client.get_workflow_handle(cron_id)
        request = BackfillRequest(from_=start, to=end)
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            await handle.execute_update(names.UPDATE_BACKFILL, request)
        assert f"more than {MAX_BACKFILL_SLOTS:,} slots" in str(failed.value.cause)
        exact = await operations.backfill(
            ts_env.client, cron_id, start + timedelta(minutes=1), end, "buffer_all"
        )
        await handle.cancel()
    assert exact.slots == MAX_BACKFILL_SLOTS


async def test_only_a_running_cron_is_backfilled(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    now = await ts_env.get_current_time()
    spec = parse_spec({"name": "one", "handler": "log", "delay": 3600}, now, new_id="one-shot")
    async with running_worker(ts_env.client, task_queue):
        await operations.start(ts_env.client, spec, now, task_queue=task_queue)
        with pytest.raises(InvalidTransition, match="not a cron job"):
            await operations.backfill(ts_env.client, "one-shot", now - HOUR, now - HOUR)


def test_slots_are_counted_within_the_range_and_the_bounds() -> None:
    at = datetime(2026, 3, 1, tzinfo=UTC)
    spec = parse_spec(
        {"name": "c", "handler": "log", "cron": "0 * * * *", "end": (at + 5 * HOUR).isoformat()},
        at,
        new_id="c",
    )
    cron, zone = cronmath.parse("0 * * * *"), cronmath.zone("UTC")
    assert backfill_slots(spec, cron, zone, at, at + 10 * HOUR) == [at + i * HOUR for i in range(6)]
    assert backfill_slots(spec, cron, zone, at + timedelta(seconds=1), at + HOUR) == [at + HOUR]
    with pytest.raises(ValueError, match="more than 3 slots"):
        backfill_slots(spec, cron, zone, at, at + 10 * HOUR, limit=3)


@pytest.mark.timeout(120)
async def test_the_cli_and_the_api_backfill_on_the_dev_server(
    dev_client: Client, cli: dict[str, str], task_queue: str
) -> None:
    """``jobctl cron backfill`` and ``POST /cron/{id}/backfill`` end to end: the CLI queues
    three slots; the API's identical request finds all three taken (duplicate)."""
    cron_id = f"cron-{uuid.uuid4().hex[:10]}"
    hour = this_hour()
    start, end = hour - 3 * HOUR, hour - HOUR
    async with running_worker(dev_client, task_queue, publish=True):
        data = {"id": cron_id, "name": "bf", "handler": "log", "cron": "0 * * * *"}
        await operations.schedule(dev_client, data, handlers={"log"}, task_queue=task_queue)
        args = ["cron", "backfill", cron_id, "--from", start.isoformat(), "--to", end.isoformat()]
        done = await asyncio.to_thread(jobs, cli, *args, "--json")
        assert done.returncode == 0, done.stderr
        answer = BackfillAnswer.model_validate_json(done.stdout)
        assert (answer.slots, answer.first, answer.last) == (3, start, end)
        await worked_through(dev_client, cron_id, 3)

        app = create_app(token="", client=dev_client, task_queue=task_queue)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
            body = {"from": start.isoformat(), "to": end.isoformat(), "note": "again"}
            again = await http.post(f"/cron/{cron_id}/backfill", json=body)
        assert again.status_code == 200, again.text
        assert again.json()["slots"] == 3
        final = await worked_through(dev_client, cron_id, 6)
        await operations.cancel(dev_client, cron_id, None)
        await end_singletons(dev_client)
    assert (final.counts.get("backfilled"), final.counts.get("duplicate")) == (3, 3)
    trail = [entry for entry in final.audit if entry.action == "backfill"]
    assert len(trail) == 2 and trail[0].actor.startswith("cli:")
    assert trail[1].note == "again" and not trail[1].actor.startswith("cli:")
