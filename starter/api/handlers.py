"""``GET /handlers``: the handlers a job may use, their payload schemas and the workers that
serve them (what workers published to the handler registry, and who polls each handler's
queue now; no handler module imported)."""

from __future__ import annotations

from fastapi import APIRouter

from jobctl.starter import operations
from jobctl.starter.api.deps import State
from jobctl.starter.api.errors import documented

router = APIRouter()


@router.get("/handlers", response_model=operations.Handlers, responses=documented())
async def list_handlers(state: State) -> operations.Handlers:
    """Every handler a job may use: its name, its payload's JSON schema (null when the
    handler takes any JSON object), the workers that published it and those serving it on
    this API's task queue now (``live``)."""
    client = await state.backend.client()
    return await operations.handler_listing(client, state.task_queue)
