"""``jobctl list`` / ``GET /jobs``: jobs and crons by public status, newest first.

Every row's status is the one rule's (:mod:`workflows.jobstatus`). Visibility narrows the
candidates for a status (on ``ExecutionStatus``, ``JobStatus`` and ``JobRunAt``; a job writes
``JobStatus`` scheduled, paused, dead or discarded only); each open candidate is then described,
because only describe tells pending from running, retrying and cancelling:

=============  ================================================================================
done           ExecutionStatus Completed (no describe)
cancelled      Canceled or Terminated (no describe)
discarded      Failed and JobStatus discarded (no describe)
dead           open and JobStatus dead; or Failed / TimedOut otherwise (a run that ended)
paused         open and JobStatus paused
scheduled      open crons not paused; open jobs with JobRunAt after now
pending,       open jobs with JobRunAt at or before now
running,
retrying
cancelling     every open job and cron (a cancel can meet any of them)
=============  ================================================================================

"Newest first" means by the job's time: when it runs (``JobRunAt``), and for a closed job
never later than when it closed (a job triggered or cancelled before its run_at), so jobs
due in the future come first, then those due or running now, then finished ones by when
they ended. Temporal's SQL visibility cannot ORDER BY, so the order holds within a page;
pages follow the server's order (open runs first). A call looks at up to SCAN_LIMIT
visibility rows to fill a page: a rarer status may return fewer rows than ``limit`` along
with a token to continue.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from jobctl.starter import jobviews
from jobctl.starter.errors import SpecError
from jobctl.starter.operations.pagetokens import encode_token, readable_token
from jobctl.starter.operations.rpc import temporal_errors
from jobctl.workflows import names
from jobctl.workflows.jobstatus import job_time, public_status
from jobctl.workflows.models import JOB_HANDLER, JOB_NAME, JobStatus

SCAN_LIMIT = 1000
DESCRIBE_CONCURRENCY = 8
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The visibility query's names (workflow types, search attributes), spelled once.
_JOB = names.JOB_WORKFLOW
_CRON = names.CRON_WORKFLOW
_STATUS = names.SA_JOB_STATUS
_RUN_AT = names.SA_JOB_RUN_AT


class JobRow(BaseModel):
    """One line of ``jobctl list``: the visibility row, an open job's status refined by
    describe."""

    job_id: str
    kind: Literal["job", "cron"]
    name: str | None
    handler: str | None
    status: str | None = Field(description="the public status (workflows/jobstatus.py)")
    detail: str | None = None
    run_at: datetime | None = Field(
        None, description="the job's time: when it runs; a closed job's never after it closed"
    )
    closed_at: datetime | None = None
    workflow_status: str | None


class JobPage(BaseModel):
    jobs: list[JobRow]
    next_page_token: str | None = None


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def status_query(status: JobStatus | None, now: datetime) -> str:
    """The visibility query for the candidates of ``status`` (every job when None)."""
    base = f'WorkflowType IN ("{_JOB}", "{_CRON}") AND ExecutionStatus != "ContinuedAsNew"'
    opened = 'ExecutionStatus = "Running"'
    job = f'WorkflowType = "{_JOB}"'
    at = _iso(now)
    match status:
        case None | JobStatus.CANCELLING:
            extra = "" if status is None else opened
        case JobStatus.DONE:
            extra = 'ExecutionStatus = "Completed"'
        case JobStatus.CANCELLED:
            extra = 'ExecutionStatus IN ("Canceled", "Terminated")'
        case JobStatus.DISCARDED:
            extra = f'ExecutionStatus = "Failed" AND {_STATUS} = "discarded"'
        case JobStatus.DEAD:
            extra = (
                f'(({opened} AND {_STATUS} = "dead") OR (ExecutionStatus IN ("Failed", '
                f'"TimedOut") AND ({_STATUS} IS NULL OR {_STATUS} != "discarded")))'
            )
        case JobStatus.PAUSED:
            extra = f'{opened} AND {_STATUS} = "paused"'
        case JobStatus.SCHEDULED:
            extra = (
                f'{opened} AND ((WorkflowType = "{_CRON}" AND ({_STATUS} IS NULL OR '
                f'{_STATUS} != "paused")) OR '
                f'({job} AND {_STATUS} = "scheduled" AND {_RUN_AT} > "{at}"))'
            )
        case _:  # pending, running, retrying
            extra = f'{opened} AND {job} AND {_STATUS} = "scheduled" AND {_RUN_AT} <= "{at}"'
    return f"{base} AND {extra}" if extra else base


def listed_status(status: str | None) -> JobStatus | None:
    """The status a listing filters on; a typed refusal (not a ValueError) for an unknown one."""
    if status is None:
        return None
    try:
        return JobStatus(status)
    except ValueError:
        known = ", ".join(s.value for s in JobStatus)
        raise SpecError([("status", f"unknown status {status[:40]!r}; one of: {known}")]) from None


async def list_jobs(
    client: Client, status: str | None = None, limit: int = 50, page_token: str | None = None
) -> JobPage:
    """A page of jobs and crons whose public status is ``status`` (any when None)."""
    wanted = listed_status(status)
    now = datetime.now(UTC)
    query = status_query(wanted, now)
    rows: list[JobRow] = []
    scanned = 0
    async with temporal_errors():
        token = await readable_token(client, query, page_token)
        while True:
            size = limit - len(rows)
            it = client.list_workflows(query, page_size=size, next_page_token=token)
            await it.fetch_next_page(page_size=size)
            page = list(it.current_page or [])
            scanned += len(page)
            found = await jobviews.gathered(
                [job_row(client, wf, now) for wf in page], DESCRIBE_CONCURRENCY
            )
            rows += [r for r in found if r is not None and (wanted is None or r.status == wanted)]
            token = it.next_page_token or None
            if token is None or len(rows) >= limit or scanned >= SCAN_LIMIT:
                break
    rows.sort(key=lambda r: r.run_at or EPOCH, reverse=True)
    return JobPage(jobs=rows, next_page_token=encode_token(token))


async def job_row(client: Client, wf: WorkflowExecution, now: datetime) -> JobRow | None:
    """One row; an open run is described (None if it was deleted meanwhile)."""
    facts = jobviews.visible_facts(wf)
    if wf.status == WorkflowExecutionStatus.RUNNING:
        handle = client.get_workflow_handle(wf.id, run_id=wf.run_id)
        try:
            desc = await handle.describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        beat = await jobviews.heartbeat(client, desc)
        facts = await jobviews.described_facts(client, desc, beat)
    verdict = public_status(facts, now)
    attrs = wf.typed_search_attributes
    return JobRow(
        job_id=wf.id,
        kind=jobviews.kind_of(wf.workflow_type),
        name=attrs.get(JOB_NAME),
        handler=attrs.get(JOB_HANDLER),
        status=verdict.status.value,
        detail=verdict.detail,
        run_at=job_time(await jobviews.next_run(wf, now), wf.close_time) or wf.start_time,
        closed_at=wf.close_time,
        workflow_status=wf.status.name.lower() if wf.status else None,
    )
