"""Failures that fit (issue 14): no attempt log in a retry failure, and every failure we raise
cut to size by us, so the server never replaces one with ``Failure exceeds size limit.``.

Unit tests cut failures the way the worker does (no server needed); the dev-server tests run
handlers whose errors are huge (1 MB message, a cause chain, a deep stack) or ordinary but
many (an ``http.post``-sized message over seven attempts, where the old attempt log in each
failure's details outgrew the limit), and read the last failure while the job retries.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.api.failure.v1 import Failure
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from bench.meter import MeteredServer
from jobctl.activities.failure_size import (
    FAILURE_BUDGET,
    MAX_CAUSES,
    MESSAGE_BYTES,
    SERVER_FAILURE_LIMIT,
    clip,
    cut,
    fitted,
    handler_failure,
    size_without_details,
)
from jobctl.activities.registry import HandlerRegistry, JobContext, PermanentError, load_handlers
from jobctl.starter import operations
from jobctl.worker import WorkerSettings, build_worker
from jobctl.workflows.models import AttemptRecord, HeartbeatState, JobReport, JobStatus
from tests.helpers.temporal import end_singletons

SERVER_REPLACEMENT = "Failure exceeds size limit."
HUGE = 1_000_000
CONVERTER = pydantic_data_converter


def deep_raise(depth: int, message: str, causes: bool = True) -> None:
    """Raise a RuntimeError ``depth`` frames down, caused by a chain of big ValueErrors."""
    if depth:
        deep_raise(depth - 1, message, causes)
        return
    if not causes:
        raise RuntimeError(message)
    try:
        try:
            raise ValueError("inner " + "y" * 100_000)
        except ValueError as inner:
            raise ValueError("middle " + "z" * 100_000) from inner
    except ValueError as middle:
        raise RuntimeError(message) from middle


def caught(depth: int, message: str) -> BaseException:
    try:
        deep_raise(depth, message)
    except RuntimeError as err:
        return err
    raise AssertionError("deep_raise did not raise")


def encoded(error: BaseException) -> Failure:
    failure = Failure()
    CONVERTER.failure_converter.to_failure(error, CONVERTER.payload_converter, failure)
    return failure


# -- cutting, no server ----------------------------------------------------------------------


@pytest.mark.parametrize("text", ["short", "é" * 5000, "x" * HUGE, "🙂" * 2000 + "tail"])
def test_a_clipped_message_fits_keeps_its_head_and_says_it_was_cut(text: str) -> None:
    out = clip(text)
    assert len(out.encode()) <= MESSAGE_BYTES
    if len(text.encode()) <= MESSAGE_BYTES:
        assert out == text
        return
    assert out.endswith(f"… [cut: {len(text.encode())} bytes]")
    head = out.split("… [cut:")[0]
    assert text.startswith(head) and len(head.encode()) > MESSAGE_BYTES - 40


def test_a_retry_failure_for_a_huge_error_is_cut_within_budget_and_keeps_its_flags() -> None:
    err = caught(60, "x" * HUGE)
    failure = ApplicationError(
        clip(str(err)),
        type="RuntimeError",
        next_retry_delay=timedelta(seconds=3),
        category=ApplicationErrorCategory.BENIGN,
    )
    sent = encoded(handler_failure(failure, err, CONVERTER))
    assert sent.ByteSize() <= FAILURE_BUDGET < SERVER_FAILURE_LIMIT
    assert sent.message.startswith("x" * 900) and sent.message.endswith(f"[cut: {HUGE} bytes]")
    info = sent.application_failure_info
    assert (info.type, info.non_retryable, info.category) == ("RuntimeError", False, 1)
    assert info.next_retry_delay.ToTimedelta() == timedelta(seconds=3)
    assert not info.details.payloads  # no attempt log in a retry failure
    assert sent.stack_trace  # the innermost frames of the handler's stack
    assert "deep_raise" in sent.stack_trace and "[cut:" in sent.stack_trace
    causes = []
    link = sent
    while link.HasField("cause"):
        link = link.cause
        causes.append(link.message)
    assert 1 <= len(causes) <= MAX_CAUSES
    assert causes[0].startswith("middle zzz") and causes[0].endswith("[cut: 100007 bytes]")


def test_the_last_failure_keeps_the_rounds_log_in_its_details_the_rest_is_cut() -> None:
    err = caught(5, "x" * HUGE)
    log = HeartbeatState(
        attempts=[
            AttemptRecord(
                attempt=n,
                started_at=datetime(2026, 1, 1, tzinfo=UTC),
                outcome="failed",
                error=clip("x" * HUGE),
            )
            for n in (1, 2, 3)
        ]
    )
    failure = ApplicationError(clip(str(err)), log, type="RuntimeError", non_retryable=True)
    sent = encoded(handler_failure(failure, err, CONVERTER))
    assert size_without_details(sent) <= FAILURE_BUDGET
    [payload] = sent.application_failure_info.details.payloads
    [back] = CONVERTER.payload_converter.from_payloads([payload], [HeartbeatState])
    assert back == log


async def test_the_sdk_sends_the_cut_failure_unchanged() -> None:
    err = caught(3, "x" * HUGE)
    failure = fitted(ApplicationError(str(err), type="RuntimeError"), CONVERTER)
    sent = Failure()
    await CONVERTER.encode_failure(failure, sent)
    assert sent == failure.failure and sent.ByteSize() <= FAILURE_BUDGET


def test_a_huge_type_name_is_cut_too() -> None:
    failure = encoded(ApplicationError("m" * HUGE, type="T" * 10_000))
    assert cut(failure).ByteSize() <= FAILURE_BUDGET


# -- on the dev server -------------------------------------------------------------------------

handlers = HandlerRegistry()


@handlers.register("test.fails_with")
def fails_with(ctx: JobContext) -> None:
    """Fail with a RuntimeError of payload.size bytes (a deep stack; with payload.causes, a
    chain of big causes), or a PermanentError of that size with payload.permanent."""
    message = "x" * int(ctx.payload["size"])
    if ctx.payload.get("permanent"):
        raise PermanentError(message)
    deep_raise(30, message, bool(ctx.payload.get("causes")))


@asynccontextmanager
async def worker_with(client: Client, task_queue: str) -> AsyncIterator[None]:
    async with build_worker(client, WorkerSettings(task_queue=task_queue), handlers).running():
        yield


async def schedule(client: Client, task_queue: str, **fields: Any) -> str:
    job_id = f"fit-{uuid.uuid4().hex[:8]}"
    spec = {"id": job_id, "name": "fit", "handler": "test.fails_with", "delay": 0, **fields}
    await operations.schedule(client, spec, handlers={"test.fails_with"}, task_queue=task_queue)
    return job_id


async def pending_failure(client: Client, job_id: str) -> tuple[int, str] | None:
    """(attempt, last failure message) of the job's pending activity, once one failed."""
    desc = await client.get_workflow_handle(job_id).describe()
    for pending in desc.raw_description.pending_activities:
        if pending.HasField("last_failure"):
            return pending.attempt, pending.last_failure.message
    return None


