"""A job starts with the ``BuildIds`` its first workflow task would write (connection.build), so
the server skips that visibility write: two visibility writes per job (start, close) instead
of three. On a dev server of this module's own that serves its metrics; the control (the same
job started without the preset) shows the count this module asserts on can move.

A server that refuses the preset (Temporal says it may stop accepting ``BuildIds`` from
users) is stood in for by a preset under a name this server refuses: the job still starts,
runs, and later starts leave the preset off.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError

from jobctl.activities.registry import load_handlers
from jobctl.connection import build
from jobctl.starter import operations
from jobctl.workflows import cronmath, names
from jobctl.workflows.job_rules import start_search_attributes
from jobctl.workflows.models import BUILD_IDS, JOB_NAME, JobReport, JobStatus
from tests.helpers.metered import Lab, metered_lab
from tests.helpers.poll import eventually

HANDLERS = load_handlers("tests.handlers").names()
# Refused at start by this server ("attribute can't be set in SearchAttributes").
REFUSED_KEY = SearchAttributeKey.for_keyword_list("TemporalUsedWorkerDeploymentVersions")
SETTLED = 3.0  # seconds a visibility count must hold still (the server publishes periodically)


def test_the_build_id_is_a_digest_of_the_workflow_code(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for root in (one, two):
        (root / "models").mkdir(parents=True)
        (root / "job.py").write_text("x = 1\n")
        (root / "models" / "spec.py").write_text("y = 2\n")
    assert build.source_digest(one) == build.source_digest(two)
    (two / "notes.txt").write_text("not code")
    assert build.source_digest(one) == build.source_digest(two)
    (two / "models" / "spec.py").write_text("y = 3\n")
    assert build.source_digest(one) != build.source_digest(two)
    assert build.build_id() == build.build_id()
    assert build.build_id().startswith(build.BUILD_PREFIX)


def test_the_preset_is_what_an_unversioned_worker_writes() -> None:
    assert build.build_ids("b7") == ["unversioned", "unversioned:b7"]
    attrs = TypedSearchAttributes([SearchAttributePair(JOB_NAME, "n")])
    pairs = {pair.key.name: pair.value for pair in build.preset(attrs)}
    assert pairs == {"JobName": "n", "BuildIds": build.build_ids(build.build_id())}


@pytest.fixture(scope="module")
async def lab() -> AsyncIterator[Lab]:
    async with metered_lab("build") as lab:
        yield lab


async def settled_writes(lab: Lab, at_least: float = 0.0) -> float:
    """The server's visibility writes so far, once they reached ``at_least`` and held still."""
    return (await lab.server.settled(SETTLED, at_least)).visibility_writes


async def schedule(lab: Lab) -> str:
    job_id = f"build-{uuid.uuid4().hex[:8]}"
    spec = {"id": job_id, "name": job_id, "handler": "log", "delay": 0, "dispatch_lead": 0}
    await operations.schedule(lab.client, spec, HANDLERS, datetime.now(UTC), task_queue=lab.queue)
    return job_id


async def result(client: Client, job_id: str) -> JobReport:
    report: JobReport = await client.get_workflow_handle(job_id, result_type=JobReport).result()
    return report


async def build_ids_of(client: Client, job_id: str) -> list[str]:
    described = await client.get_workflow_handle(job_id).describe()
    return list(described.typed_search_attributes.get(BUILD_IDS) or [])


@pytest.mark.timeout(180)
async def test_a_job_costs_two_visibility_writes_and_without_the_preset_three(lab: Lab) -> None:
    before = await settled_writes(lab)
    job_ids = [await schedule(lab) for _ in range(3)]
    for job_id in job_ids:
        assert (await result(lab.client, job_id)).status == JobStatus.DONE
    with_preset = await settled_writes(lab, before + 2 * len(job_ids)) - before
    assert with_preset == 2 * len(job_ids)
    for job_id in job_ids:
        expected = ["unversioned", f"unversioned:{build.build_id()}"]
        assert await build_ids_of(lab.client, job_id) == expected

    # The control: the same job started the plain way costs the upsert the preset saves.
    now = datetime.now(UTC)
    spec = operations.validate_spec(
        {"id": f"plain-{uuid.uuid4().hex[:8]}", "name": "plain", "handler": "log", "run_at": now},
        HANDLERS,
        now,
    )
    handle = await lab.client.start_workflow(
        names.JOB_WORKFLOW,
        spec,
        id=spec.id,
        task_queue=lab.queue,
        search_attributes=start_search_attributes(spec, JobStatus.SCHEDULED),
    )
    await handle.result()
    start = before + with_preset
    assert await settled_writes(lab, start + 3) - start == 3


@pytest.fixture
def refusing_server_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The preset under a name the server refuses, and a process that has not been refused."""
    monkeypatch.setattr(build, "BUILD_IDS", REFUSED_KEY)
    monkeypatch.setattr(build, "_offered", True)
    yield


@pytest.mark.usefixtures("refusing_server_key")
async def test_a_refused_preset_starts_the_job_without_it_from_then_on(lab: Lab) -> None:
    attrs = TypedSearchAttributes([])
    assert list(build.preset(attrs)) != []  # offered until refused
    first = await schedule(lab)
    assert (await result(lab.client, first)).status == JobStatus.DONE
    assert list(build.preset(attrs)) == []  # refused once: left off for this process
    second = await schedule(lab)
    assert (await result(lab.client, second)).status == JobStatus.DONE
    for job_id in (first, second):
        assert (await build_ids_of(lab.client, job_id))[0] == "unversioned"  # the server's own


async def start_event_build_ids(client: Client, workflow_id: str) -> list[str]:
    """``BuildIds`` as the workflow's start event carries it (what its starter set)."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    field = started.search_attributes.indexed_fields.get(names.SA_BUILD_IDS)
    return [] if field is None else list(json.loads(field.data))


async def test_a_cron_starts_with_the_preset_and_its_slots_jobs_without_it(lab: Lab) -> None:
    """A slot's job is started by the cron's workflow code, which cannot start it again
    without the preset if a server refused it: the workflow task would fail over and over and
    the cron would stop. So slots go without (connection/build.py)."""
    cron_id = f"build-cron-{uuid.uuid4().hex[:8]}"
    spec = {"id": cron_id, "name": cron_id, "handler": "log", "cron": "*/2 * * * * *"}
    now = datetime.now(UTC)
    scheduled = await operations.schedule(lab.client, spec, HANDLERS, now, task_queue=lab.queue)
    assert scheduled.next_run_at is not None
    slot_job = f"{cron_id}@{cronmath.iso_utc(scheduled.next_run_at)}"
    try:
        report = await eventually(
            lambda: result(lab.client, slot_job), retry_on=(RPCError,), what="the first slot"
        )
        assert report.status == JobStatus.DONE
        expected = ["unversioned", f"unversioned:{build.build_id()}"]
        assert await start_event_build_ids(lab.client, cron_id) == expected
        assert await start_event_build_ids(lab.client, slot_job) == []
    finally:
        await lab.client.get_workflow_handle(cron_id).terminate("test over")
