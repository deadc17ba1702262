"""Cron-only routes: change a cron's schedule, backfill a past range, preview an
expression's next slots."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from jobctl.starter import operations
from jobctl.starter.api.bodies import CronChange, body_schema, read_model
from jobctl.starter.api.deps import Actor, Temporal
from jobctl.starter.api.errors import documented, documented_body
from jobctl.workflows.models import MAX_NOTE, CronReport, JobReport, SlotTime
from jobctl.workflows.models.cron import BackfillAnswer, BackfillOverlap

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


class BackfillBody(BaseModel):
    """``POST /cron/{id}/backfill``: the range (ISO-8601 with an offset, both ends
    included, ``to`` not in the future) and how its slots start."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_: str = Field(alias="from", max_length=64)
    to: str = Field(max_length=64)
    overlap: BackfillOverlap | None = None
    note: str | None = Field(default=None, max_length=MAX_NOTE)


@router.post(
    "/cron/{job_id}/backfill",
    response_model=BackfillAnswer,
    responses=documented_body(404, 409),
    openapi_extra=body_schema(BackfillBody),
)
async def backfill(
    job_id: str, request: Request, backend: Temporal, actor: Actor
) -> BackfillAnswer:
    """Run every slot of the cron in [from, to] that has no job yet, each with its slot's
    id (a slot that already ran is not run again). ``overlap``: ``allow_all`` starts them
    all at once, ``buffer_all`` one after another; default from the cron's own policy."""
    body = await read_model(request, BackfillBody)
    client = await backend.client()
    return await operations.backfill(
        client, job_id, body.from_, body.to, body.overlap, body.note, actor
    )


@router.get("/cron/preview", response_model=list[SlotTime], responses=documented(422))
async def preview(
    expr: str = Query(..., max_length=200),
    tz: str = Query("UTC", max_length=100),
    after: str | None = Query(
        None, max_length=64, description="ISO-8601 with an offset (default: now)."
    ),
    n: int = Query(5, ge=1, le=1000),
    dst_gap: str = Query("shift", max_length=16, description="shift | skip"),
    dst_repeat: str | None = Query(None, max_length=16, description="first | last | both"),
) -> list[SlotTime]:
    """The next slots of a cron expression, local and UTC, under a DST policy (the spec's
    ``dst_gap``/``dst_repeat``). Schedules nothing."""
    # Strings, judged by the spec's own rules (FastAPI's datetime would take "1900000000"
    # as Unix time).
    return operations.preview_cron(expr, tz, after, n, gap=dst_gap, repeat=dst_repeat)
