"""The handler names a job may use, and their payload schemas: the built-ins and what workers
published, never this process's own code.

Each worker publishes its names, and its typed handlers' payload schemas, to the
``handler-registry`` workflow when it starts (``worker.publish_handlers``); the client side
reads them with the registry's ``catalog`` query, so neither the CLI nor the API imports a
handler module. The built-in handlers (``names.BUILTIN_HANDLERS``) are served by every
worker, so they are accepted before any worker has published (a job may be scheduled before
the first worker starts). ``JOBS_ALLOWED_HANDLERS`` replaces both with an explicit allow-list
(no worker needed to answer; no payload schemas then: the worker still checks a typed
handler's payload before it runs).

When workers disagree about a handler's schema (a rolling deploy), the most recently started
worker that serves it decides. What workers published is per task queue, and kept for the
registry's ``STALE_AFTER`` (7 days): it names handlers and their schemas, not who is alive.
Which workers serve a handler now is Temporal's answer (:mod:`.handler_watch`). So the
published names advise, they do not refuse: a job whose handler no worker serves yet is
accepted and waits (``known_handlers`` answers an advisory catalog); only
``JOBS_ALLOWED_HANDLERS`` refuses names outside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from temporalio.client import Client, WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.service import RPCError

from jobctl.connection.client import task_queue as default_task_queue
from jobctl.starter.operations.handler_watch import live_workers
from jobctl.starter.operations.rpc import QUERY_TIMEOUT
from jobctl.workflows import names
from jobctl.workflows.models import WorkerHandlers

ALLOWED_HANDLERS_ENV = "JOBS_ALLOWED_HANDLERS"


class LiveWorkerInfo(BaseModel):
    """A worker serving a handler now: since it published, last heard polling."""

    worker: str
    since: datetime | None = Field(description="When it published its handlers.")
    last_seen: datetime = Field(description="When the server last heard its poll.")


class HandlerInfo(BaseModel):
    """One handler as ``GET /handlers`` and ``jobctl handlers`` show it."""

    name: str
    payload_schema: dict[str, Any] | None = Field(
        description="The payload model's JSON schema; null for a handler without one."
    )
    workers: list[str] = Field(
        description="Workers that published it (within the registry's 7 days)."
    )
    builtin: bool = Field(description="Served by every worker.")
    live: list[LiveWorkerInfo] = Field(
        default_factory=list,
        description="Workers polling its queue on this task queue now (seen within 75 s).",
    )


class Handlers(BaseModel):
    """``GET /handlers``: every handler a job may use."""

    handlers: list[HandlerInfo]


class HandlerCatalog(set[str]):
    """The handler names a job may use (a set of names, as callers always had) and, for the
    typed ones, their published payload schemas and who serves each."""

    def __init__(
        self,
        handlers: Iterable[str] = (),
        schemas: Mapping[str, dict[str, Any]] | None = None,
        workers: Mapping[str, list[str]] | None = None,
        advisory: bool = False,
    ):
        super().__init__(handlers)
        self.schemas: dict[str, dict[str, Any]] = dict(schemas or {})
        self.workers: dict[str, list[str]] = dict(workers or {})
        # True: what workers published (a name outside it is warned about, not refused);
        # False: a list that refuses (JOBS_ALLOWED_HANDLERS, or names a caller passed).
        self.advisory = advisory

    def schema(self, handler: str) -> dict[str, Any] | None:
        """The published payload schema of ``handler``; None when untyped or unknown."""
        return self.schemas.get(handler)

    def entries(self) -> list[HandlerInfo]:
        return [
            HandlerInfo(
                name=name,
                payload_schema=self.schemas.get(name),
                workers=self.workers.get(name, []),
                builtin=name in names.BUILTIN_HANDLERS,
            )
            for name in sorted(self)
        ]


def as_catalog(handlers: Iterable[str]) -> HandlerCatalog:
    """``handlers`` as a catalog: itself if it is one (schemas kept), else names only."""
    return handlers if isinstance(handlers, HandlerCatalog) else HandlerCatalog(handlers)


def allowed_handlers() -> set[str] | None:
    """``JOBS_ALLOWED_HANDLERS`` (comma-separated) when set, else None."""
    allowed = os.environ.get(ALLOWED_HANDLERS_ENV)
    if not allowed:
        return None
    return {name.strip() for name in allowed.split(",") if name.strip()}


def _schema(text: str) -> dict[str, Any] | None:
    """A published schema (JSON text); None when it is not a JSON object (nothing to check
    against: the worker still validates before the handler runs)."""
    with contextlib.suppress(ValueError, RecursionError):
        schema = json.loads(text)
        if isinstance(schema, dict):
            return schema
    return None


def of_queue(entries: Iterable[WorkerHandlers], task_queue: str | None) -> list[WorkerHandlers]:
    """The entries of workers serving ``task_queue`` (None: any; an entry without a queue,
    from a worker before queues were recorded, serves every one)."""
    return [e for e in entries if task_queue is None or e.task_queue in (None, task_queue)]


def catalog_of(entries: Iterable[WorkerHandlers], task_queue: str | None = None) -> HandlerCatalog:
    """What workers of ``task_queue`` (None: any) published, combined: every name, who
    serves it, and the schema of the most recently published worker that serves it."""
    schemas: dict[str, dict[str, Any]] = {}
    workers: dict[str, list[str]] = {}
    decided: set[str] = set()
    for entry in sorted(of_queue(entries, task_queue), key=lambda e: e.published_at, reverse=True):
        for name in entry.handlers:
            workers.setdefault(name, []).append(entry.worker)
            if name in decided:
                continue
            decided.add(name)
            schema = _schema(entry.schemas[name]) if name in entry.schemas else None
            if schema is not None:
                schemas[name] = schema
    sorted_workers = {k: sorted(v) for k, v in workers.items()}
    return HandlerCatalog(workers, schemas, sorted_workers, advisory=True)


async def published_entries(client: Client) -> list[WorkerHandlers] | None:
    """Every worker's published entry; None when none answers the registry's query."""
    handle = client.get_workflow_handle(names.REGISTRY_WORKFLOW_ID)
    with contextlib.suppress(RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError):
        entries: list[WorkerHandlers] = await handle.query(
            names.QUERY_CATALOG, result_type=list[WorkerHandlers], rpc_timeout=QUERY_TIMEOUT
        )
        return entries
    return None


async def published_catalog(client: Client, task_queue: str | None = None) -> HandlerCatalog:
    """What workers of ``task_queue`` (None: any) published to the handler registry; empty
    when no worker has yet, or none answers the query."""
    entries = await published_entries(client)
    return catalog_of(entries or [], task_queue)


async def handler_listing(client: Client, task_queue: str | None = None) -> Handlers:
    """What ``GET /handlers`` and ``jobctl handlers`` show for ``task_queue`` (None:
    ``JOBS_TASK_QUEUE``): the handlers a job may use (the allow-list's, when
    ``JOBS_ALLOWED_HANDLERS`` is set), with what workers published and who serves each now."""
    queue = task_queue or default_task_queue()
    entries = of_queue(await published_entries(client) or [], queue)
    catalog = catalog_of(entries)
    catalog.update(names.BUILTIN_HANDLERS)
    allowed = allowed_handlers()
    if allowed is not None:
        catalog.intersection_update(allowed)
        catalog.update(allowed)
    infos = catalog.entries()
    since = {e.worker: e.published_at for e in entries}
    found = await asyncio.gather(*(live_workers(client, queue, i.name) for i in infos))
    for info, live in zip(infos, found, strict=True):
        info.live = [
            LiveWorkerInfo(worker=w.identity, since=since.get(w.identity), last_seen=w.last_seen)
            for w in live or []
        ]
    return Handlers(handlers=infos)


async def known_handlers(client: Client, task_queue: str | None = None) -> HandlerCatalog:
    """Handler names a job on ``task_queue`` (None: ``JOBS_TASK_QUEUE``) may use:
    ``JOBS_ALLOWED_HANDLERS`` when set (refusing others), else, advisory, the built-ins and
    what that queue's workers published, with the typed ones' payload schemas."""
    allowed = allowed_handlers()
    if allowed is not None:
        return HandlerCatalog(allowed)
    catalog = await published_catalog(client, task_queue or default_task_queue())
    catalog.update(names.BUILTIN_HANDLERS)
    return catalog
