"""The handler names a job may use: the built-ins and what workers published, never this
process's own code.

Each worker publishes its names to the ``handler-registry`` workflow when it starts
(``worker.publish_handlers``); the client side reads them with the registry's query, so neither
the CLI nor the API imports a handler module. The built-in handlers (``names.BUILTIN_HANDLERS``)
are served by every worker, so they are accepted before any worker has published (a job may be
scheduled before the first worker starts). ``JOBS_ALLOWED_HANDLERS`` replaces both with an
explicit allow-list (no worker needed to answer).
"""

from __future__ import annotations

import contextlib
import os

from temporalio.client import Client, WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.service import RPCError

from starter.operations.rpc import QUERY_TIMEOUT
from workflows import names

ALLOWED_HANDLERS_ENV = "JOBS_ALLOWED_HANDLERS"


def allowed_handlers() -> set[str] | None:
    """``JOBS_ALLOWED_HANDLERS`` (comma-separated) when set, else None."""
    allowed = os.environ.get(ALLOWED_HANDLERS_ENV)
    if not allowed:
        return None
    return {name.strip() for name in allowed.split(",") if name.strip()}


async def published_handlers(client: Client) -> set[str]:
    """What workers published to the handler registry; empty when no worker has yet, or
    none answers the query."""
    published: list[str] = []
    with contextlib.suppress(RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError):
        published = await client.get_workflow_handle(names.REGISTRY_WORKFLOW_ID).query(
            names.QUERY_HANDLERS, result_type=list[str], rpc_timeout=QUERY_TIMEOUT
        )
    return set(published)


async def known_handlers(client: Client) -> set[str]:
    """Handler names a job may use: ``JOBS_ALLOWED_HANDLERS`` when set, else the built-ins and
    what workers published to the handler registry."""
    allowed = allowed_handlers()
    if allowed is not None:
        return allowed
    return set(names.BUILTIN_HANDLERS) | await published_handlers(client)
