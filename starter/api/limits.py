"""``GET /limits``: every rate key and concurrency key in use (a running limiter), with its
limit, recent starts, waiting jobs and the earliest next start."""

from __future__ import annotations

from fastapi import APIRouter

from jobctl.starter import operations
from jobctl.starter.api.deps import State
from jobctl.starter.api.errors import documented

router = APIRouter()


@router.get("/limits", response_model=operations.Limits, responses=documented())
async def list_limits(state: State) -> operations.Limits:
    """Each running limiter: ``kind`` (``rate`` or ``concurrency``), ``key``, ``limit``
    (``"20/s"``, ``"20/s burst 5"``, or a concurrency limit), ``recent_starts`` (rate: starts
    in the last ``recent_seconds``), ``running`` (concurrency: permits held), ``waiting``,
    ``next_start`` (rate: the earliest start a job asking now would get), ``granted``,
    ``rejected``, and ``error`` when the limiter did not answer."""
    client = await state.backend.client()
    return await operations.list_limits(client)
