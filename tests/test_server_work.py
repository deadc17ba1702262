"""What a job costs the dev server beyond its history, counted from the server's metrics on a
server of this module's own:

- The dev server we ship reads the search attribute definitions once a minute, as any
  Temporal server does, not at every lookup (start-dev's default, about eight database reads
  per job: starter/dev/devserver.py SEARCH_ATTRIBUTE_CACHE_CONFIG). The control is a server
  with start-dev's default.
- A job due now, scheduled through the client a worker of this process runs on, starts
  eagerly: its first workflow task comes back in the start's answer, so only its second one
  goes through the task queue (operations.starting). The controls: the same job scheduled
  through a client without a worker, and a job with a priority or a fairness key, which goes
  through the queue, where those order a backlog.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime

import pytest
from temporalio.client import Client

from bench.meter import Reading
from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.starter.dev.devserver import SEARCH_ATTRIBUTE_CACHE_CONFIG
from jobctl.workflows.models import JobReport, JobStatus
from tests.helpers.metered import Lab, metered_lab

HANDLERS = load_handlers("tests.handlers").names()
PLAIN: list[Mapping[str, object]] = [{}, {}, {}]
SETTLED = 3.0  # seconds the counters must hold still (the server publishes periodically)
# A Temporal server refreshes its cache of the definitions once a minute per service (four
# here); a window of a few jobs may hold one refresh of each. start-dev's default read them
# 8 times per job (bench.sustained, the server's persistence metrics).
CACHE_REFRESHES = 4
FORCED_READS_PER_JOB = 5


@pytest.fixture(scope="module")
async def lab() -> AsyncIterator[Lab]:
    async with metered_lab("work") as lab:
        yield lab


async def run_jobs(client: Client, queue: str, jobs: Sequence[Mapping[str, object]]) -> None:
    """One job due now per entry of ``jobs`` (spec fields on top of a plain one), scheduled
    through ``client``, each waited for until done."""
    for fields in jobs:
        job_id = f"work-{uuid.uuid4().hex[:8]}"
        spec = {"id": job_id, "name": job_id, "handler": "log", "delay": 0, **fields}
        await operations.schedule(client, spec, HANDLERS, datetime.now(UTC), task_queue=queue)
        handle = client.get_workflow_handle(job_id, result_type=JobReport)
        assert (await handle.result()).status == JobStatus.DONE


async def counted(
    lab: Lab, client: Client, jobs: Sequence[Mapping[str, object]] = PLAIN
) -> tuple[Reading, Reading]:
    """Readings around ``run_jobs``; the second once the jobs' visibility writes (a start and
    a close each) are in and every counter held still."""
    before = await lab.server.settled(SETTLED)
    await run_jobs(client, lab.queue, jobs)
    after = await lab.server.settled(SETTLED, before.visibility_writes + 2 * len(jobs))
    return before, after


def dispatches(before: Reading, after: Reading) -> float:
    return after.workflow_task_dispatches - before.workflow_task_dispatches


def definition_reads(before: Reading, after: Reading) -> float:
    return after.search_attribute_reads - before.search_attribute_reads


@pytest.mark.timeout(120)
async def test_a_job_due_now_from_a_workers_process_skips_the_task_queue_once(lab: Lab) -> None:
    before, after = await counted(lab, lab.client)  # the client the lab's worker runs on
    assert dispatches(before, after) == len(PLAIN)
    # Our dev server: no read of the definitions per job.
    assert definition_reads(before, after) <= CACHE_REFRESHES

    converter = lab.client.data_converter
    without_worker = await Client.connect(lab.server.address, data_converter=converter)
    before, after = await counted(lab, without_worker)
    assert dispatches(before, after) == 2 * len(PLAIN)


@pytest.mark.timeout(120)
async def test_a_job_with_a_priority_or_fairness_key_goes_through_the_task_queue(
    lab: Lab,
) -> None:
    ordered: list[Mapping[str, object]] = [{"priority": 1}, {"fairness_key": "tenant-a"}]
    before, after = await counted(lab, lab.client, ordered)
    assert dispatches(before, after) == 2 * len(ordered)


@pytest.mark.timeout(120)
@pytest.mark.devserver  # starts `temporal server start-dev` itself
async def test_start_devs_default_reads_the_definitions_at_every_lookup() -> None:
    forced = {key: True for key in SEARCH_ATTRIBUTE_CACHE_CONFIG}  # start-dev's own default
    async with metered_lab("forced", **forced) as lab:
        before, after = await counted(lab, lab.client)
    assert definition_reads(before, after) >= FORCED_READS_PER_JOB * len(PLAIN)
