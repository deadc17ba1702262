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
worker that serves it decides. "Serving workers" are those that published within the
registry's ``STALE_AFTER`` (7 days), not a liveness check.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, Field
from temporalio.client import Client, WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.service import RPCError

from starter.operations.rpc import QUERY_TIMEOUT
from workflows import names
from workflows.models import WorkerHandlers

ALLOWED_HANDLERS_ENV = "JOBS_ALLOWED_HANDLERS"


class HandlerInfo(BaseModel):
    """One handler as ``GET /handlers`` and ``jobs handlers`` show it."""

    name: str
    payload_schema: dict[str, Any] | None = Field(
        description="The payload model's JSON schema; null for a handler without one."
    )
    workers: list[str] = Field(
        description="Workers that published it (within the registry's 7 days)."
    )
    builtin: bool = Field(description="Served by every worker.")


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
    ):
        super().__init__(handlers)
        self.schemas: dict[str, dict[str, Any]] = dict(schemas or {})
        self.workers: dict[str, list[str]] = dict(workers or {})

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


def catalog_of(entries: Iterable[WorkerHandlers]) -> HandlerCatalog:
    """What workers published, combined: every name, who serves it, and the schema of the
    most recently published worker that serves it."""
    schemas: dict[str, dict[str, Any]] = {}
    workers: dict[str, list[str]] = {}
    decided: set[str] = set()
    for entry in sorted(entries, key=lambda e: e.published_at, reverse=True):
        for name in entry.handlers:
            workers.setdefault(name, []).append(entry.worker)
            if name in decided:
                continue
            decided.add(name)
            schema = _schema(entry.schemas[name]) if name in entry.schemas else None
            if schema is not None:
                schemas[name] = schema
    return HandlerCatalog(workers, schemas, {k: sorted(v) for k, v in workers.items()})


async def published_catalog(client: Client) -> HandlerCatalog:
    """What workers published to the handler registry; empty when no worker has yet, or
    none answers the query (a registry run by an older worker answers names only)."""
    handle = client.get_workflow_handle(names.REGISTRY_WORKFLOW_ID)
    with contextlib.suppress(RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError):
        try:
            entries = await handle.query(
                names.QUERY_CATALOG, result_type=list[WorkerHandlers], rpc_timeout=QUERY_TIMEOUT
            )
        except WorkflowQueryFailedError:  # no catalog query yet: names only
            return HandlerCatalog(await published_handlers(client))
        return catalog_of(entries)
    return HandlerCatalog()


async def published_handlers(client: Client) -> set[str]:
    """The names workers published to the handler registry; empty when no worker has yet,
    or none answers the query."""
    published: list[str] = []
    with contextlib.suppress(RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError):
        published = await client.get_workflow_handle(names.REGISTRY_WORKFLOW_ID).query(
            names.QUERY_HANDLERS, result_type=list[str], rpc_timeout=QUERY_TIMEOUT
        )
    return set(published)


async def handler_listing(client: Client) -> Handlers:
    """What ``GET /handlers`` and ``jobs handlers`` show: the handlers a job may use (the
    allow-list's, when ``JOBS_ALLOWED_HANDLERS`` is set), with what workers published."""
    catalog = await published_catalog(client)
    catalog.update(names.BUILTIN_HANDLERS)
    allowed = allowed_handlers()
    if allowed is not None:
        catalog.intersection_update(allowed)
        catalog.update(allowed)
    return Handlers(handlers=catalog.entries())


async def known_handlers(client: Client) -> HandlerCatalog:
    """Handler names a job may use: ``JOBS_ALLOWED_HANDLERS`` when set, else the built-ins and
    what workers published to the handler registry, with the typed ones' payload schemas."""
    allowed = allowed_handlers()
    if allowed is not None:
        return HandlerCatalog(allowed)
    catalog = await published_catalog(client)
    catalog.update(names.BUILTIN_HANDLERS)
    return catalog
