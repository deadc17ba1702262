"""What the API's routes share, handed to them as FastAPI dependencies: the Temporal client
(connected lazily), the cached handler names, the payload codec, the task queue for new jobs,
and who is calling (the bearer token's name, set by :class:`starter.api.guards.Guard`)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Annotated, Literal, cast

from fastapi import Depends, Query, Request
from pydantic import BaseModel
from temporalio.client import Client

from jobctl.connection.client import connect
from jobctl.connection.codec import EncryptionCodec
from jobctl.starter import operations
from jobctl.starter.api.guards import ACTOR_KEY, ANONYMOUS
from jobctl.workflows.models import MAX_NOTE

HANDLER_CACHE_SECONDS = 30.0


class Released(BaseModel):
    job_id: str
    action: Literal["requeue", "discard", "cancel"]


class Backend:
    """The API's Temporal client (connected lazily, so the API starts even when Temporal is
    down and answers 503 until it is back) and its cache of known handler names (from the
    handler registry workflow the workers publish to: the API imports no handler module)."""

    def __init__(self, client: Client | None = None):
        self._client = client
        self._lock = asyncio.Lock()
        self._handlers: tuple[float, set[str]] | None = None

    async def client(self) -> Client:
        if self._client is None:
            async with self._lock:
                if self._client is None:
                    self._client = await connect()
        return self._client

    async def handlers(self, task_queue: str | None = None) -> set[str]:
        """What workers of ``task_queue`` (None: ``JOBS_TASK_QUEUE``) published, advisory
        (``operations.known_handlers``); kept HANDLER_CACHE_SECONDS. An app serves one queue."""
        now = time.monotonic()
        if self._handlers is None or now - self._handlers[0] > HANDLER_CACHE_SECONDS:
            known = await operations.known_handlers(await self.client(), task_queue)
            self._handlers = (now, known)
        return self._handlers[1]


@dataclass(frozen=True)
class ApiState:
    """One app's shared parts (``app.state.jobs``)."""

    backend: Backend
    codec: EncryptionCodec | None
    task_queue: str | None


def api_state(request: Request) -> ApiState:
    return cast(ApiState, request.app.state.jobs)


def backend_of(request: Request) -> Backend:
    """The backend, not a connected client: a route connects only once its input is valid
    (a bad spec answers 422 even with Temporal down)."""
    return api_state(request).backend


def actor_of(request: Request) -> str:
    """Who is calling, for the audit trail: the token's name (set by ``guards.Guard``)."""
    return str(request.scope.get(ACTOR_KEY) or ANONYMOUS)


State = Annotated[ApiState, Depends(api_state)]
Temporal = Annotated[Backend, Depends(backend_of)]
Actor = Annotated[str, Depends(actor_of)]

NOTE_QUERY = Query(
    None, max_length=MAX_NOTE, description="Why (the audit trail); or `note` in the body."
)
