"""Cron-only routes: change a cron's schedule, preview an expression's next slots."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request

from starter import operations
from starter.api.bodies import CronChange, body_schema, read_model
from starter.api.deps import Actor, Temporal
from starter.api.errors import documented, documented_body
from workflows.models import CronReport, JobReport, SlotTime

router = APIRouter()


@router.patch(
    "/jobs/{job_id}",
    response_model=JobReport | CronReport,
    responses=documented_body(404, 409),
    openapi_extra=body_schema(CronChange),
)
async def update_cron(
    job_id: str, request: Request, backend: Temporal, actor: Actor
) -> JobReport | CronReport:
    """Change a cron's expression, zone or overlap policy (``note``: why)."""
    change = await read_model(request, CronChange)
    checked = operations.cron_update(change.cron, change.timezone, change.overlap)
    return await operations.update_cron(await backend.client(), job_id, checked, change.note, actor)


@router.get("/cron/preview", response_model=list[SlotTime], responses=documented(422))
async def preview(
    expr: str = Query(..., max_length=200),
    tz: str = Query("UTC", max_length=100),
    after: str | None = Query(
        None, max_length=64, description="ISO-8601 with an offset (default: now)."
    ),
    n: int = Query(5, ge=1, le=1000),
) -> list[SlotTime]:
    """The next slots of a cron expression, local and UTC. Schedules nothing."""
    # A string, judged by the spec's one date rule (FastAPI's datetime would take
    # "1900000000" as Unix time).
    return operations.preview_cron(expr, tz, after, n)
