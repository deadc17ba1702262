"""Cron bounds on the time-skipping server: no slot before ``start`` or after ``end``;
``max_runs`` counts the scheduled slots that started a job; a cron that reaches its bound ends
as ``done`` (its run completes, its status and Web UI details say so). And the DST policy
reaches the cron's slot math (the policy itself is tested in tests/test_dst_policy.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from jobctl.starter import operations
from jobctl.starter.errors import SpecError
from jobctl.workflows import cronmath
from jobctl.workflows.cron_rules import cron_memo, next_run_from_memo
from jobctl.workflows.cronmath import DstGap, DstRepeat
from jobctl.workflows.models import CronReport, JobSpec, JobStatus, parse_spec
from tests.helpers.cron import report, time_skipping_lead
from tests.helpers.poll import eventually
from tests.helpers.temporal import running_worker

HOUR = timedelta(hours=1)


async def start_cron(env: WorkflowEnvironment, task_queue: str, **fields: Any) -> str:
    now = await env.get_current_time()
    data = {"name": "bounded", "handler": "log", "cron": "0 * * * *", **time_skipping_lead(env)}
    data.update(fields)
    spec = parse_spec(data, now, new_id=f"cron-{uuid.uuid4().hex[:10]}")
    await operations.start(env.client, spec, now, task_queue=task_queue)
    return spec.id


def next_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0) + HOUR


def ran(current: CronReport) -> list[datetime]:
    return sorted(r.slot for r in current.recent_slots if r.outcome == "ran")


async def finished(env: WorkflowEnvironment, cron_id: str, hours: int) -> CronReport:
    """The cron's report once its run completed (it ended as done), ``hours`` on."""
    await env.sleep(timedelta(hours=hours))
    handle = env.client.get_workflow_handle(cron_id)
    await eventually(
        handle.describe,
        lambda desc: desc.status == WorkflowExecutionStatus.COMPLETED,
        what=f"{cron_id} completed",
    )
    return await report(env, cron_id)


async def test_no_slot_before_start(ts_env: WorkflowEnvironment, task_queue: str) -> None:
    now = await ts_env.get_current_time()
    start = next_hour(now) + 2 * HOUR + timedelta(minutes=30)
    async with running_worker(ts_env.client, task_queue):
        cron_id = await start_cron(ts_env, task_queue, start=start.isoformat())
        before = await report(ts_env, cron_id)
        await ts_env.sleep(start + 2 * HOUR + timedelta(minutes=10) - now)
        after = await eventually(
            lambda: report(ts_env, cron_id),
            lambda current: len(ran(current)) == 2 and not current.running,
            what="two slots after start",
        )
    first = start + timedelta(minutes=30)
    assert before.run_at == first and before.start == start
    assert before.next_slots[0].utc == cronmath.iso_utc(first)
    assert ran(after) == [first, first + HOUR]
    assert after.counts == {"ran": 2}, "nothing recorded before start (no missed slots)"


async def test_a_cron_past_its_end_is_done(ts_env: WorkflowEnvironment, task_queue: str) -> None:
    now = await ts_env.get_current_time()
    end = next_hour(now) + 2 * HOUR + timedelta(minutes=30)
    async with running_worker(ts_env.client, task_queue):
        cron_id = await start_cron(ts_env, task_queue, end=end.isoformat())
        before = await report(ts_env, cron_id)
        final = await finished(ts_env, cron_id, 5)
        listed = await operations.status(ts_env.client, cron_id)
        handle = ts_env.client.get_workflow_handle(cron_id)
        shown = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    assert len(before.next_slots) == 3, "the report shows no slot after end"
    assert ran(final) == [next_hour(now) + i * HOUR for i in range(3)]
    assert final.status == JobStatus.DONE and listed.status == JobStatus.DONE
    assert final.run_at is None and final.next_slots == []
    assert shown.current_details.startswith("**done** · no slot before end"), shown
    assert final.running == []


