"""One status rule everywhere, on a dev server: ``jobctl status``, ``jobctl list --status`` (the
API's ``GET /jobs?status=``, same code) and the board agree for every status, whether or not
the job workflow upserts ``JobStatus`` for running/done/cancelled.

Defect lines covered (issue 14): every status listable through visibility + describe; after
``jobctl dlq discard`` the job says ``discarded``, leaves ``--status dead``, and a requeue names
the discard; a finished job never shows a future run time; newest first is by the job's
time, not running first; the board has a place for cancelled (and discarded) jobs."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.client import Client

from jobctl.starter import dlq, operations, render
from jobctl.starter.board import Snapshot
from jobctl.starter.errors import InvalidTransition
from jobctl.starter.operations import readback
from jobctl.workflows.jobstatus import JobView
from jobctl.workflows.models import JobStatus
from tests.helpers.poll import eventually
from tests.helpers.temporal import end_singletons, running_worker

pytestmark = pytest.mark.devserver
HANDLERS = {"log", "demo.sleep"}
WAIT = 60.0


@dataclass
class Jobs:
    """One job per status, made on a task queue of this module."""

    client: Client
    queue: str
    ids: dict[str, str] = field(default_factory=dict)


def new_id(label: str) -> str:
    return f"ls-{label}-{uuid.uuid4().hex[:6]}"


async def schedule(jobs: Jobs, label: str, **spec: Any) -> str:
    job_id = new_id(label)
    body = {"id": job_id, "name": label, "handler": "demo.sleep", "delay": 0, **spec}
    await operations.schedule(jobs.client, body, HANDLERS, task_queue=jobs.queue)
    jobs.ids[label] = job_id
    return job_id


async def view(client: Client, job_id: str) -> JobView:
    report = await operations.status(client, job_id)
    assert isinstance(report, JobView)
    return report


async def reaches(client: Client, job_id: str, status: JobStatus) -> JobView:
    return await eventually(
        lambda: view(client, job_id),
        lambda seen: seen.status == status,
        timeout=WAIT,
        interval=0.3,
        what=f"{job_id} {status}",
    )


async def listed(client: Client, status: JobStatus | None) -> list[operations.JobRow]:
    return (await operations.list_jobs(client, status.value if status else None, 1000)).jobs


async def appears(client: Client, job_id: str, status: JobStatus) -> None:
    """Visibility is eventually consistent: the job shows under ``status`` soon."""

    async def listed_here() -> bool:
        return job_id in {row.job_id for row in await listed(client, status)}

    await eventually(listed_here, timeout=WAIT, interval=0.3, what=f"{job_id} listed as {status}")


@pytest.fixture(scope="module", autouse=True)
def quick_queries() -> Iterator[None]:
    """A job no worker can answer for (``cancelling`` on a queue nobody polls, ``ended`` whose
    input fails every workflow task) costs each status read the query's whole timeout before
    the fallback (the start event and search attributes, the same rule) answers: 10 s in
    production, 3 s here. A live worker answers in milliseconds, and a slower answer falls back
    to the same status."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(readback, "QUERY_TIMEOUT", timedelta(seconds=3))
        yield


