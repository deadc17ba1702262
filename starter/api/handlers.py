"""``GET /handlers``: the handlers a job may use, their payload schemas and the workers that
serve them (what workers published to the handler registry; no handler module imported)."""

from __future__ import annotations

from fastapi import APIRouter

from starter import operations
from starter.api.deps import Temporal
from starter.api.errors import documented

router = APIRouter()


@router.get("/handlers", response_model=operations.Handlers, responses=documented())
async def list_handlers(backend: Temporal) -> operations.Handlers:
    """Every handler a job may use: its name, its payload's JSON schema (null when the
    handler takes any JSON object) and the workers that published it."""
    return await operations.handler_listing(await backend.client())
