"""The Python API (starter/jobsclient) end to end on the dev server: every method of the
async client and its handle, the synchronous facade, the typed errors and their exit codes,
listing by pages, and the runnable example."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.client import Client

from jobctl.starter import errors, operations
from jobctl.starter.dev.devserver import DevServer
from jobctl.starter.errors import (
    EXIT_CODES,
    InvalidTransition,
    JobExists,
    JobNotFound,
    JobsError,
    SpecError,
    TemporalUnavailable,
)
from jobctl.starter.jobsclient import JobHandle, JobsClient, JobStatus, SyncJobsClient
from jobctl.workflows.models import CronReport, JobReport
from tests.helpers.poll import eventually
from tests.helpers.processes import ROOT, cli_env
from tests.helpers.temporal import end_singletons, running_worker
from tests.hostile.common import (
    NORMAL_JOB_DEADLINE,
    assert_nothing_started,
    normal_job_completes,
    started_count,
)

pytestmark = pytest.mark.devserver

ACTOR = "test:jobsclient"
WAIT = 60.0  # result() timeouts: far above the few seconds a job here takes
UNREACHABLE = "127.0.0.1:1"
POISON = {"seconds": 0, "always_fail": True, "permanent": True}


@pytest.fixture(scope="module")
def queue() -> str:
    return f"jobsclient-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
async def jobs(dev_client: Client, queue: str) -> AsyncIterator[JobsClient]:
    """The client on the session's server, with an in-process worker on the module's queue
    (it publishes the test handlers); the queue's singletons go with the module."""
    async with running_worker(dev_client, queue, publish=True):
        yield JobsClient(dev_client, task_queue=queue, actor=ACTOR)
    await end_singletons(dev_client)


def one_shot(report: operations.Report) -> JobReport:
    """A one-shot's report (the type a job's ``status()`` has; a cron's is CronReport)."""
    assert isinstance(report, JobReport)
    return report


def new_id(kind: str) -> str:
    return f"jc-{kind}-{uuid.uuid4().hex[:8]}"


async def assert_not_started(jobs: JobsClient, job_id: str) -> None:
    with pytest.raises(JobNotFound):
        await jobs.get_handle(job_id).status()


# -- schedule, status, result ------------------------------------------------------------


async def test_schedule_status_result(jobs: JobsClient, dev_client: Client, queue: str) -> None:
    job_id = new_id("hello")
    handle = await jobs.schedule(
        "hello", handler="log", payload={"message": "hi"}, in_=1, id=job_id
    )
    assert isinstance(handle, JobHandle)
    assert (handle.job_id, handle.created) == (job_id, True)
    assert handle.next_run_at is not None
    report = await handle.status()
    # the same object `jobctl status --json` prints
    assert type(report) is type(await operations.status(dev_client, job_id))
    assert report.job_id == job_id and report.name == "hello" and report.handler == "log"
    # Due in 1 s: on a loaded machine the first read may already find it done.
    assert report.status in (
        JobStatus.SCHEDULED,
        JobStatus.PENDING,
        JobStatus.RUNNING,
        JobStatus.DONE,
    )
    final = one_shot(await handle.result(timeout=WAIT))
    assert final.status == JobStatus.DONE
    assert final.result == {"logged": True}
    assert (await jobs.get_handle(job_id).status()).status == JobStatus.DONE
    desc = await dev_client.get_workflow_handle(job_id).describe()
    assert desc.task_queue == queue  # the client's task_queue


async def test_identical_request_answers_the_existing_job(jobs: JobsClient) -> None:
    job_id = new_id("again")
    fields = {"handler": "log", "in_": "1h", "id": job_id}
    first = await jobs.schedule("again", **fields)  # type: ignore[arg-type]
    second = await jobs.schedule("again", **fields)  # type: ignore[arg-type]
    assert (first.created, second.created) == (True, False)
    assert second.next_run_at == first.next_run_at
    await second.cancel()


class Greeting(BaseModel):
    message: str


