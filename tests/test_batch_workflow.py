"""BatchWorkflow on the time-skipping server: counts, callbacks once, continue-as-new, cancel,
and hostile messages (docs/batches.md)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from jobctl.starter.errors import InvalidTransition, JobExists
from jobctl.starter.operations import batches
from jobctl.workflows import batch_rules, inbox, names
from jobctl.workflows.models import JobReport, JobStatus
from jobctl.workflows.models.batch import BatchReport
from tests.helpers.jobs import HANDLERS
from tests.helpers.poll import eventually
from tests.helpers.temporal import running_worker


def member(**fields: Any) -> dict[str, Any]:
    return {
        "name": "m",
        "handler": "demo.sleep",
        "payload": {"seconds": 0},
        "delay": 0,
        "dispatch_lead": 0,
        **fields,
    }


def callback(**fields: Any) -> dict[str, Any]:
    return {
        "name": "cb",
        "handler": "test.echo",
        "payload": {"tag": "x"},
        "dispatch_lead": 0,
        **fields,
    }


async def start(
    env: WorkflowEnvironment, queue: str, specs: list[dict[str, Any]], **batch: Any
) -> WorkflowHandle[Any, BatchReport]:
    budget = batch.pop("event_budget", None)
    batch.setdefault("id", f"b-{uuid.uuid4().hex[:8]}")
    now = await env.get_current_time()
    await batches.schedule_batch(
        env.client, batch, specs, HANDLERS, now=now, task_queue=queue, event_budget=budget
    )
    return env.client.get_workflow_handle(
        batch_rules.workflow_id(batch["id"]), result_type=BatchReport
    )


async def settled(env: WorkflowEnvironment, handle: WorkflowHandle[Any, Any]) -> Any:
    async with env.time_skipping_unlocked():  # type: ignore[attr-defined]
        # Under load the SDK's history poll came back without the close event ("No completion
        # event found"), three times running: wait for the close by describe, then read it.
        async with asyncio.timeout(60):
            while (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await asyncio.sleep(0.2)
        return await handle.result()


async def callback_result(env: WorkflowEnvironment, job_id: str) -> dict[str, Any]:
    handle = env.client.get_workflow_handle(job_id, result_type=JobReport)
    report = await settled(env, handle)
    assert report.status == JobStatus.DONE
    result: dict[str, Any] = report.result
    return result


async def test_counts_by_outcome_and_on_complete_runs_once_with_the_dead_ids(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with running_worker(ts_env.client, task_queue):
        specs = [member(), member(), member(), member(handler="test.permanent", id="poisoned")]
        handle = await start(
            ts_env, task_queue, specs, on_complete=callback(), on_success=callback()
        )
        report = await settled(ts_env, handle)
        bid = report.batch_id
        assert (report.status, report.total, report.settled, report.unsettled) == ("done", 4, 4, 0)
        assert report.counts["done"] == 3 and report.counts["dead"] == 1
        assert report.dead == ["poisoned"] and report.succeeded is False
        assert report.callbacks["on_complete"].state == "started"
        assert report.callbacks["on_complete"].job_id == f"{bid}.on_complete"
        assert report.callbacks["on_success"].state == "skipped"
        summary = (await callback_result(ts_env, f"{bid}.on_complete"))["batch"]
        assert summary["counts"]["dead"] == 1 and summary["dead"] == ["poisoned"]
        assert summary["id"] == bid and summary["total"] == 4 and summary["succeeded"] is False
        assert (await callback_result(ts_env, f"{bid}.on_complete"))["tag"] == "x"
        # on_success never started: no such workflow
        assert await batches.batch_status(ts_env.client, bid) == report
        with pytest.raises(InvalidTransition):
            await batches.cancel_batch(ts_env.client, bid)


async def test_all_done_runs_on_success_too_and_member_ids_default_to_the_batch_id(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with running_worker(ts_env.client, task_queue):
        handle = await start(
            ts_env,
            task_queue,
            [member(), member()],
            on_complete=callback(),
            on_success=callback(id="custom-success"),
        )
        report = await settled(ts_env, handle)
        assert report.succeeded is True and report.counts["done"] == 2
        bid = report.batch_id
        assert sorted(report.callbacks) == ["on_complete", "on_success"]
        assert report.callbacks["on_success"].job_id == "custom-success"
        success = await ts_env.client.get_workflow_handle("custom-success").describe()
        assert success.parent_id == batch_rules.workflow_id(bid)
        done = await callback_result(ts_env, "custom-success")
        assert done["batch"]["succeeded"] is True
        members = [ts_env.client.get_workflow_handle(f"{bid}.{i}") for i in (0, 1)]
        for m in members:
            assert (await m.describe()).parent_id == batch_rules.workflow_id(bid)


async def test_continue_as_new_carries_the_counts_and_the_callback_still_runs_once(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with running_worker(ts_env.client, task_queue):
        count = 30
        # Due in a minute (skipped): the batch waits for their reports past its event budget.
        # Due at once, the members all settled before the batch's first wait on a fast worker
        # (1 CI run), and a batch that has finished needs no continue-as-new.
        specs = [member(delay="1m") for _ in range(count)]
        handle = await start(ts_env, task_queue, specs, on_complete=callback(), event_budget=40)
        report = await settled(ts_env, handle)
        assert report.counts["done"] == count and report.generation >= 1
        summary = (await callback_result(ts_env, f"{report.batch_id}.on_complete"))["batch"]
        assert summary["counts"]["done"] == count


async def test_cancel_counts_unsettled_members_cancelled_and_runs_the_callback(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with running_worker(ts_env.client, task_queue):
        specs = [member(), member(delay="2h"), member(delay="3h")]
        handle = await start(ts_env, task_queue, specs, on_complete=callback())
        bid = handle.id.removeprefix(names.BATCH_ID_PREFIX)
        await eventually(
            lambda: batches.batch_status(ts_env.client, bid),
            lambda r: r.counts["done"] == 1 and r.started == 3,
            what="first member done",
        )
        answer = await batches.cancel_batch(ts_env.client, bid, note="enough", actor="alice")
        assert answer.cancel is not None and answer.cancel.actor == "alice"
        assert answer.status in ("cancelling", "cancelled")
        report = await settled(ts_env, handle)
        assert report.status == "cancelled"
        assert report.counts["cancelled"] == 2 and report.counts["done"] == 1
        summary = (await callback_result(ts_env, f"{bid}.on_complete"))["batch"]
        assert sorted(summary["cancelled"]) == [f"{bid}.1", f"{bid}.2"]
        assert summary["cancelled_by"] == "alice"


async def test_a_cancelled_batch_workflow_cancels_its_members_and_still_calls_back(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with running_worker(ts_env.client, task_queue):
        handle = await start(ts_env, task_queue, [member(delay="2h")], on_complete=callback())
        await eventually(
            lambda: batches.batch_status(ts_env.client, handle.id.split("/", 1)[1]),
            lambda r: r.started == 1,
            what="member started",
        )
        await handle.cancel()
        # The member's cancel is seen before the clock is let go: with time skipping unlocked
        # while the cancel was still on its way, the test server skipped to the member's run
        # and then refused the member's cancel of the activity that had just completed
        # (ACTIVITY_UNKNOWN), leaving it stuck (1 run in 3 with two other cores busy).
        await eventually(
            lambda: batches.batch_status(ts_env.client, handle.id.split("/", 1)[1]),
            lambda r: r.counts["cancelled"] == 1,
            what="member cancelled",
        )
        report = await settled(ts_env, handle)
        assert report.status == "cancelled" and report.counts["cancelled"] == 1
        assert report.callbacks["on_complete"].state == "started"


async def test_hostile_signals_are_counted_and_dropped_and_the_batch_goes_on(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with running_worker(ts_env.client, task_queue):
        handle = await start(ts_env, task_queue, [member(delay="1h")], on_complete=callback())
        bid = handle.id.split("/", 1)[1]
        await eventually(
            lambda: batches.batch_status(ts_env.client, bid),
            lambda r: r.started == 1,
            what="member started",
        )
        hostile: list[tuple[str, list[Any]]] = [
            (names.SIGNAL_SLOT_FINISHED, [{"job_id": "not-a-member", "status": "done"}]),
            (names.SIGNAL_SLOT_FINISHED, [{"job_id": f"{bid}.0", "status": "running"}]),
            (names.SIGNAL_SLOT_FINISHED, [{"job_id": f"{bid}.0"}]),
            (names.SIGNAL_SLOT_FINISHED, ["done"]),
            (names.SIGNAL_SLOT_FINISHED, []),
            (names.SIGNAL_SLOT_FINISHED, [{"job_id": "x" * 5000, "status": "done"}, 2]),
            ("made_up", [1]),
        ]
        for name, args in hostile:
            await handle.signal(name, args=args)
        report = await eventually(
            lambda: batches.batch_status(ts_env.client, bid),
            lambda r: r.rejected == len(hostile),
            what="every hostile signal counted",
        )
        assert report.settled == 0 and report.status == "running"
        with pytest.raises(Exception):  # noqa: B017 - refused by the validator
            await handle.execute_update(names.UPDATE_CANCEL, {"note": "n" * 600})
        final = await settled(ts_env, handle)
        assert final.counts["done"] == 1 and final.rejected == len(hostile)
        assert (await callback_result(ts_env, f"{bid}.on_complete"))["batch"]["succeeded"]


async def test_the_same_request_again_answers_the_batch_and_another_is_refused(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with running_worker(ts_env.client, task_queue):
        bid = f"b-{uuid.uuid4().hex[:8]}"
        now = await ts_env.get_current_time()
        batch = {"id": bid, "on_complete": callback()}
        first = await batches.schedule_batch(
            ts_env.client, batch, [member()], HANDLERS, now=now, task_queue=task_queue
        )
        again = await batches.schedule_batch(
            ts_env.client, batch, [member()], HANDLERS, now=now, task_queue=task_queue
        )
        assert first.created and not again.created and again.job_ids == first.job_ids
        with pytest.raises(JobExists):
            await batches.schedule_batch(
                ts_env.client,
                batch,
                [member(), member()],
                HANDLERS,
                now=now,
                task_queue=task_queue,
            )
        handle = ts_env.client.get_workflow_handle(
            batch_rules.workflow_id(bid), result_type=BatchReport
        )
        assert (await settled(ts_env, handle)).total == 1


@pytest.mark.parametrize(
    "arg",
    [
        None,
        "batch",
        {"batch_id": "b"},
        {"batch_id": "a/b", "pending": [], "state": {"members": ["x"]}},
    ],
)
async def test_a_batch_started_by_hand_with_a_bad_input_fails_at_once(
    ts_env: WorkflowEnvironment, task_queue: str, arg: Any
) -> None:
    async with running_worker(ts_env.client, task_queue):
        handle = await ts_env.client.start_workflow(
            names.BATCH_WORKFLOW,
            arg,
            id=f"batch/hand-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        cause = failed.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == inbox.INVALID_START
