"""The wall between a handler and its worker (activities/attempt_outcome.py), in process;
tests/test_poison_drill.py runs the same poisons against real worker processes."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.testing import ActivityEnvironment

from jobctl.activities.attempt_outcome import (
    LOST_UNRECORDED,
    HandlerAborted,
    contained_async,
    contained_sync,
    error_fields,
    previous_attempts,
    server_gives_up,
)
from jobctl.activities.failure_size import MESSAGE_BYTES
from jobctl.activities.registry import JobContext
from jobctl.starter import operations
from jobctl.workflows.models import (
    AttemptRecord,
    HeartbeatState,
    JobReport,
    JobSpec,
    JobStatus,
    RunJobInput,
)
from tests.helpers.poll import eventually
from tests.helpers.temporal import end_singletons, running_worker

NOT_EXCEPTIONS = [SystemExit(3), KeyboardInterrupt(), GeneratorExit("stray")]


def context() -> JobContext:
    return JobContext(
        job_id="job-1",
        name="n",
        attempt=1,
        max_attempts=1,
        scheduled_at=datetime.now(UTC),
        idempotency_key="k",
        payload={},
        worker="w",
    )


@pytest.mark.parametrize("raised", [*NOT_EXCEPTIONS, asyncio.CancelledError("mine")], ids=repr)
def test_a_sync_handlers_base_exception_becomes_the_attempts_error(raised: BaseException) -> None:
    def handler(ctx: JobContext) -> None:
        raise raised

    with pytest.raises(HandlerAborted) as caught:
        contained_sync(handler, context())
    assert caught.value.raised is raised
    message, kind = error_fields(caught.value)
    assert kind == type(raised).__name__
    assert message.startswith(f"handler raised {raised!r}")


def test_a_sync_handlers_exceptions_and_results_pass_unchanged() -> None:
    def fails(ctx: JobContext) -> None:
        raise MemoryError

    with pytest.raises(MemoryError):
        contained_sync(fails, context())
    assert contained_sync(lambda ctx: {"ok": ctx.job_id}, context()) == {"ok": "job-1"}
    assert error_fields(MemoryError()) == ("MemoryError", "MemoryError")
    assert error_fields(ValueError("bad")) == ("bad", "ValueError")


@pytest.mark.parametrize("raised", NOT_EXCEPTIONS, ids=repr)
async def test_an_async_handlers_base_exception_stays_in_its_task(raised: BaseException) -> None:
    async def handler(ctx: JobContext) -> None:
        await asyncio.sleep(0)
        raise raised

    # In its own task, as run_job runs it: uncontained, SystemExit would leave the event loop.
    task = asyncio.ensure_future(contained_async(handler, context()))
    await asyncio.wait({task})
    error = task.exception()
    assert isinstance(error, HandlerAborted) and error.raised is raised


async def test_a_handler_cancelling_itself_fails_but_a_requested_cancel_stays_a_cancel() -> None:
    async def cancels_itself(ctx: JobContext) -> None:
        raise asyncio.CancelledError("nobody asked")

    async def slow(ctx: JobContext) -> None:
        await asyncio.sleep(30)

    async def exits_when_cancelled(ctx: JobContext) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise SystemExit(9) from None

    own = asyncio.ensure_future(contained_async(cancels_itself, context()))
    await asyncio.wait({own})
    error = own.exception()
    assert isinstance(error, HandlerAborted) and "without being cancelled" in str(error)
    assert error_fields(error)[1] == "CancelledError"

    asked = asyncio.ensure_future(contained_async(slow, context()))
    turned = asyncio.ensure_future(contained_async(exits_when_cancelled, context()))
    await asyncio.sleep(0.05)
    asked.cancel()
    turned.cancel()
    await asyncio.wait({asked, turned})
    assert asked.cancelled()  # run_job's cancel, timeout and handover paths see a cancel
    raised = turned.exception()
    assert isinstance(raised, HandlerAborted) and isinstance(raised.raised, SystemExit)


@pytest.mark.parametrize(
    "raised",
    [RuntimeError("x" * 1_000_000), HandlerAborted(SystemExit("y" * 1_000_000))],
    ids=["exception", "aborted"],
)
def test_an_attempts_recorded_error_is_cut_to_size_and_says_so(raised: Exception) -> None:
    message, kind = error_fields(raised)
    assert len(message.encode()) <= MESSAGE_BYTES and "[cut: " in message
    assert kind in ("RuntimeError", "SystemExit")


@pytest.mark.parametrize(
    ("attempt", "maximum", "gives_up"), [(4, 5, False), (5, 5, True), (9, 0, False)]
)
def test_the_servers_last_allowed_attempt_ends_the_round(
    attempt: int, maximum: int, gives_up: bool
) -> None:
    info = dataclasses.replace(
        ActivityEnvironment.default_info(),
        attempt=attempt,
        retry_policy=RetryPolicy(maximum_attempts=maximum),
    )
    assert server_gives_up(info) is gives_up


SPEC = JobSpec(id="j", name="n", handler="log", delay=0, lease=20, backoff_base=2, backoff_max=300)
T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def info_of(attempt: int, scheduled: datetime, details: HeartbeatState | None) -> Any:
    beats = [details.model_dump(mode="json")] if details is not None else []
    return dataclasses.replace(
        ActivityEnvironment.default_info(),
        attempt=attempt,
        current_attempt_scheduled_time=scheduled,
        heartbeat_details=beats,
    )


def test_attempts_lost_before_any_heartbeat_are_counted_with_times_reckoned_back() -> None:
    """Attempt 1 failed (its record rode in its failure); 2 and 3 started at once and were
    lost without a heartbeat: each timed out a lease after its start, retried 2**(n-1) * 2 s
    later. Attempt 4, scheduled at T0, counts both as spent."""
    failed = AttemptRecord(attempt=1, started_at=T0 - timedelta(seconds=100), worker="w1")
    failed = failed.close("failed", T0 - timedelta(seconds=99), "boom", "Boom", 2.0)
    job = RunJobInput(spec=SPEC)
    state = previous_attempts(info_of(4, T0, HeartbeatState(attempts=[failed])), job)
    assert [(a.attempt, a.outcome, a.worker) for a in state.attempts] == [
        (1, "failed", "w1"),
        (2, "lost", "unknown"),
        (3, "lost", "unknown"),
    ]
    # 3 ended 8 s before T0 (its retry interval), started a lease (20 s) earlier; 2 ended
    # 4 s before 3 started.
    lost_2, lost_3 = state.attempts[1:]
    assert (lost_3.ended_at, lost_3.started_at) == (
        T0 - timedelta(seconds=8),
        T0 - timedelta(seconds=28),
    )
    assert (lost_2.ended_at, lost_2.started_at) == (
        T0 - timedelta(seconds=32),
        T0 - timedelta(seconds=52),
    )
    assert all(
        a.error == LOST_UNRECORDED and a.error_type == "LeaseExpired" for a in (lost_2, lost_3)
    )
    assert sum(a.spent for a in state.attempts) == 3


def test_a_dispatched_attempt_lost_while_it_waited_is_not_counted() -> None:
    """A pre-dispatched attempt records its start before its handler: one without a record
    was lost while it waited for run_at, and costs nothing."""
    job = RunJobInput(spec=SPEC, not_before=T0)
    assert previous_attempts(info_of(3, T0, None), job).attempts == []


def test_a_dispatched_attempt_begun_within_its_check_of_run_at_counts_when_lost() -> None:
    """Attempt 1 began 2 s before run_at (after its check's earliest moment, 3 s ahead): it
    sent no start record and was lost; attempt 2 counts it. Had it begun 30 s ahead, it
    would have waited for its check and been lost before it: free."""
    run_at = T0 - timedelta(seconds=22) + timedelta(seconds=2)  # attempt 1 began at T0 - 22
    late = previous_attempts(info_of(2, T0, None), RunJobInput(spec=SPEC, not_before=run_at))
    assert [(a.attempt, a.outcome, a.started_at) for a in late.attempts] == [
        (1, "lost", T0 - timedelta(seconds=22))
    ]
    early = RunJobInput(spec=SPEC, not_before=T0 + timedelta(seconds=30))
    assert previous_attempts(info_of(2, T0, None), early).attempts == []


def test_no_loss_is_reckoned_from_before_the_last_recorded_attempt() -> None:
    """Pre-dispatched: attempt 1 was lost while it waited (no record), attempt 2 ran 100 s and
    failed. Attempt 3 lacks one record, but the only attempt the walk back could name would
    have started before attempt 2 ended: none is added."""
    ran = AttemptRecord(attempt=1, started_at=T0 - timedelta(seconds=102), worker="w1")
    ran = ran.close("failed", T0 - timedelta(seconds=2), "boom", "Boom", 2.0)
    job = RunJobInput(spec=SPEC, not_before=T0 - timedelta(seconds=102))
    state = previous_attempts(info_of(3, T0, HeartbeatState(attempts=[ran])), job)
    assert [(a.attempt, a.outcome) for a in state.attempts] == [(1, "failed")]


def test_a_running_record_then_an_unrecorded_loss_close_in_order() -> None:
    """Attempt 1 heartbeated and was lost; attempt 2 was lost before any heartbeat."""
    running = AttemptRecord(attempt=1, started_at=T0 - timedelta(seconds=60), worker="w1")
    job = RunJobInput(spec=SPEC)
    state = previous_attempts(info_of(3, T0, HeartbeatState(attempts=[running])), job)
    first, second = state.attempts
    assert (second.attempt, second.started_at) == (2, T0 - timedelta(seconds=24))
    # 1 was retried one interval (2 s) before 2 started.
    assert (first.outcome, first.worker, first.ended_at) == (
        "lost",
        "w1",
        T0 - timedelta(seconds=26),
    )


async def wait_final(client: Client, job_id: str) -> JobReport:
    report = await eventually(
        lambda: operations.status(client, job_id),
        lambda report: report.status in (JobStatus.DEAD, JobStatus.DONE),
        what=f"{job_id} dead or done",
    )
    assert isinstance(report, JobReport)
    return report


@pytest.mark.devserver
async def test_running_past_the_timeout_is_attempt_timeout_a_handlers_own_timeout_is_not(
    dev_client: Client, task_queue: str
) -> None:
    async def schedule(handler: str, payload: dict[str, Any]) -> str:
        job_id = f"timeout-{uuid.uuid4().hex[:8]}"
        spec = {
            "id": job_id,
            "name": "t",
            "handler": handler,
            "payload": payload,
            "delay": 0,
            "max_attempts": 1,
            "lease": 1,
            "timeout": 1,
        }
        await operations.schedule(dev_client, spec, handlers={handler}, task_queue=task_queue)
        return job_id

    try:
        async with running_worker(dev_client, task_queue):
            slow = await schedule("test.record", {"path": "/dev/null", "seconds": 5})
            own = await schedule("test.poison", {"how": "timeout_error"})
            slow_report, own_report = (
                await wait_final(dev_client, slow),
                await wait_final(dev_client, own),
            )
    finally:
        await end_singletons(dev_client)
    [ran_long] = slow_report.attempts
    assert (ran_long.outcome, ran_long.error_type) == ("failed", "AttemptTimeout")
    assert ran_long.error == "handler ran past the 1s timeout"
    [timed_out] = own_report.attempts
    assert (timed_out.outcome, timed_out.error_type) == ("failed", "TimeoutError")
    assert timed_out.error == "poison: the handler's own timeout, not the job's"
