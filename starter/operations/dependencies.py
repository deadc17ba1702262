"""The door's checks of ``after`` (issue 44): every id names a job that exists, or another
job of the same request; none names a cron (a cron's slot jobs, ``<cron id>@<slot>``, are
jobs); the jobs of one request name no cycle. Nothing starts when a check fails."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from graphlib import CycleError, TopologicalSorter

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from jobctl.starter.errors import SpecError
from jobctl.starter.operations.rpc import temporal_errors
from jobctl.workflows import names
from jobctl.workflows.models import JobSpec

Problems = list[tuple[str, str]]


async def check_after(client: Client, spec: JobSpec, siblings: Collection[str] = ()) -> None:
    """SpecError unless every id of ``spec.after`` outside ``siblings`` (the ids of the other
    jobs of the same request) names an existing job (open or closed)."""
    problems = await _problems(client, spec, siblings, "after")
    if problems:
        raise SpecError(problems)


async def check_members_after(
    client: Client, members: Sequence[JobSpec], siblings: Collection[str]
) -> None:
    """:func:`check_after` for every member of a batch: one SpecError naming them all."""
    found = await asyncio.gather(
        *(_problems(client, spec, siblings, f"jobs[{i}].after") for i, spec in enumerate(members))
    )
    problems = [problem for member in found for problem in member]
    if problems:
        raise SpecError(problems)


async def _problems(
    client: Client, spec: JobSpec, siblings: Collection[str], field: str
) -> Problems:
    outside = [job_id for job_id in spec.after if job_id not in siblings]
    if not outside:
        return []
    async with temporal_errors():
        found = await asyncio.gather(*(_problem(client, job_id) for job_id in outside))
    return [(field, problem) for problem in found if problem is not None]


async def _problem(client: Client, job_id: str) -> str | None:
    try:
        desc = await client.get_workflow_handle(job_id).describe()
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        return f"no job with id {job_id!r}"
    if desc.workflow_type != names.JOB_WORKFLOW:
        what = "a cron job" if desc.workflow_type == names.CRON_WORKFLOW else "not a job"
        return f"{job_id!r} is {what}: name a job (a cron's slot jobs are <cron id>@<slot>)"
    return None


def cycles(specs: Sequence[JobSpec]) -> dict[str, str]:
    """The ids of the jobs of one request that wait for each other in a cycle, each with the
    reason (``after`` edges to ids outside the request end the walk)."""
    ids = {spec.id for spec in specs}
    graph = {spec.id: [i for i in spec.after if i in ids] for spec in specs}
    found: dict[str, str] = {}
    while True:
        try:
            TopologicalSorter({k: v for k, v in graph.items() if k not in found}).prepare()
        except CycleError as err:
            loop: list[str] = list(dict.fromkeys(err.args[1]))
            reason = "the jobs wait for each other in a cycle: " + " -> ".join([*loop, loop[0]])
            found.update(dict.fromkeys(loop, reason))
            continue
        return found


def levels(specs: Sequence[JobSpec]) -> list[list[int]]:
    """The indices of ``specs`` in waves: each spec after every spec of the same request it
    names in ``after`` (a request without such names is one wave). No cycles (see
    :func:`cycles`)."""
    index = {spec.id: i for i, spec in enumerate(specs)}
    sorter = TopologicalSorter(
        {i: [index[d] for d in spec.after if d in index] for i, spec in enumerate(specs)}
    )
    sorter.prepare()
    waves: list[list[int]] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        waves.append(ready)
        sorter.done(*ready)
    return waves