async def test_max_runs_counts_scheduled_slots_and_ends_the_cron_as_done(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    now = await ts_env.get_current_time()
    async with running_worker(ts_env.client, task_queue):
        cron_id = await start_cron(ts_env, task_queue, max_runs=3)
        first = await report(ts_env, cron_id)
        await operations.trigger(ts_env.client, cron_id)  # a manual run does not count
        final = await finished(ts_env, cron_id, 5)
        description = await ts_env.client.get_workflow_handle(cron_id).describe()
    assert len(first.next_slots) == 3, "the report shows only the runs left"
    assert ran(final) == [next_hour(now) + i * HOUR for i in range(3)]
    assert final.counts == {"ran": 3, "manual": 1}
    assert (final.status, final.max_runs) == (JobStatus.DONE, 3)
    assert description.close_time is not None
    # The run ended with its last slot's job: no hour waited for past it.
    assert description.close_time < next_hour(now) + 2 * HOUR + timedelta(minutes=30)


async def test_a_cron_with_no_slot_before_its_end_is_refused(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    now = await ts_env.get_current_time()
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(seconds=1)
    if end > now:  # the top of this hour was less than a second ago
        end -= HOUR
    spec = parse_spec(
        {"name": "b", "handler": "log", "cron": "0 * * * *", "end": end.isoformat()},
        now,
        new_id=f"cron-{uuid.uuid4().hex[:10]}",
    )
    with pytest.raises(SpecError) as err:
        await operations.start(ts_env.client, spec, now, task_queue=task_queue)
    assert err.value.problems[0][0] == "end"


def next_transition(zone: ZoneInfo, after: datetime, forward: bool) -> datetime:
    """The next instant after ``after`` where the zone's clocks jump forward (or back)."""
    step = after
    while True:
        later = step + timedelta(hours=6)
        before, now = step.astimezone(zone).utcoffset(), later.astimezone(zone).utcoffset()
        assert before is not None and now is not None
        if now != before and (now > before) == forward:
            return cronmath.transition_between(step, later, zone)
        step = later


POLICIES: list[tuple[DstGap, DstRepeat | None]] = [
    ("shift", None),
    ("skip", "last"),
    ("shift", "both"),
]


@pytest.mark.parametrize("forward", [True, False], ids=["spring", "fall"])
async def test_the_dst_policy_reaches_the_crons_slots(
    ts_env: WorkflowEnvironment, task_queue: str, forward: bool
) -> None:
    """A day before a transition, each cron's next slots are cronmath's under the cron's own
    policy (the wiring; the policies differ there, so a cron ignoring its own would fail)."""
    zone = cronmath.zone("America/New_York")
    cron = cronmath.parse("30 1,2 * * *")
    when = next_transition(zone, await ts_env.get_current_time(), forward)
    await ts_env.sleep(when - timedelta(days=1) - await ts_env.get_current_time())
    shown: list[list[str]] = []
    async with running_worker(ts_env.client, task_queue):
        for gap, repeat in POLICIES:
            cron_id = await start_cron(
                ts_env,
                task_queue,
                cron="30 1,2 * * *",
                timezone="America/New_York",
                dst_gap=gap,
                dst_repeat=repeat,
            )
            started = (await ts_env.client.get_workflow_handle(cron_id).describe()).start_time
            current = await report(ts_env, cron_id)
            expected = cronmath.upcoming(cron, zone, started, 5, gap=gap, repeat=repeat)
            assert [s.utc for s in current.next_slots] == [cronmath.iso_utc(s) for s in expected]
            assert (current.dst_gap, current.dst_repeat) == (gap, repeat)
            shown.append([s.utc for s in current.next_slots])
    assert len({tuple(slots) for slots in shown}) > 1, "the policies differ at this transition"


def test_the_memo_carries_bounds_and_policy_only_when_set() -> None:
    at = datetime(2026, 3, 1, tzinfo=UTC)
    plain = parse_spec({"name": "c", "handler": "log", "cron": "0 * * * *"}, at, new_id="c")
    assert cron_memo(plain) == {"cron": "0 * * * *", "timezone": "UTC"}
    start, end = at + 5 * HOUR, at + 7 * HOUR
    bounded = JobSpec.model_validate(
        {**plain.model_dump(), "start": start, "end": end, "dst_gap": "skip"}
    )
    memo = cron_memo(bounded)
    assert memo["start"] == start.isoformat() and memo["dst_gap"] == "skip"
    assert next_run_from_memo(memo, at) == start
    assert next_run_from_memo(memo, end) is None
