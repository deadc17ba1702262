"""``/dlq``: the dead-letter queue: list parked jobs, requeue or discard one."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request

from jobctl.starter import dlq as dead_letters
from jobctl.starter.api.bodies import NoteBody, control_body, read_control
from jobctl.starter.api.deps import NOTE_QUERY, Actor, Released, Temporal
from jobctl.starter.api.errors import documented, documented_body

router = APIRouter()
RELEASE = documented_body(404, 409)


@router.get("/dlq", response_model=dead_letters.DeadPage, responses=documented(422))
async def list_dead(
    backend: Temporal,
    handler: str | None = None,
    limit: int = Query(50, ge=1, le=1000),
    page_token: str | None = None,
) -> dead_letters.DeadPage:
    """Parked jobs, newest first (the JobStatus="dead" visibility query)."""
    return await dead_letters.list_dead(await backend.client(), limit, page_token, handler)


@router.post(
    "/dlq/{job_id}/requeue",
    response_model=Released,
    responses=RELEASE,
    openapi_extra=control_body(NoteBody),
)
async def requeue(
    job_id: str, request: Request, backend: Temporal, actor: Actor, note: str | None = NOTE_QUERY
) -> Released:
    """Run a dead job again with a fresh attempt budget."""
    body = await read_control(request, NoteBody, note)
    await dead_letters.release(await backend.client(), job_id, "requeue", body.note, actor)
    return Released(job_id=job_id, action="requeue")


@router.post(
    "/dlq/{job_id}/discard",
    response_model=Released,
    responses=RELEASE,
    openapi_extra=control_body(NoteBody),
)
async def discard(
    job_id: str, request: Request, backend: Temporal, actor: Actor, note: str | None = NOTE_QUERY
) -> Released:
    """End a dead job for good."""
    body = await read_control(request, NoteBody, note)
    await dead_letters.release(await backend.client(), job_id, "discard", body.note, actor)
    return Released(job_id=job_id, action="discard")
