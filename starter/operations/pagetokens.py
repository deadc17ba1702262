"""Visibility page tokens as text (a CLI flag, an API query parameter), checked on the way in.

URL-safe base64 plus a short checksum, so a mangled token is refused here; a made-up one that
passes the checksum is refused after one look at the server (:func:`readable_token`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib

from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from starter.errors import SpecError

NOT_A_TOKEN = ("page_token", "is not a token from a previous page")


def encode_token(token: bytes | None) -> str | None:
    """The server's token as text; None when there is no next page."""
    if not token:
        return None
    return f"{base64.urlsafe_b64encode(token).decode()}.{_token_check(token)}"


def decode_token(token: str | None) -> bytes | None:
    if not token:
        return None
    encoded, _, check = token.rpartition(".")
    try:
        raw = base64.b64decode(encoded.encode(), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not raw or check != _token_check(raw):
        raise SpecError([NOT_A_TOKEN])
    return raw


async def readable_token(client: Client, query: str, token: str | None) -> bytes | None:
    """:func:`decode_token`, then one look at the server: the checksum is no secret, so a
    made-up token can pass it, and the server answers that with UNKNOWN, which the SDK would
    retry for ten seconds. One call without retries tells the caller's mistake (422 naming
    ``page_token``) from an outage (raised as is, for :func:`~.rpc.temporal_errors`)."""
    raw = decode_token(token)
    if raw is None:
        return None
    probe = ListWorkflowExecutionsRequest(
        namespace=client.namespace, page_size=1, next_page_token=raw, query=query
    )
    try:
        await client.workflow_service.list_workflow_executions(probe, retry=False)
    except RPCError as err:
        if err.status in (RPCStatusCode.UNKNOWN, RPCStatusCode.INVALID_ARGUMENT):
            raise SpecError([NOT_A_TOKEN]) from err
        raise
    return raw


def _token_check(token: bytes) -> str:
    return hashlib.sha256(token).hexdigest()[:12]