@pytest.fixture(scope="module")
async def jobs(dev_client: Client) -> AsyncIterator[Jobs]:
    """Every status at once. Phase 1 without a worker (pending, cancelling stay put), then a
    worker for the rest; the no-worker jobs live on a queue no worker polls."""
    idle = Jobs(dev_client, f"idle-{uuid.uuid4().hex[:8]}")
    await schedule(idle, "pending")
    await schedule(idle, "cancelling", delay=3600)
    await operations.cancel(dev_client, idle.ids["cancelling"], actor="test")
    made = Jobs(dev_client, f"ls-{uuid.uuid4().hex[:8]}", ids=idle.ids)
    async with running_worker(dev_client, made.queue):
        await schedule(made, "scheduled", delay=3600)
        await schedule(made, "paused", delay=3600)
        await operations.pause(dev_client, made.ids["paused"])
        await schedule(made, "running", payload={"seconds": 120})
        await schedule(
            made,
            "retrying",
            max_attempts=3,
            backoff_base=120,
            payload={"seconds": 0, "fail_times": 5},
        )
        await schedule(made, "done", handler="log")
        await schedule(made, "triggered", handler="log", delay=7200)
        await operations.trigger(dev_client, made.ids["triggered"])
        await schedule(made, "cancelled", delay=3600)
        await operations.cancel(dev_client, made.ids["cancelled"], actor="test")
        await schedule(made, "terminated", delay=3600)
        await dev_client.get_workflow_handle(made.ids["terminated"]).terminate("test")
        dead = {"max_attempts": 1, "payload": {"seconds": 0, "always_fail": True}}
        await schedule(made, "dead", **dead)
        await schedule(made, "discarded", **dead)
        made.ids["ended"] = new_id("ended")  # a hand-made start whose input is no job spec
        await dev_client.start_workflow(
            "JobWorkflow", {"bogus": 1}, id=made.ids["ended"], task_queue=made.queue
        )
        await reaches(dev_client, made.ids["discarded"], JobStatus.DEAD)
        await dlq.release(dev_client, made.ids["discarded"], "discard", actor="test")
        yield made
        for label in ("running", "retrying", "scheduled", "paused"):
            await operations.cancel(dev_client, made.ids[label], actor="test")
    await dev_client.get_workflow_handle(idle.ids["pending"]).terminate("test over")
    await dev_client.get_workflow_handle(idle.ids["cancelling"]).terminate("test over")
    await end_singletons(dev_client)


EXPECTED = [
    ("pending", JobStatus.PENDING),
    ("cancelling", JobStatus.CANCELLING),
    ("scheduled", JobStatus.SCHEDULED),
    ("paused", JobStatus.PAUSED),
    ("running", JobStatus.RUNNING),
    ("retrying", JobStatus.RETRYING),
    ("done", JobStatus.DONE),
    ("triggered", JobStatus.DONE),
    ("cancelled", JobStatus.CANCELLED),
    ("terminated", JobStatus.CANCELLED),
    ("dead", JobStatus.DEAD),
    ("discarded", JobStatus.DISCARDED),
    ("ended", JobStatus.DEAD),
]


@pytest.mark.parametrize(("label", "status"), EXPECTED, ids=[e[0] for e in EXPECTED])
async def test_status_and_listing_agree_for_every_status(
    jobs: Jobs, label: str, status: JobStatus
) -> None:
    """``jobctl status`` says it, ``jobctl list --status`` lists it, and no other status does."""
    job_id = jobs.ids[label]
    await reaches(jobs.client, job_id, status)
    await appears(jobs.client, job_id, status)
    elsewhere = [
        other
        for other in JobStatus
        if other != status and job_id in {r.job_id for r in await listed(jobs.client, other)}
    ]
    assert (await view(jobs.client, job_id)).status == status  # still: not a moving target
    assert not elsewhere, f"{label} also listed under {elsewhere}"


async def test_details_of_the_rule(jobs: Jobs) -> None:
    terminated = await view(jobs.client, jobs.ids["terminated"])
    assert terminated.status_detail == "terminated"
    ended = await view(jobs.client, jobs.ids["ended"])
    assert ended.status_detail == "the run ended (it cannot be requeued)"
    assert ended.last_error and "InvalidWorkflowInput" not in (ended.status_detail or "")
    running = await reaches(jobs.client, jobs.ids["running"], JobStatus.RUNNING)
    assert running.attempt == 1 and running.attempt_label == "attempt 1 of 8"
    line = render.status_line(running, datetime.now(UTC))
    assert "attempt 1 of 8" in line and "attempt 0" not in line
    retrying = await reaches(jobs.client, jobs.ids["retrying"], JobStatus.RETRYING)
    assert retrying.attempt_label == "attempt 2 of 3" and retrying.next_attempt_at
    assert "demo failure on attempt 1" in (retrying.last_error or "")


async def test_discarded_is_discarded_everywhere(jobs: Jobs) -> None:
    """Defect: after ``jobctl dlq discard`` the job said dead, stayed in ``--status dead``, and a
    requeue said "has finished (dead)"."""
    job_id = jobs.ids["discarded"]
    report = await view(jobs.client, job_id)
    assert report.status == JobStatus.DISCARDED
    assert render.status_line(report, datetime.now(UTC)).startswith("discarded after ")
    assert job_id not in {r.job_id for r in await listed(jobs.client, JobStatus.DEAD)}
    with pytest.raises(InvalidTransition, match=r"has finished \(discarded\)"):
        await dlq.release(jobs.client, job_id, "requeue", actor="test")


