"""``/jobs``: schedule, list, read and control jobs (one-shots and crons alike)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from jobctl.connection import tracing
from jobctl.starter import operations
from jobctl.starter.api.bodies import (
    JSON_MEDIA_TYPE,
    BatchBody,
    NoteBody,
    PauseBody,
    body_schema,
    control_body,
    read_control,
    read_model,
    read_object,
)
from jobctl.starter.api.deps import NOTE_QUERY, Actor, Released, State, Temporal
from jobctl.starter.api.errors import (
    ErrorKind,
    FieldProblem,
    documented,
    documented_body,
    jobs_error,
)
from jobctl.starter.errors import JobsError
from jobctl.starter.operations import batch_check, batches
from jobctl.workflows.jobstatus import JobView
from jobctl.workflows.models import CronReport, JobReport, JobSpec, JobStatus

router = APIRouter()
CONTROL = documented_body(404, 409)


@router.post(
    "/jobs",
    response_model=operations.Scheduled,
    status_code=201,
    responses={
        200: {"model": operations.Scheduled, "description": "identical request: the existing job"},
        **documented_body(409),
    },
    openapi_extra=body_schema(JobSpec),
)
async def create_job(request: Request, state: State) -> Any:
    """Schedule a one-shot (run_at or delay) or a cron job."""
    data = await read_object(request)
    now = datetime.now(UTC)
    checked = operations.submission(data, now)  # parsed once; 422 even with Temporal down
    backend = state.backend
    with tracing.schedule_span(data, carrier=request.headers) as span:  # the trace's root
        client = await backend.client()
        scheduled = await operations.schedule(
            client,
            checked,
            await backend.handlers(state.task_queue),
            now=now,
            task_queue=state.task_queue,
        )
        span.scheduled(scheduled)
    if not scheduled.created:
        return JSONResponse(scheduled.model_dump(mode="json"), status_code=200)
    return scheduled


class BatchScheduled(BaseModel):
    ok: Literal[True] = True
    job_id: str
    next_run_at: datetime | None
    created: bool
    warnings: list[str] = []  # as POST /jobs answers them


class BatchRefused(BaseModel):
    """A spec's refusal: ``status``, ``error`` and ``detail`` as a single ``POST /jobs`` of
    it would have answered."""

    ok: Literal[False] = False
    status: int
    error: ErrorKind
    detail: str | list[FieldProblem]


class BatchResults(BaseModel):
    results: list[BatchScheduled | BatchRefused]


BATCH_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["jobs"],
    "properties": {
        "jobs": {
            "type": "array",
            "maxItems": operations.MAX_BATCH,
            "items": JobSpec.model_json_schema(),
        },
        "batch": {"type": "object", "description": "a named batch (docs/batches.md)"},
    },
}


@router.post(
    "/jobs/batch",
    response_model=BatchResults,
    responses={
        201: {"model": batches.BatchScheduled, "description": "a named batch was started"},
        **documented_body(409),
    },
    openapi_extra={
        "requestBody": {"required": True, "content": {JSON_MEDIA_TYPE: {"schema": BATCH_SCHEMA}}}
    },
)
async def create_jobs(request: Request, state: State) -> BatchResults | JSONResponse:
    """Schedule up to 1,000 jobs (``{"jobs": [spec, ...]}``); not all-or-nothing.

    Each spec is checked as ``POST /jobs`` checks it; the valid ones start, and the answer is
    200 with one result per spec, in order: ``{"ok": true, "job_id", "next_run_at",
    "created", "warnings"}`` or ``{"ok": false, "status", "error", "detail"}`` (what
    ``POST /jobs`` would have answered for that spec). Only a request that is wrong as a
    whole (not JSON, no ``jobs`` list, over 1,000 specs) is refused as a whole, and then
    nothing starts. An empty list is 200 with no results.

    With ``"batch": {"id", "on_complete"?, "on_success"?}`` the jobs form a batch
    (docs/batches.md): all or nothing, 201 ``{"batch_id", "created", "total", "job_ids",
    "callbacks", "next_run_at"}`` (200 with ``created: false`` for the identical request
    again), 422 with every problem, 409 when the batch id or a callback id is taken.
    """
    body = await read_model(request, BatchBody)
    now = datetime.now(UTC)
    if body.batch is not None:
        return await _create_batch(state, body, now)
    checked = operations.check_batch(body.jobs, now)  # per-spec 422s even with Temporal down
    if any(isinstance(item, operations.Submission) for item in checked):
        backend = state.backend
        client = await backend.client()
        handlers = await backend.handlers(state.task_queue)
        results = await operations.start_checked(client, checked, handlers, now, state.task_queue)
    else:
        results = [operations.ItemResult(error=i) for i in checked if isinstance(i, JobsError)]
    return BatchResults(results=[await _batch_item(request, result) for result in results])


async def _create_batch(state: Any, body: BatchBody, now: datetime) -> JSONResponse:
    """A named batch: all or nothing (422 with every problem, 409 for a taken id)."""
    checked = batch_check.check_batch_request(body.batch, body.jobs, now)
    backend = state.backend
    handlers = await backend.handlers(state.task_queue)
    scheduled = await batches.start_batch(
        await backend.client(), checked, handlers, state.task_queue
    )
    return JSONResponse(
        scheduled.model_dump(mode="json"), status_code=201 if scheduled.created else 200
    )


async def _batch_item(
    request: Request, result: operations.ItemResult
) -> BatchScheduled | BatchRefused:
    if result.error is None:
        assert result.scheduled is not None
        return BatchScheduled.model_validate(result.scheduled.model_dump())
    single = await jobs_error(request, result.error)  # the single route's answer, exactly
    return BatchRefused(status=single.status_code, **json.loads(bytes(single.body)))


@router.get("/jobs", response_model=operations.JobPage, responses=documented(422))
async def list_jobs(
    backend: Temporal,
    status: JobStatus | None = None,
    limit: int = Query(50, ge=1, le=1000),
    page_token: str | None = None,
) -> operations.JobPage:
    """Jobs and crons in a status (the one `GET /jobs/{id}` shows), newest first by
    the job's time; paged."""
    return await operations.list_jobs(
        await backend.client(), status.value if status else None, limit, page_token
    )


