"""Job operations on a Temporal client: one code path for the CLI, the HTTP API and scripts.

Each function raises the typed errors of :mod:`starter.errors`, never raw SDK errors, so
callers map them to exit codes or HTTP statuses without knowing Temporal.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import json
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar
from uuid import uuid4

from pydantic import BaseModel, Field, ValidationError
from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from activities.registry import load_handlers
from starter import jobviews
from starter.client import task_queue as default_task_queue
from starter.errors import (
    InvalidTransition,
    JobExists,
    JobNotFound,
    SpecError,
    TemporalUnavailable,
)
from workflows import cronmath
from workflows.cron_workflow import (
    CRON_MEMO_KEY,
    CronJobWorkflow,
    cron_details,
    cron_memo,
    cron_search_attributes,
    cron_summary,
)
from workflows.job_workflow import JobWorkflow, start_search_attributes
from workflows.jobstatus import Facts, JobView, public_status
from workflows.models import (
    JOB_HANDLER,
    JOB_NAME,
    JOB_RUN_AT,
    JOB_STATUS,
    LEAN_SHAPE,
    MAX_NOTE,
    REGISTRY_WORKFLOW_ID,
    SHAPE_MEMO_KEY,
    ControlRequest,
    CronInput,
    CronReport,
    CronUpdate,
    JobReport,
    JobSpec,
    JobStatus,
    PauseRequest,
    SlotTime,
    check_job_id,
    parse_instant,
    parse_spec,
)
from workflows.uitext import job_details, job_summary

ALLOWED_HANDLERS_ENV = "JOBS_ALLOWED_HANDLERS"
MIN_DISPATCH_LEAD = 15.0  # seconds; jobs wake between this and their dispatch_lead early
REQUEST_MEMO_KEY = "request"  # fingerprint of the submission that created the job
JOB_WORKFLOW = "JobWorkflow"
CRON_WORKFLOW = "CronJobWorkflow"
# How long a control waits for a worker to process it before telling the user why.
CONTROL_TIMEOUT = 30.0
QUERY_TIMEOUT = timedelta(seconds=10)
# History length once the first workflow task completed: started, task scheduled/started/completed.
FIRST_TASK_DONE = 4

T = TypeVar("T")
Report = JobView | JobReport | CronReport


class Scheduled(BaseModel):
    """The answer to a schedule: the job's id and its next run (``created`` False when an
    identical request had already created it)."""

    job_id: str
    next_run_at: datetime | None
    created: bool = True


class JobRow(BaseModel):
    """One line of ``jobs list``: the visibility row, an open job's status refined by describe
    (:mod:`starter.listing`)."""

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


def encode_token(token: bytes | None) -> str | None:
    """Visibility page tokens travel as text (CLI flag, API query): URL-safe base64 plus a
    short checksum, so a mangled token is refused here instead of upsetting the server."""
    if not token:
        return None
    return f"{base64.urlsafe_b64encode(token).decode()}.{_token_check(token)}"


def decode_token(token: str | None) -> bytes | None:
    if not token:
        return None
    encoded, _, check = token.rpartition(".")
    try:
        raw = base64.b64decode(encoded.encode(), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not raw or check != _token_check(raw):
        raise SpecError([("page_token", "is not a token from a previous page")])
    return raw


async def readable_token(client: Client, query: str, token: str | None) -> bytes | None:
    """:func:`decode_token`, then one look at the server: the checksum is no secret, so a
    made-up token can pass it, and the server answers that with UNKNOWN, which the SDK would
    retry for ten seconds. One call without retries tells the caller's mistake (422 naming
    ``page_token``) from an outage (raised as is, for :func:`temporal_errors`)."""
    raw = decode_token(token)
    if raw is None:
        return None
    probe = ListWorkflowExecutionsRequest(
        namespace=client.namespace, page_size=1, next_page_token=raw, query=query
    )
    try:
        await client.workflow_service.list_workflow_executions(probe, retry=False)
    except RPCError as err:
        if err.status in (RPCStatusCode.UNKNOWN, RPCStatusCode.INVALID_ARGUMENT):
            raise SpecError([("page_token", "is not a token from a previous page")]) from err
        raise
    return raw


def _token_check(token: bytes) -> str:
    return hashlib.sha256(token).hexdigest()[:12]


def fingerprint(data: dict[str, Any] | JobSpec) -> str:
    """A stable digest of a submission as sent, to recognise a retried identical request."""
    raw = data.model_dump(mode="json", exclude_unset=True) if isinstance(data, JobSpec) else data
    canonical = json.dumps(raw, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@asynccontextmanager
async def temporal_errors(job_id: str | None = None) -> AsyncIterator[None]:
    """Translate SDK failures into :mod:`starter.errors`."""
    try:
        yield
    except RPCError as err:
        refused = err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT)
        if refused and job_id is not None:
            raise JobNotFound(f"no job with id {job_id!r}") from err
        if err.status == RPCStatusCode.INVALID_ARGUMENT:  # a malformed query or token
            raise SpecError([("request", err.message)]) from err
        if err.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            raise TemporalUnavailable(f"Temporal is unreachable: {err.message}") from err
        raise


def validate_spec(
    data: dict[str, Any] | JobSpec, handlers: Iterable[str] | None, now: datetime
) -> JobSpec:
    """Parse a submission; collects every problem, the handler name included (unless
    ``handlers`` is None: a first pass that needs no server)."""
    problems: list[tuple[str, str]] = []
    spec: JobSpec | None = None
    try:
        spec = parse_spec(data, now, new_id=f"job-{uuid4()}")
    except ValidationError as err:
        problems = SpecError.from_validation(err).problems
    known = set(handlers) if handlers is not None else None
    handler = data.handler if isinstance(data, JobSpec) else data.get("handler")
    if known is not None and isinstance(handler, str) and handler and handler not in known:
        problems.append(("handler", f"unknown handler {handler!r}; known: {sorted(known)}"))
    if problems or spec is None:
        raise SpecError(problems)
    return spec


async def known_handlers(client: Client) -> set[str]:
    """Handler names a job may use: ``JOBS_ALLOWED_HANDLERS`` (comma-separated) when set,
    else what workers published to the handler registry plus this process's own registry
    (the built-ins and ``JOBS_HANDLER_MODULES``)."""
    allowed = os.environ.get(ALLOWED_HANDLERS_ENV)
    if allowed:
        return {name.strip() for name in allowed.split(",") if name.strip()}
    published: list[str] = []
    # No worker published yet, or none answering: this process's registry remains.
    with contextlib.suppress(RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError):
        published = await client.get_workflow_handle(REGISTRY_WORKFLOW_ID).query(
            "handlers", result_type=list[str], rpc_timeout=QUERY_TIMEOUT
        )
    return set(published) | set(load_handlers().names())


async def schedule(
    client: Client,
    data: dict[str, Any] | JobSpec,
    handlers: Iterable[str] | None = None,
    now: datetime | None = None,
    task_queue: str | None = None,
) -> Scheduled:
    """Validate and start a job. Nothing starts if anything is wrong.

    ``handlers`` defaults to :func:`known_handlers`. ``now`` (default: this machine's clock)
    anchors ``delay``; tests pass the server's time. ``task_queue`` defaults to
    ``JOBS_TASK_QUEUE``. See :func:`start` for ids and retries.
    """
    now = now or datetime.now(UTC)
    validate_spec(data, None, now)  # every spec problem, before asking the server anything
    known = handlers if handlers is not None else await known_handlers(client)
    spec = validate_spec(data, known, now)
    return await start(client, spec, now, fingerprint(data), task_queue)


async def start(
    client: Client,
    spec: JobSpec,
    now: datetime,
    request: str | None = None,
    task_queue: str | None = None,
) -> Scheduled:
    """Start an already validated spec (see :func:`validate_spec`).

    One-shots start with ``start_delay`` so they cost the server nothing until due. Job ids
    are unique for good. Sending the same request (same ``request`` fingerprint) again
    answers with the existing job (``created=False``); a different one with a taken id
    raises JobExists.
    """
    memo: dict[str, Any] = {SHAPE_MEMO_KEY: LEAN_SHAPE}
    if request:
        memo[REQUEST_MEMO_KEY] = request
    queue = task_queue or default_task_queue()
    async with temporal_errors():
        try:
            if spec.cron is not None:
                first = cronmath.next_slot(
                    cronmath.parse(spec.cron), cronmath.zone(spec.timezone), now
                )
                await client.start_workflow(
                    CronJobWorkflow.run,
                    CronInput(spec=spec),
                    id=spec.id,
                    task_queue=queue,
                    memo={**memo, CRON_MEMO_KEY: cron_memo(spec)},
                    search_attributes=cron_search_attributes(spec, JobStatus.SCHEDULED, first),
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                    static_summary=cron_summary(spec),
                    static_details=cron_details(spec),
                )
                return Scheduled(job_id=spec.id, next_run_at=first)
            assert spec.run_at is not None
            # Wake at a random moment within the dispatch lead before run_at: a herd due in
            # one second reaches the server spread over that window.
            lead = random.uniform(min(MIN_DISPATCH_LEAD, spec.dispatch_lead), spec.dispatch_lead)
            delay = spec.run_at - now - timedelta(seconds=lead)
            await client.start_workflow(
                JobWorkflow.run,
                spec,
                id=spec.id,
                task_queue=queue,
                memo=memo,
                start_delay=delay if delay > timedelta(0) else None,
                search_attributes=start_search_attributes(spec, JobStatus.SCHEDULED),
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                static_summary=job_summary(spec),
                static_details=job_details(spec),
            )
        except WorkflowAlreadyStartedError as err:
            existing = await client.get_workflow_handle(spec.id).describe()
            if request and (await existing.memo()).get(REQUEST_MEMO_KEY) == request:
                run_at = existing.typed_search_attributes.get(JOB_RUN_AT)
                return Scheduled(job_id=spec.id, next_run_at=run_at, created=False)
            raise JobExists(f"a job with id {spec.id!r} already exists") from err
    return Scheduled(job_id=spec.id, next_run_at=spec.run_at)


def check_not_reserved(job_id: str) -> None:
    """A system workflow's id (RESERVED_IDS) is no job: refused before Temporal is asked."""
    try:
        check_job_id(job_id)
    except ValueError as err:
        raise SpecError([("job_id", str(err))]) from err


async def describe(
    client: Client, job_id: str
) -> tuple[WorkflowHandle[Any, Any], WorkflowExecutionDescription]:
    """The job's handle and description; anything but a job or cron workflow is no job."""
    check_not_reserved(job_id)
    handle = client.get_workflow_handle(job_id)
    async with temporal_errors(job_id):
        desc = await handle.describe()
    if desc.workflow_type not in (JOB_WORKFLOW, CRON_WORKFLOW):
        raise JobNotFound(f"no job with id {job_id!r} (a {desc.workflow_type} workflow)")
    return handle, desc


async def status(client: Client, job_id: str) -> Report:
    """The job's state: the workflow's ``status`` query, with the status computed by the one
    rule (:mod:`workflows.jobstatus`) from what describe says.

    Works without a worker and before a delayed job's first task: then the report is built
    from the start event and the search attributes instead of the query.
    """
    handle, desc = await describe(client, job_id)
    beat = await jobviews.heartbeat(client, desc)
    async with temporal_errors(job_id):
        facts = await jobviews.described_facts(client, desc, beat)
    if desc.workflow_type == CRON_WORKFLOW:
        async with temporal_errors(job_id):
            cron: CronReport = await handle.query(
                "status", result_type=CronReport, rpc_timeout=QUERY_TIMEOUT
            )
        verdict = public_status(facts, datetime.now(UTC))
        return cron.model_copy(update={"status": verdict.status})
    report: JobReport | None = None
    # Until its first workflow task completes (a delayed job sleeping on start_delay) the
    # workflow cannot answer a query; its start event already says everything.
    if desc.raw_description.workflow_execution_info.history_length >= FIRST_TASK_DONE:
        try:
            async with temporal_errors(job_id):
                report = await handle.query(
                    "status", result_type=JobReport, rpc_timeout=QUERY_TIMEOUT
                )
        except (
            WorkflowQueryFailedError,
            WorkflowQueryRejectedError,
            RPCError,
            TemporalUnavailable,
        ):
            report = None  # not started yet, or no worker answering: fall back below
    if report is None:
        report = await _report_from_start(client, handle, desc)
    return jobviews.job_view(report, facts, desc, beat, datetime.now(UTC))


async def _report_from_start(
    client: Client, handle: WorkflowHandle[Any, Any], desc: WorkflowExecutionDescription
) -> JobReport:
    attrs = desc.typed_search_attributes
    status = JobStatus(attrs.get(JOB_STATUS) or JobStatus.SCHEDULED)
    async with temporal_errors(handle.id):
        async for event in handle.fetch_history_events():
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            try:
                [spec] = await client.data_converter.decode(payloads, [JobSpec])
            except Exception:  # a hand-made start with an input that is no job spec
                name = attrs.get(JOB_NAME) or handle.id
                return JobReport(
                    job_id=handle.id,
                    name=name,
                    handler=attrs.get(JOB_HANDLER) or "",
                    status=status,
                    run_at=attrs.get(JOB_RUN_AT),
                    max_attempts=1,
                    idempotency_key=handle.id,
                )
            break
        else:
            raise JobNotFound(f"job {handle.id!r} has no history")
    return JobReport(
        job_id=spec.id,
        name=spec.name,
        handler=spec.handler,
        status=status,
        run_at=spec.run_at,
        max_attempts=spec.max_attempts,
        idempotency_key=spec.key,
    )


cancel_requested = jobviews.cancel_requested


async def list_jobs(
    client: Client, status: str | None = None, limit: int = 50, page_token: str | None = None
) -> JobPage:
    """A page of jobs and crons, newest first (see :mod:`starter.listing`)."""
    from starter import listing  # it builds on this module

    return await listing.list_jobs(client, status, limit, page_token)


async def _control(job_id: str, action: str, call: Callable[[], Awaitable[T]]) -> T:
    """Run an update; a rejected or unprocessable one becomes a clear InvalidTransition."""
    try:
        async with temporal_errors(job_id):
            return await asyncio.wait_for(call(), CONTROL_TIMEOUT)
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        reason = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
        raise InvalidTransition(reason) from err
    except RPCError as err:  # the job closed between our describe and the update
        if "completed" in err.message.lower():
            raise InvalidTransition(f"cannot {action}: job {job_id!r} has finished") from err
        raise
    except TimeoutError as err:
        raise TemporalUnavailable(
            f"no worker processed {action} within {CONTROL_TIMEOUT:g}s; is `jobs worker` running?"
        ) from err


def require_open(job_id: str, action: str, desc: WorkflowExecutionDescription) -> None:
    """A closed job answers no control: say so instead of letting the RPC fail obscurely."""
    if desc.status != WorkflowExecutionStatus.RUNNING:
        facts = Facts(
            execution=jobviews.execution(desc.status),
            attribute=desc.typed_search_attributes.get(JOB_STATUS),
            kind=jobviews.kind_of(desc.workflow_type),
        )
        state = public_status(facts, datetime.now(UTC)).status
        raise InvalidTransition(f"cannot {action}: job {job_id!r} has finished ({state})")


async def _update(client: Client, job_id: str, name: str, arg: BaseModel | None = None) -> Report:
    handle, desc = await describe(client, job_id)
    require_open(job_id, name, desc)
    is_cron = desc.workflow_type == CRON_WORKFLOW
    if name == "update" and not is_cron:
        raise InvalidTransition(f"cannot update: job {job_id!r} is not a cron job")
    result_type = CronReport if is_cron else JobReport
    args = [arg] if arg is not None else []
    return await _control(
        job_id, name, lambda: handle.execute_update(name, args=args, result_type=result_type)
    )


def check_note(note: str | None) -> str | None:
    """An operator's note for the audit trail: trimmed, blank is none, at most MAX_NOTE."""
    if note is None or not note.strip():
        return None
    note = note.strip()
    try:
        note.encode("utf-8")
    except UnicodeEncodeError:
        raise SpecError([("note", "contains a lone surrogate (not valid Unicode text)")]) from None
    if len(note) > MAX_NOTE:
        raise SpecError([("note", f"must be at most {MAX_NOTE} characters (got {len(note)})")])
    return note


def control_request(note: str | None = None, actor: str | None = None) -> ControlRequest | None:
    """Who and why for a control; None (the control's older, argument-less shape) when the
    caller says neither."""
    note = check_note(note)
    return ControlRequest(actor=actor, note=note) if note or actor else None


async def pause(
    client: Client,
    job_id: str,
    until: datetime | str | None = None,
    note: str | None = None,
    actor: str | None = None,
) -> Report:
    """Hold a job; ``until`` (ISO-8601 text or an aware datetime) is checked against the date
    range with this machine's clock, like ``run_at``."""
    check_not_reserved(job_id)
    return await _update(client, job_id, "pause", pause_request(until, note, actor))


def pause_request(
    until: datetime | str | None, note: str | None = None, actor: str | None = None
) -> PauseRequest:
    """A validated pause: ``until`` in the date range by this machine's clock."""
    data = {"until": until, "note": check_note(note), "actor": actor}
    try:
        return PauseRequest.model_validate(data, context={"now": datetime.now(UTC)})
    except ValidationError as err:
        raise SpecError.from_validation(err) from err


async def resume(
    client: Client, job_id: str, note: str | None = None, actor: str | None = None
) -> Report:
    return await _update(client, job_id, "resume", control_request(note, actor))


async def trigger(
    client: Client, job_id: str, note: str | None = None, actor: str | None = None
) -> Report:
    return await _update(client, job_id, "trigger", control_request(note, actor))


async def update_cron(
    client: Client,
    job_id: str,
    change: CronUpdate,
    note: str | None = None,
    actor: str | None = None,
) -> Report:
    """Change a cron's expression, zone or overlap policy (validated by the workflow)."""
    if note is not None or actor is not None:
        change = change.model_copy(update={"note": check_note(note), "actor": actor})
    return await _update(client, job_id, "update", change)


async def cancel(
    client: Client, job_id: str, note: str | None = None, actor: str | None = None
) -> None:
    """Request cancellation; a running attempt is cancelled through its heartbeat (within
    ``JOBS_CANCEL_LATENCY`` of its worker, 10 s by default). Until the job settles its status
    is ``cancelling``.

    The ``cancel_requested`` signal goes first, so the job's audit trail has who and why
    (recorded at the server's time) before the cancellation reaches it; like the
    cancellation itself it needs no worker to be accepted."""
    request = ControlRequest(actor=actor, note=check_note(note))
    handle, desc = await describe(client, job_id)
    require_open(job_id, "cancel", desc)
    if cancel_requested(desc):
        return  # already on its way: the first cancel's who and why stand
    async with temporal_errors(job_id):
        await handle.signal("cancel_requested", request)
        why = f": {request.note}" if request.note else ""
        await handle.cancel(reason=f"cancelled by {request.actor or 'unknown'}{why}")


class _Problems:
    """Collects (field, reason) pairs so one SpecError reports every problem at once."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def check(self, field: str, fn: Callable[[], T]) -> T | None:
        try:
            return fn()
        except ValueError as err:  # CronError included
            self.items.append((field, str(err)))
            return None

    def raise_any(self) -> None:
        if self.items:
            raise SpecError(self.items)


def preview_cron(
    expression: str, timezone: str, after: str | datetime | None, count: int
) -> list[SlotTime]:
    """The next ``count`` slots of an expression after ``after`` (default now), which must
    lie in the spec's date range (ISO-8601 with an offset, 1970 to 10 years ahead)."""
    now = datetime.now(UTC)
    problems = _Problems()
    cron = problems.check("cron", lambda: cronmath.parse(expression))
    tz = problems.check("timezone", lambda: cronmath.zone(timezone))
    start = problems.check("after", lambda: now if after is None else parse_instant(after, now))
    problems.raise_any()
    assert cron is not None and tz is not None and start is not None
    try:
        slots = cronmath.upcoming(cron, tz, start, count)
    except (OverflowError, ValueError) as err:  # a slot beyond what datetime can hold
        reason = f"the next {count} slot(s) after it cannot be computed ({err}); ask for fewer"
        raise SpecError([("after", reason)]) from err
    return [SlotTime(local=local, utc=utc) for local, utc in cronmath.slot_times(slots, tz)]


def cron_update(expression: str | None, timezone: str | None, overlap: str | None) -> CronUpdate:
    """Validate a cron change before it reaches the workflow (whose validator checks again)."""
    problems = _Problems()
    if expression is not None:
        problems.check("cron", lambda: cronmath.parse(expression))
    if timezone is not None:
        problems.check("timezone", lambda: cronmath.zone(timezone))
    if not (expression or timezone or overlap):
        problems.items.append(("update", "give at least one of --cron, --tz, --overlap"))
    problems.raise_any()
    return CronUpdate.model_validate({"cron": expression, "timezone": timezone, "overlap": overlap})