async def test_a_finished_job_never_shows_a_future_run_time(jobs: Jobs) -> None:
    """Defect: a job triggered early showed its (future) run_at once done."""
    job_id = jobs.ids["triggered"]
    report = await reaches(jobs.client, job_id, JobStatus.DONE)
    assert report.ran_at is not None and report.ran_at <= datetime.now(UTC)
    text = render.report_text(report)
    assert "ran at:" in text and "run at:" not in text and " (in " not in text.split("\n")[2]
    [row] = [r for r in await listed(jobs.client, JobStatus.DONE) if r.job_id == job_id]
    assert row.run_at is not None and row.closed_at is not None and row.run_at <= row.closed_at


async def test_newest_first_is_by_the_jobs_time_not_running_first(jobs: Jobs) -> None:
    """Defect: "newest first" listed running jobs first. Newest = the job's time: when it
    runs; a closed job's never after it closed. Future jobs first, then due, then ended."""
    later = [
        await schedule(jobs, f"at-{hours}h", delay=hours * 3600, handler="log")
        for hours in (3, 1, 2)  # started in this order: the server's order is 2, 1, 3
    ]
    await reaches(jobs.client, jobs.ids["running"], JobStatus.RUNNING)
    await reaches(jobs.client, jobs.ids["done"], JobStatus.DONE)
    mine = {*later, jobs.ids["running"], jobs.ids["done"], jobs.ids["scheduled"]}

    async def complete() -> bool:
        return mine <= {r.job_id for r in await listed(jobs.client, None)}

    await eventually(complete, timeout=WAIT, interval=0.3, what="all listed")
    rows = [r for r in await listed(jobs.client, None) if r.job_id in mine]
    order = [r.job_id for r in rows]
    assert order[:3] == [later[0], later[2], later[1]], order
    assert order.index(jobs.ids["scheduled"]) < order.index(jobs.ids["running"])
    # Due after the running job, done since: newer, so listed before it (the server's own
    # order puts every open run first).
    assert order.index(jobs.ids["done"]) < order.index(jobs.ids["running"])
    times = [r.run_at for r in rows]
    assert all(a is not None and b is not None and a >= b for a, b in itertools.pairwise(times))
    for job_id in later:
        await operations.cancel(jobs.client, job_id, actor="test")


async def test_the_board_shows_the_same_status(jobs: Jobs) -> None:
    """The board computes with the same rule; cancelled and discarded have a column."""
    await reaches(jobs.client, jobs.ids["retrying"], JobStatus.RETRYING)
    wanted = {
        "running": ("running", JobStatus.RUNNING),
        "retrying": ("retrying", JobStatus.RETRYING),
        "pending": ("pending", JobStatus.PENDING),
        "dead": ("dead", JobStatus.DEAD),
        "cancelled": ("cancelled", JobStatus.CANCELLED),
        "terminated": ("cancelled", JobStatus.CANCELLED),
        "discarded": ("cancelled", JobStatus.DISCARDED),
        "paused": ("scheduled", JobStatus.PAUSED),
        "done": ("done", JobStatus.DONE),
    }

    async def places() -> dict[str, tuple[str, str]]:
        board = await Snapshot(jobs.client, datetime.now(UTC)).build()
        where = {c.job_id: (name, c) for name, col in board.columns.items() for c in col.cards}
        found: dict[str, tuple[str, str]] = {}
        for label in wanted:
            if jobs.ids[label] in where:
                name, card = where[jobs.ids[label]]
                found[label] = (name, card.status)
        return found

    await eventually(
        places,
        lambda found: all(found.get(label) == want for label, want in wanted.items()),
        timeout=WAIT,
        interval=0.3,
        what=f"board {wanted}",
    )
    board = await Snapshot(jobs.client, datetime.now(UTC)).build()
    [card] = [c for c in board.columns["running"].cards if c.job_id == jobs.ids["running"]]
    assert card.attempt == 1 and card.attempt_label == "attempt 1 of 8"
    [card] = [c for c in board.columns["retrying"].cards if c.job_id == jobs.ids["retrying"]]
    assert card.attempt_label == "attempt 2 of 3"
    assert datetime.now(UTC) - timedelta(minutes=5) < (
        card.next_attempt_at or datetime.min.replace(tzinfo=UTC)
    )