async def test_schedule_at_with_spec_fields(jobs: JobsClient) -> None:
    run_at = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    handle = await jobs.schedule(
        "at",
        handler="log",
        payload=Greeting(message="typed"),  # a pydantic model goes as its JSON form
        at=run_at,
        max_attempts=3,
        timeout="5m",
        lease=timedelta(seconds=30),
        idempotency_key="key-1",
    )
    report = one_shot(await handle.status())
    assert report.run_at == run_at == handle.next_run_at
    assert (report.max_attempts, report.idempotency_key) == (3, "key-1")
    await handle.cancel()


async def test_schedule_at_iso_text(jobs: JobsClient) -> None:
    handle = await jobs.schedule("iso", handler="log", at="2030-01-01T09:00:00+01:00")
    assert handle.next_run_at == datetime(2030, 1, 1, 8, tzinfo=UTC)
    await handle.cancel()


async def test_cron_with_tz(jobs: JobsClient) -> None:
    handle = await jobs.schedule(
        "weekdays", handler="log", cron="0 9 * * MON-FRI", tz="Europe/Paris", overlap="buffer_one"
    )
    report = await handle.status()
    assert isinstance(report, CronReport)
    assert (report.cron, report.timezone, report.status) == (
        "0 9 * * MON-FRI",
        "Europe/Paris",
        JobStatus.SCHEDULED,
    )
    await handle.cancel()
    assert (await handle.result(timeout=WAIT)).status == JobStatus.CANCELLED


# -- controls ----------------------------------------------------------------------------


async def test_pause_resume_trigger(jobs: JobsClient) -> None:
    handle = await jobs.schedule("held", handler="log", in_="1h")
    until = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    await handle.pause(until, note="maintenance")
    report = await handle.status()
    assert report.status == JobStatus.PAUSED
    assert getattr(report, "paused_until", None) == until
    await handle.resume(note="back")
    assert (await handle.status()).status == JobStatus.SCHEDULED
    await handle.trigger()
    final = await handle.result(timeout=WAIT)
    assert final.status == JobStatus.DONE
    audit = [(e.action, e.actor, e.note) for e in getattr(final, "audit", [])]
    assert ("pause", ACTOR, "maintenance") in audit
    assert ("resume", ACTOR, "back") in audit
    assert ("trigger", ACTOR, None) in audit


async def test_pause_without_until(jobs: JobsClient) -> None:
    handle = await jobs.schedule("held", handler="log", in_="1h")
    await handle.pause()
    report = await handle.status()
    assert report.status == JobStatus.PAUSED
    assert getattr(report, "paused_until", "unset") is None
    await handle.cancel()


async def test_cancel(jobs: JobsClient) -> None:
    handle = await jobs.schedule("doomed", handler="log", in_="1h")
    await handle.cancel(note="not needed")
    final = await handle.result(timeout=WAIT)
    assert final.status == JobStatus.CANCELLED
    with pytest.raises(InvalidTransition) as refused:  # a finished job takes no control
        await handle.cancel()
    assert refused.value.exit_code == 5


async def test_requeue_dead_job(jobs: JobsClient) -> None:
    payload = {"seconds": 0, "fail_times": 1, "permanent": True}
    handle = await jobs.schedule("flaky", handler="demo.sleep", payload=payload, in_=0)
    dead = one_shot(await handle.result(timeout=WAIT))  # dead is settled: result() answers it
    assert dead.status == JobStatus.DEAD
    assert dead.last_error
    await handle.requeue(note="fixed upstream")
    done = await eventually(
        handle.status, lambda r: r.status == JobStatus.DONE, timeout=WAIT, what="requeued done"
    )
    assert ("requeue", ACTOR, "fixed upstream") in [(e.action, e.actor, e.note) for e in done.audit]
    assert (await handle.result(timeout=WAIT)).status == JobStatus.DONE


async def test_discard_dead_job(jobs: JobsClient) -> None:
    handle = await jobs.schedule("poison", handler="demo.sleep", payload=POISON, in_=0)
    assert (await handle.result(timeout=WAIT)).status == JobStatus.DEAD
    await handle.discard(note="bad data")
    await eventually(
        handle.status, lambda r: r.status == JobStatus.DISCARDED, timeout=WAIT, what="discarded"
    )
    assert (await handle.result(timeout=WAIT)).status == JobStatus.DISCARDED


