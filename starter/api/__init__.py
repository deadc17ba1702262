"""The HTTP API: the same operations as the CLI, on the same job model and client factory.

Where things are: :mod:`~starter.api.app` assembles the app; one router per resource
(:mod:`~starter.api.jobs`, :mod:`~starter.api.crons`, :mod:`~starter.api.dlq`,
:mod:`~starter.api.codec`, :mod:`~starter.api.health`; the board's in :mod:`starter.board`);
what routes share comes as dependencies (:mod:`~starter.api.deps`: client, caller, codec).
Every refusal is ``{"error", "detail"}`` without a stack trace (kinds and codes in
:mod:`~starter.api.errors`); request gates (Host allow-list, cross-site refusal, bearer
token, size) run before any route, in :mod:`~starter.api.guards`; bodies (strict JSON,
``application/json`` only) are read by :mod:`~starter.api.bodies`. The OpenAPI document is
:mod:`~starter.api.openapi`'s; serving with uvicorn, :mod:`~starter.api.server`'s.

Creating is idempotent by job id: repeating a ``POST /jobs`` with the same id and the same
body answers 200 with the existing job instead of 201; the same id with a different body is 409.
Handler names are checked against what workers published to the handler registry workflow:
the API imports no handler module.
"""

from jobctl.starter.api.app import create_app
from jobctl.starter.api.server import EmbeddedServer, check_binding, is_loopback, server

__all__ = ["EmbeddedServer", "check_binding", "create_app", "is_loopback", "server"]
