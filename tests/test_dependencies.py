"""Jobs that run after others (``after``, ``on_failed_dependency``) on the time-skipping
server: order, a dependency that closed long before, each policy when one goes dead, the
door's refusals, and hostile signals (docs/batches.md, "Dependencies")."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from jobctl.starter import operations
from jobctl.starter.cli.spec import build_spec
from jobctl.starter.errors import SpecError
from jobctl.starter.operations import batches
from jobctl.workflows import names
from jobctl.workflows.dependency_rules import Decision, decide
from jobctl.workflows.models import JobReport, JobStatus
from tests.helpers.jobs import HANDLERS, finished, job_report, submit
from tests.helpers.poll import eventually
from tests.helpers.temporal import running_worker


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def quick(**fields: Any) -> dict[str, Any]:
    return {"handler": "demo.sleep", "payload": {"seconds": 0}, "delay": 0, **fields}


async def waiting_on(env: WorkflowEnvironment, job_id: str, status: str) -> JobReport:
    """The job's report once it says it waits for a dependency that is ``status``."""
    return await eventually(
        lambda: job_report(env.client, job_id),
        lambda r: f"({status})" in (r.waiting_for or ""),
        what=f"{job_id} waiting on a {status} dependency",
    )


async def test_a_chain_of_three_runs_in_order(ts_env: WorkflowEnvironment, task_queue: str) -> None:
    a, b, c = uid("a"), uid("b"), uid("c")
    async with running_worker(ts_env.client, task_queue):
        await submit(ts_env, task_queue, **quick(id=a, delay="10m"))
        await submit(ts_env, task_queue, **quick(id=b, after=[a]))
        last = await submit(ts_env, task_queue, **quick(id=c, after=[b]))
        report = await eventually(
            lambda: job_report(ts_env.client, c),
            lambda r: r.waiting_for is not None,
            what="c waiting",
        )
        # Due, so pending (as a job waiting for its rate limit is), saying what it waits for.
        assert report.status == JobStatus.PENDING and report.after == {b: "waiting"}
        assert report.waiting_for == f"waiting for job {b} to be done"
        assert (await finished(ts_env, last)).status == JobStatus.DONE
        reports = [await job_report(ts_env.client, job_id) for job_id in (a, b, c)]
    assert [r.status for r in reports] == [JobStatus.DONE] * 3
    for before, then in itertools.pairwise(reports):
        ended = before.attempts[-1].ended_at
        assert ended is not None and then.attempts[0].started_at >= ended
    assert reports[2].after == {b: "done"} and reports[2].waiting_for is None