async def test_requeue_and_discard_refuse_a_live_job(jobs: JobsClient) -> None:
    handle = await jobs.schedule("alive", handler="log", in_="1h")
    for control in (handle.requeue, handle.discard):
        with pytest.raises(InvalidTransition) as refused:
            await control()
        assert refused.value.exit_code == 5
    await handle.cancel()


async def test_result_timeout_leaves_the_job_alone(jobs: JobsClient) -> None:
    handle = await jobs.schedule("later", handler="log", in_="1h")
    with pytest.raises(TimeoutError):
        await handle.result(timeout=0.5, poll_interval=0.1)
    assert (await handle.status()).status == JobStatus.SCHEDULED
    await handle.cancel()


# -- listing -----------------------------------------------------------------------------


async def test_list_pages(jobs: JobsClient) -> None:
    mine = set()
    for _ in range(3):
        handle = await jobs.schedule("listed", handler="log", in_="1h")
        await handle.pause()
        mine.add(handle.job_id)

    async def paused_ids() -> set[str]:
        return {row.job_id async for row in jobs.list(status="paused", page_size=2)}

    seen = await eventually(paused_ids, lambda ids: mine <= ids, what="paused jobs listed")
    assert len(seen) >= 3
    first = [p async for p in _first_pages(jobs, 3)]  # one row a page, a token to go on
    assert [len(p.jobs) for p in first] == [1, 1, 1]
    assert all(p.next_page_token for p in first[:2])
    assert len({p.jobs[0].job_id for p in first}) == 3
    rows = [row async for row in jobs.list(status="paused", page_size=1, limit=2)]
    assert len(rows) == 2 and all(row.status == "paused" for row in rows)
    page = await jobs.list_page(status="paused", page_size=1)
    assert len(page.jobs) == 1 and page.next_page_token
    for job_id in mine:
        await jobs.get_handle(job_id).cancel()


async def _first_pages(jobs: JobsClient, count: int) -> AsyncIterator[operations.JobPage]:
    pages = jobs.pages(status="paused", page_size=1)
    for _ in range(count):
        yield await anext(pages)
    await pages.aclose()


@pytest.mark.parametrize(
    ("status", "page_size"), [("nonsense", 10), (None, 0), (None, 1001)], ids=str
)
async def test_list_refuses_bad_arguments(
    jobs: JobsClient, status: str | None, page_size: int
) -> None:
    with pytest.raises(SpecError) as refused:
        [row async for row in jobs.list(status=status, page_size=page_size)]
    assert refused.value.exit_code == 2


# -- bulk --------------------------------------------------------------------------------


async def test_schedule_many(jobs: JobsClient) -> None:
    ids = [new_id("bulk") for _ in range(2)]
    specs: list[dict[str, Any]] = [
        {"id": ids[0], "name": "bulk", "handler": "log", "delay": "1h"},
        {"name": "bulk", "handler": "log"},  # no run_at, delay or cron
        {"id": ids[1], "name": "bulk", "handler": "log", "delay": 3600},
    ]
    results = await jobs.schedule_many(specs)
    assert [r.ok for r in results] == [True, False, True]
    assert [r.scheduled.job_id for r in results if r.scheduled] == ids
    assert isinstance(results[1].error, SpecError) and results[1].error.exit_code == 2
    for job_id in ids:
        await jobs.get_handle(job_id).cancel()


async def test_schedule_many_refuses_an_oversized_batch(jobs: JobsClient) -> None:
    job_id = new_id("oversized")
    spec = {"id": job_id, "name": "x", "handler": "log", "delay": "1h"}
    with pytest.raises(SpecError) as refused:
        await jobs.schedule_many([spec] * (operations.MAX_BATCH + 1))
    assert refused.value.exit_code == 2
    await assert_not_started(jobs, job_id)


# -- typed errors ------------------------------------------------------------------------


