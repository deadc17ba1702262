"""``GET /healthz``: whether Temporal is reachable (public: no token needed)."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from jobctl.connection.client import check_serving
from jobctl.starter.api.deps import Temporal

router = APIRouter()


class Health(BaseModel):
    temporal: Literal["ok", "unreachable"]
    detail: str = ""


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
async def healthz(backend: Temporal) -> Any:
    """Whether Temporal is reachable and serving (no token needed)."""
    try:
        client = await backend.client()
        await asyncio.wait_for(check_serving(client), 5)
    except Exception as err:  # any failure here, "not serving" included, means "not reachable"
        return JSONResponse(
            Health(temporal="unreachable", detail=str(err)[:200]).model_dump(), status_code=503
        )
    return Health(temporal="ok")