async def test_a_dependency_that_closed_before_is_read_from_its_run(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    a, b = uid("a"), uid("b")
    async with running_worker(ts_env.client, task_queue):
        await finished(ts_env, await submit(ts_env, task_queue, **quick(id=a)))
        report = await finished(ts_env, await submit(ts_env, task_queue, **quick(id=b, after=[a])))
    assert report.status == JobStatus.DONE and report.after == {a: "done"}


async def dead_dependency(env: WorkflowEnvironment, queue: str) -> str:
    a = uid("a")
    await submit(env, queue, id=a, handler="test.fails_once", delay=0, max_attempts=1)
    await eventually(
        lambda: job_report(env.client, a),
        lambda r: r.status == JobStatus.DEAD,
        what=f"{a} dead",
    )
    return a


async def waiting_on_a_dead_one(
    env: WorkflowEnvironment, queue: str
) -> tuple[str, str, WorkflowHandle[Any, JobReport]]:
    """A dead job ``a`` and a job ``b`` after it under the ``wait`` policy, seen waiting."""
    a, b = await dead_dependency(env, queue), uid("b")
    handle = await submit(env, queue, **quick(id=b, after=[a], on_failed_dependency="wait"))
    await waiting_on(env, b, "dead")
    return a, b, handle


async def test_cancel_policy_cancels_the_job_when_a_dependency_is_dead(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with running_worker(ts_env.client, task_queue):
        a = await dead_dependency(ts_env, task_queue)
        handle = await submit(ts_env, task_queue, **quick(id=uid("b"), after=[a]))
        with pytest.raises(WorkflowFailureError):
            await finished(ts_env, handle)
        desc = await handle.describe()
        report = await job_report(ts_env.client, handle.id)
    assert desc.status == WorkflowExecutionStatus.CANCELED
    assert report.status == JobStatus.CANCELLED and report.attempts == []
    entry = report.audit[-1]
    assert (entry.action, entry.actor) == ("cancel", names.DEPENDENCY_ACTOR)
    assert entry.note is not None and a in entry.note and "dead" in entry.note


async def test_run_policy_runs_the_job_when_a_dependency_is_dead(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with running_worker(ts_env.client, task_queue):
        a = await dead_dependency(ts_env, task_queue)
        spec = quick(id=uid("b"), after=[a], on_failed_dependency="run")
        report = await finished(ts_env, await submit(ts_env, task_queue, **spec))
    assert report.status == JobStatus.DONE and report.after == {a: "dead"}


async def test_wait_policy_waits_through_a_requeue_until_the_dependency_is_done(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with running_worker(ts_env.client, task_queue):
        a, b, handle = await waiting_on_a_dead_one(ts_env, task_queue)
        waiting = await job_report(ts_env.client, b)
        assert waiting.status == JobStatus.PENDING and waiting.attempts == []
        await ts_env.client.get_workflow_handle(a).signal(names.SIGNAL_REQUEUE)
        report = await finished(ts_env, handle)
    assert report.status == JobStatus.DONE and report.after == {a: "done"}


async def test_forged_reports_are_recorded_and_change_nothing(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    a, b = uid("a"), uid("b")
    async with running_worker(ts_env.client, task_queue):
        await submit(ts_env, task_queue, **quick(id=a, delay="2h"))
        handle = await submit(ts_env, task_queue, **quick(id=b, after=[a]))
        await eventually(
            lambda: job_report(ts_env.client, b),
            lambda r: r.waiting_for is not None,
            what="b waiting",
        )
        forged: list[list[Any]] = [
            [{"job_id": "someone-else", "status": "done"}],
            [{"job_id": a, "status": "running"}],
            [{"job_id": a}],
            ["done"],
            [],
        ]
        for args in forged:
            await handle.signal(names.SIGNAL_DEPENDENCY_SETTLED, args=args)
        await ts_env.client.get_workflow_handle(a).signal(names.SIGNAL_WATCH, args=[{"id": 1}])
        report = await eventually(
            lambda: job_report(ts_env.client, b),
            lambda r: bool(r.audit) and "5 in a row" in (r.audit[-1].detail or ""),
            what="five rejections recorded",
        )
        assert report.status == JobStatus.PENDING and report.after == {a: "waiting"}
        assert [e.action for e in (await job_report(ts_env.client, a)).audit] == ["rejected"]
        assert (await finished(ts_env, handle)).status == JobStatus.DONE


async def test_the_door_refuses_unknown_ids_crons_and_cycles_and_starts_nothing(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    now = await ts_env.get_current_time()
    cron = uid("cron")
    await operations.schedule(
        ts_env.client,
        {"id": cron, "name": "c", "handler": "demo.sleep", "cron": "0 * * * *"},
        HANDLERS,
        now=now,
        task_queue=task_queue,
    )
    refused = {
        "unknown": quick(id=uid("x"), after=["no-such-job"]),
        "cron": quick(id=uid("x"), after=[cron]),
        "itself": quick(id="same", after=["same"]),
        "twice": quick(id=uid("x"), after=[cron, cron]),
    }
    for why, spec in refused.items():
        with pytest.raises(SpecError) as err:
            await operations.schedule(
                ts_env.client, {"name": "t", **spec}, HANDLERS, now=now, task_queue=task_queue
            )
        assert [field for field, _ in err.value.problems] == ["after"], why
        with pytest.raises(Exception):  # noqa: B017 - nothing started under that id
            await ts_env.client.get_workflow_handle(spec["id"]).describe()
    x, y, z, w = uid("x"), uid("y"), uid("z"), uid("w")
    specs = [
        {"name": "t", **quick(id=x, after=[y])},
        {"name": "t", **quick(id=y, after=[x])},
        {"name": "t", **quick(id=z, after=[x])},  # after a refused one: refused too
        {"name": "t", **quick(id=w, after=["no-such-job"])},
    ]
    results = await operations.schedule_many(
        ts_env.client, specs, HANDLERS, now=now, task_queue=task_queue
    )
    reasons = [r.problems()[0][1] for r in results]
    assert all(not r.ok for r in results), reasons
    assert "cycle" in reasons[0] and "cycle" in reasons[1] and "not scheduled" in reasons[2]
    with pytest.raises(SpecError) as batch_err:
        await batches.schedule_batch(
            ts_env.client,
            {"id": uid("bt")},
            [{"name": "t", **quick(id=x, after=[y])}, {"name": "t", **quick(id=y, after=[x])}],
            HANDLERS,
            now=now,
            task_queue=task_queue,
        )
    assert {f for f, _ in batch_err.value.problems} == {"jobs[0].after", "jobs[1].after"}
    async with running_worker(ts_env.client, task_queue):  # a normal job still runs
        ok = await submit(ts_env, task_queue, **quick(id=uid("ok")))
        assert (await finished(ts_env, ok)).status == JobStatus.DONE


async def test_one_request_may_name_its_own_jobs_in_any_order(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A bulk request starts a job after the jobs of the same request it names (waves); a
    batch's members wait for each other through the batch's waves."""
    now = await ts_env.get_current_time()
    first, second = uid("first"), uid("second")
    specs = [
        {"name": "t", **quick(id=second, after=[first], dispatch_lead=0)},
        {"name": "t", **quick(id=first, dispatch_lead=0)},
    ]
    async with running_worker(ts_env.client, task_queue):
        results = await operations.schedule_many(
            ts_env.client, specs, HANDLERS, now=now, task_queue=task_queue
        )
        assert all(r.ok for r in results), [r.problems() for r in results]
        handle = ts_env.client.get_workflow_handle(second, result_type=JobReport)
        assert (await finished(ts_env, handle)).after == {first: "done"}
        bid = uid("bt")
        members = [
            {"name": "t", **quick(id=f"{bid}.late", after=[f"{bid}.early"], dispatch_lead=0)},
            {"name": "t", **quick(id=f"{bid}.early", dispatch_lead=0)},
        ]
        await batches.schedule_batch(
            ts_env.client, {"id": bid}, members, HANDLERS, now=now, task_queue=task_queue
        )
        await eventually(
            lambda: batches.batch_status(ts_env.client, bid),
            lambda r: r.started == 2,
            what="both members started",
        )
        late = ts_env.client.get_workflow_handle(f"{bid}.late", result_type=JobReport)
        assert (await finished(ts_env, late)).after == {f"{bid}.early": "done"}


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"after": ["bad id!"]}, "is not a job id"),
        ({"after": ["dead-letter-queue"]}, "reserved for the system"),
        ({"after": ["a", "a"]}, "more than once"),
        ({"after": [f"j{i}" for i in range(51)]}, "at most 50"),
        ({"after": "a"}, "valid list"),
        ({"id": "me", "after": ["me"]}, "cannot run after itself"),
        ({"on_failed_dependency": "run"}, "needs after"),
        ({"after": ["a"], "on_failed_dependency": "skip"}, "'cancel', 'run' or 'wait'"),
        ({"after": ["a"], "delay": None, "cron": "* * * * *"}, "cron job's slots"),
    ],
)
def test_the_spec_refuses_malformed_dependencies(fields: dict[str, Any], reason: str) -> None:
    spec = {"name": "t", "handler": "demo.sleep", "delay": 0, **fields}
    spec = {k: v for k, v in spec.items() if v is not None}
    with pytest.raises(SpecError) as err:
        operations.submission(spec, datetime.now(UTC))
    assert reason in str(err.value), err.value


def test_the_cli_flags_take_comma_separated_ids() -> None:
    raw = build_spec(
        "t", "demo.sleep", None, None, "5m", None, None,
        {"after": "a, b,,c", "on_failed_dependency": "wait"},
    )  # fmt: skip
    spec = operations.submission(raw, datetime.now(UTC)).spec
    assert spec.after == ["a", "b", "c"] and spec.on_failed_dependency == "wait"


def test_the_policies_decide_as_documented() -> None:
    after = ["a", "b"]
    assert decide(after, {"a": "done", "b": "done"}, "cancel").action == "run"
    assert decide(after, {"a": "done"}, "cancel") == Decision(
        "wait", "waiting for job b to be done"
    )
    assert decide(after, {"a": "dead", "b": "waiting"}, "cancel").action == "cancel"
    assert decide(after, {"a": "dead", "b": "waiting"}, "run").action == "wait"
    assert decide(after, {"a": "dead", "b": "done"}, "run").action == "run"
    waiting = decide(after, {"a": "cancelled", "b": "not started"}, "wait")
    assert waiting.text == "waiting for jobs a (cancelled), b (not started) to be done"
    many = decide([f"j{i}" for i in range(5)], {}, "wait").text
    assert many == "waiting for jobs j0, j1, j2 and 2 more to be done"


async def test_a_discarded_dependency_is_told_and_the_waiting_job_says_so(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with running_worker(ts_env.client, task_queue):
        a, b, _ = await waiting_on_a_dead_one(ts_env, task_queue)
        await ts_env.client.get_workflow_handle(a).signal(names.SIGNAL_DISCARD)
        report = await waiting_on(ts_env, b, "discarded")
        assert report.after == {a: "discarded"} and report.attempts == []
        await operations.cancel(ts_env.client, b)
        cancelled = await eventually(
            lambda: job_report(ts_env.client, b),
            lambda r: r.status == JobStatus.CANCELLED,
            what="b cancelled by a person",
        )
    assert cancelled.attempts == []