async def watch_until_dead(
    client: Client, job_id: str, seen: list[tuple[int, str, str | None]]
) -> JobReport:
    """Poll until dead, recording (attempt, pending last failure, status's last error)."""
    async with asyncio.timeout(90):
        while True:
            pending = await pending_failure(client, job_id)
            report = await operations.status(client, job_id)
            assert isinstance(report, JobReport)
            if pending is not None:
                seen.append((*pending, report.last_error))
            if report.status == JobStatus.DEAD:
                return report
            await asyncio.sleep(0.2)


CASES = {
    # A 1 MB message, a 30-frame stack and two 100 KB causes: over the limit at once.
    "huge error": {"size": HUGE, "causes": True, "max_attempts": 3, "backoff_base": 3, "jitter": 0},
    # An http.post-sized message (its answer's first 200 characters): the old attempt log in
    # each failure's details outgrew the limit from about the fifth attempt.
    "ordinary error, many attempts": {
        "size": 250,
        "max_attempts": 7,
        "backoff_base": 1,
        "backoff_max": 3,
        "jitter": 0,
    },
}


@pytest.mark.devserver
@pytest.mark.parametrize("case", list(CASES))
async def test_while_retrying_the_last_error_is_ours_cut_and_once_dead_the_log_is_complete(
    dev_client: Client, task_queue: str, case: str
) -> None:
    fields = dict(CASES[case])
    size = int(fields.pop("size"))
    payload = {"size": size, "causes": fields.pop("causes", False)}
    seen: list[tuple[int, str, str | None]] = []
    try:
        async with worker_with(dev_client, task_queue):
            job_id = await schedule(dev_client, task_queue, payload=payload, **fields)
            report = await watch_until_dead(dev_client, job_id, seen)
    finally:
        await end_singletons(dev_client)
    expected = clip("x" * size)
    # The failure the server keeps while the job waits for its next attempt, and what
    # jobs status / GET /jobs/{id} / the board show from it: ours, cut, every time.
    assert seen, "never saw the job waiting for a retry"
    assert max(attempt for attempt, _, _ in seen) == fields["max_attempts"]
    for attempt, message, shown in seen:
        assert message == expected, (attempt, message[:80])
        assert shown is not None and SERVER_REPLACEMENT not in shown
        assert shown.startswith(("x" * 40, "RuntimeError: " + "x" * 40)), shown[:80]
    # Dead: every attempt's start, end, worker and error, each failed (not "lost": the log
    # reached every next attempt).
    assert len(report.attempts) == fields["max_attempts"]
    for number, record in enumerate(report.attempts, start=1):
        assert record.attempt == number
        assert (record.outcome, record.error_type, record.error) == (
            "failed",
            "RuntimeError",
            expected,
        )
        assert (
            record.worker and record.ended_at is not None and record.ended_at >= record.started_at
        )
    assert report.last_error is not None and SERVER_REPLACEMENT not in report.last_error
    assert report.last_error.endswith(expected)


