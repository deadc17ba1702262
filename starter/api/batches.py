"""``/batches``: a batch's status and its cancel (a batch is created by ``POST /jobs/batch``
with a ``batch`` object; docs/batches.md)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from jobctl.starter.api.bodies import NoteBody, control_body, read_control
from jobctl.starter.api.deps import NOTE_QUERY, Actor, Temporal
from jobctl.starter.api.errors import documented, documented_body
from jobctl.starter.operations import batches
from jobctl.workflows.models.batch import BatchReport

router = APIRouter()


@router.get("/batches/{batch_id}", response_model=BatchReport, responses=documented(404, 422))
async def get_batch(batch_id: str, backend: Temporal) -> BatchReport:
    """Counts by outcome, settled/total, the ids not done, the callbacks' state."""
    return await batches.batch_status(await backend.client(), batch_id)


@router.post(
    "/batches/{batch_id}/cancel",
    response_model=BatchReport,
    responses=documented_body(404, 409),
    openapi_extra=control_body(NoteBody),
)
async def cancel_batch(
    batch_id: str, request: Request, backend: Temporal, actor: Actor, note: str | None = NOTE_QUERY
) -> BatchReport:
    """Cancel every unsettled member; the callbacks then run with them counted cancelled."""
    body = await read_control(request, NoteBody, note)
    return await batches.cancel_batch(await backend.client(), batch_id, body.note, actor)