BAD_SPECS: dict[str, dict[str, object]] = {
    "no when": {},
    "two whens": {"in_": 5, "cron": "* * * * *"},
    "naive at": {"at": datetime(2030, 1, 1)},
    "bad duration": {"in_": "soon"},
    "unknown field": {"in_": 5, "colour": "red"},
    "alias twice": {"at": "2030-01-01T00:00:00Z", "run_at": "2030-01-01T00:00:00Z"},
    "bad tz": {"cron": "0 9 * * *", "tz": "Mars/Olympus"},
    "malformed handler name": {"in_": 5, "handler": "no such handler"},
    "cron field on one-shot": {"in_": 5, "overlap": "allow_all"},
}


@pytest.mark.parametrize("case", list(BAD_SPECS))
async def test_bad_spec_raises_spec_error(jobs: JobsClient, queue: str, case: str) -> None:
    job_id = new_id("bad")
    fields = {"handler": "log", "id": job_id, **BAD_SPECS[case]}
    before = await started_count(jobs.temporal_client, queue)
    with pytest.raises(SpecError) as refused:
        await jobs.schedule("bad", **fields)  # type: ignore[arg-type]
    assert refused.value.exit_code == 2
    assert refused.value.problems  # (field, reason) pairs
    await assert_not_started(jobs, job_id)
    await assert_nothing_started(jobs.temporal_client, before, queue)


async def test_a_handler_no_worker_serves_is_scheduled_with_a_warning(jobs: JobsClient) -> None:
    """Issue 41: the handle says what the job waits for; the job exists."""
    handle = await jobs.schedule("u", handler="no.such.handler", in_="1h", id=new_id("unserved"))
    report = await handle.status()
    await handle.cancel()
    [warning] = handle.warnings
    assert "serves handler 'no.such.handler': the job waits for one" in warning
    assert report.status == JobStatus.SCHEDULED


async def test_a_normal_job_runs_after_the_refused_specs(jobs: JobsClient, queue: str) -> None:
    """After the hostile specs above (pytest runs a module's tests in order), the client and the
    queue still serve a normal job on time."""
    assert await normal_job_completes(jobs.temporal_client, queue) < NORMAL_JOB_DEADLINE


async def test_unknown_job_is_job_not_found(jobs: JobsClient) -> None:
    handle = jobs.get_handle(new_id("missing"))
    for call in (handle.status, handle.cancel, handle.trigger, handle.requeue):
        with pytest.raises(JobNotFound) as missing:
            await call()
        assert missing.value.exit_code == 3


async def test_reserved_id_is_refused(jobs: JobsClient) -> None:
    with pytest.raises(SpecError) as refused:
        await jobs.get_handle("dead-letter-queue").cancel()
    assert refused.value.exit_code == 2


async def test_taken_id_is_job_exists(jobs: JobsClient) -> None:
    job_id = new_id("taken")
    handle = await jobs.schedule("first", handler="log", in_="1h", id=job_id)
    with pytest.raises(JobExists) as taken:
        await jobs.schedule("second", handler="log", in_="1h", id=job_id)
    assert taken.value.exit_code == 4
    await handle.cancel()


async def test_trigger_finished_job_is_invalid_transition(jobs: JobsClient) -> None:
    handle = await jobs.schedule("quick", handler="log", in_=0)
    assert (await handle.result(timeout=WAIT)).status == JobStatus.DONE
    for control in (handle.trigger, handle.pause, handle.resume):
        with pytest.raises(InvalidTransition) as refused:
            await control()
        assert refused.value.exit_code == 5


async def test_unreachable_temporal() -> None:
    with pytest.raises(TemporalUnavailable) as down:
        await JobsClient.connect(UNREACHABLE)
    assert down.value.exit_code == 6


async def test_profiles(
    dev_server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text(f'[profile.local]\naddress = "{dev_server.address}"\n')
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(config))
    monkeypatch.delenv("TEMPORAL_ADDRESS", raising=False)
    monkeypatch.delenv("TEMPORAL_PROFILE", raising=False)
    client = await JobsClient.connect(profile="local")
    assert client.temporal_client.service_client.config.target_host == dev_server.address
    with pytest.raises(SpecError) as unknown:
        await JobsClient.connect(profile="nowhere")
    assert unknown.value.exit_code == 2
    assert "local" in str(unknown.value)  # names the profiles there