@pytest.mark.devserver
async def test_a_huge_permanent_error_ends_the_job_with_our_cut_message(
    dev_client: Client, task_queue: str
) -> None:
    try:
        async with worker_with(dev_client, task_queue):
            job_id = await schedule(
                dev_client, task_queue, payload={"size": HUGE, "permanent": True}, max_attempts=3
            )
            report = await watch_until_dead(dev_client, job_id, [])
    finally:
        await end_singletons(dev_client)
    [record] = report.attempts
    assert (record.outcome, record.error_type, record.error) == (
        "failed",
        "PermanentError",
        clip("x" * HUGE),
    )
    assert report.last_error is not None and report.last_error.endswith(clip("x" * HUGE))


@pytest.mark.devserver
async def test_a_failed_attempt_costs_no_heartbeat_of_its_own_and_its_record_reaches_the_next(
    task_queue: str,
) -> None:
    """Fails twice, then succeeds, each attempt at once and within a second: no heartbeat at
    all (a failed attempt's record rides in its failure), so with the start and the three
    attempts 4 actions; every failed attempt still recorded as failed."""
    server = MeteredServer(db_file=None)
    client = await server.start()
    try:
        registry = load_handlers("tests.handlers")
        job_worker = build_worker(client, WorkerSettings(task_queue=task_queue), registry)
        try:
            async with job_worker.running():
                before = await server.heartbeats()
                job_id = f"fit-{uuid.uuid4().hex[:8]}"
                spec = {
                    "id": job_id,
                    "name": "fit",
                    "handler": "demo.sleep",
                    "payload": {"seconds": 0, "fail_times": 2},
                    "delay": 0,
                    "backoff_base": 1,
                    "jitter": 0,
                }
                await operations.schedule(
                    client, spec, handlers={"demo.sleep"}, task_queue=task_queue
                )
                await client.get_workflow_handle(job_id).result()
                report = await operations.status(client, job_id)
                beats = await server.heartbeats() - before
        finally:
            job_worker.close()
    finally:
        server.stop()
    assert isinstance(report, JobReport)
    assert [(a.attempt, a.outcome, a.error_type) for a in report.attempts] == [
        (1, "failed", "DemoFailure"),
        (2, "failed", "DemoFailure"),
        (3, "succeeded", None),
    ]
    assert all(a.error for a in report.attempts[:2]) and report.attempts[0].retry_delay == 1
    assert beats == 0
