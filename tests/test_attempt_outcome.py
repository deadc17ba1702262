"""The wall between a handler and its worker (activities/attempt_outcome.py), in process;
tests/test_poison_drill.py runs the same poisons against real worker processes."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.testing import ActivityEnvironment

from activities.attempt_outcome import (
    HandlerAborted,
    contained_async,
    contained_sync,
    error_fields,
    server_gives_up,
)
from activities.failure_size import MESSAGE_BYTES
from activities.registry import JobContext
from starter import operations
from tests.helpers.poll import eventually
from tests.helpers.temporal import end_singletons, running_worker
from workflows.models import JobReport, JobStatus

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