def test_errors_are_the_library_ones() -> None:
    assert (SpecError, JobNotFound, JobExists) == (
        errors.SpecError,
        errors.JobNotFound,
        errors.JobExists,
    )
    assert {cls.__name__: code for cls, code in EXIT_CODES.items()} == {
        "JobsError": 1,
        "SpecError": 2,
        "JobNotFound": 3,
        "JobExists": 4,
        "InvalidTransition": 5,
        "TemporalUnavailable": 6,
        "TemporalBusy": 6,
    }
    assert all(issubclass(cls, JobsError) for cls in EXIT_CODES)


# -- the synchronous facade --------------------------------------------------------------


def sync_session(address: str, queue: str) -> None:
    """What a WSGI app or script does, in a thread without an event loop (the test's loop
    stays free for the in-process worker)."""
    with SyncJobsClient.connect(address, task_queue=queue, actor=ACTOR) as sync:
        handle = sync.schedule("sync", handler="log", payload={"message": "sync"}, in_=1)
        assert handle.status().job_id == handle.job_id
        final = one_shot(handle.result(timeout=WAIT))
        assert (final.status, final.result) == (JobStatus.DONE, {"logged": True})
        other = sync.schedule("sync-cancel", handler="log", in_="1h")
        other.cancel(note="sync")
        assert sync.get_handle(other.job_id).result(timeout=WAIT).status == JobStatus.CANCELLED
        with pytest.raises(SpecError):
            sync.schedule("bad", handler="log")
        with pytest.raises(JobNotFound):
            sync.get_handle(new_id("missing")).status()
        assert len(list(sync.list(page_size=1, limit=2))) == 2
        hourly = sync.schedule("sync-backfill", handler="log", cron="0 * * * *")
        end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        answer = hourly.backfill(end - timedelta(hours=2), end, "allow_all", note="sync")
        assert (answer.job_id, answer.slots, answer.last) == (hourly.job_id, 3, end)
        hourly.cancel()
    with pytest.raises(RuntimeError, match="closed"):
        handle.status()


async def test_sync_facade(dev_server: DevServer, jobs: JobsClient, queue: str) -> None:
    await asyncio.to_thread(sync_session, dev_server.address, queue)


def sync_unreachable() -> None:
    with pytest.raises(TemporalUnavailable) as down:
        SyncJobsClient.connect(UNREACHABLE)
    assert down.value.exit_code == 6


async def test_sync_unreachable() -> None:
    await asyncio.to_thread(sync_unreachable)


# -- the example -------------------------------------------------------------------------


async def test_example_script(dev_server: DevServer, jobs: JobsClient, queue: str) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "jobctl.starter.schedule_from_python",
        env=cli_env(dev_server.address, queue),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 90)
    assert process.returncode == 0, err.decode()
    first, second = out.decode().splitlines()
    job_id = first.split(":")[0]
    assert first.startswith(f"{job_id}: scheduled, runs at ")
    assert second == f"{job_id}: done, attempts: 1"


@pytest.mark.parametrize(
    ("specs", "kind"),
    [("abc", "str"), ({"jobs": [{"name": "x"}]}, "dict"), (b"[]", "bytes"), (7, "int")],
    ids=["str", "dict", "bytes", "int"],
)
async def test_schedule_many_refuses_what_is_no_list_of_specs(
    jobs: JobsClient, dev_client: Client, specs: Any, kind: str
) -> None:
    job_id = new_id("notalist")
    if isinstance(specs, dict):
        specs["jobs"][0] |= {"id": job_id, "handler": "log", "delay": 60}
    with pytest.raises(SpecError) as refused:
        await jobs.schedule_many(specs)
    assert refused.value.problems == [("specs", f"must be a list of job specs, not a {kind}")]
    with pytest.raises(JobNotFound):  # nothing started
        await jobs.get_handle(job_id).status()


@pytest.mark.parametrize("job_id", [123, None, ["job-1"]], ids=["int", "none", "list"])
async def test_get_handle_refuses_an_id_that_is_no_string(jobs: JobsClient, job_id: Any) -> None:
    with pytest.raises(SpecError) as refused:
        jobs.get_handle(job_id)
    assert refused.value.exit_code == 2
    assert refused.value.problems[0][0] == "job_id"