@router.get("/jobs/{job_id}", response_model=JobView | CronReport, responses=documented(404))
async def get_job(job_id: str, backend: Temporal) -> JobView | JobReport | CronReport:
    """Status and attempt history (crons: next slots and recent slots)."""
    return await operations.status(await backend.client(), job_id)


@router.delete(
    "/jobs/{job_id}",
    response_model=Released,
    status_code=202,
    responses=CONTROL,
    openapi_extra=control_body(NoteBody),
)
async def cancel_job(
    job_id: str, request: Request, backend: Temporal, actor: Actor, note: str | None = NOTE_QUERY
) -> Released:
    """Cancel a job (a running attempt is cancelled through its heartbeat) or a cron."""
    body = await read_control(request, NoteBody, note)
    await operations.cancel(await backend.client(), job_id, body.note, actor)
    return Released(job_id=job_id, action="cancel")


@router.post(
    "/jobs/{job_id}/trigger",
    response_model=JobReport | CronReport,
    responses=CONTROL,
    openapi_extra=control_body(NoteBody),
)
async def trigger_job(
    job_id: str, request: Request, backend: Temporal, actor: Actor, note: str | None = NOTE_QUERY
) -> JobReport | CronReport:
    """Run a waiting job now; a cron runs one extra slot now."""
    body = await read_control(request, NoteBody, note)
    return await operations.trigger(await backend.client(), job_id, body.note, actor)


@router.post(
    "/jobs/{job_id}/pause",
    response_model=JobReport | CronReport,
    responses=CONTROL,
    openapi_extra=control_body(PauseBody),
)
async def pause_job(
    job_id: str, request: Request, backend: Temporal, actor: Actor, note: str | None = NOTE_QUERY
) -> JobReport | CronReport:
    """Hold a waiting job or a cron, optionally until a time."""
    body = await read_control(request, PauseBody, note)
    return await operations.pause(await backend.client(), job_id, body.until, body.note, actor)


@router.post(
    "/jobs/{job_id}/resume",
    response_model=JobReport | CronReport,
    responses=CONTROL,
    openapi_extra=control_body(NoteBody),
)
async def resume_job(
    job_id: str, request: Request, backend: Temporal, actor: Actor, note: str | None = NOTE_QUERY
) -> JobReport | CronReport:
    body = await read_control(request, NoteBody, note)
    return await operations.resume(await backend.client(), job_id, body.note, actor)
