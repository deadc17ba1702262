"""Visibility page tokens as text (a CLI flag, an API query parameter), checked on the way in.

URL-safe base64 plus a short checksum, so a mangled token is refused here; a made-up one that
passes the checksum is refused after one look at the server (:func:`readable_token`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib

from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from jobctl.starter.errors import SpecError

NOT_A_TOKEN = ("page_token", "is not a token from a previous page")
BUSY_PAUSES = (0.2, 0.4, 0.8, 1.6)  # seconds between tries while the server is busy


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
    retry for ten seconds. A call without the SDK's retries tells the caller's mistake (422
    naming ``page_token``) from an outage (raised as is, for :func:`~.rpc.temporal_errors`).
    A server busy with other visibility calls (RESOURCE_EXHAUSTED) is asked again, as the
    SDK's own retries would, for about 3 s before its refusal is raised."""
    raw = decode_token(token)
    if raw is None:
        return None
    probe = ListWorkflowExecutionsRequest(
        namespace=client.namespace, page_size=1, next_page_token=raw, query=query
    )
    for pause in BUSY_PAUSES:
        if await _server_takes(client, probe, busy_is_final=False):
            return raw
        await asyncio.sleep(pause)
    await _server_takes(client, probe, busy_is_final=True)
    return raw


async def _server_takes(
    client: Client, probe: ListWorkflowExecutionsRequest, busy_is_final: bool
) -> bool:
    """True when the server answers the probe; False when it was too busy to (and
    ``busy_is_final`` is off). A made-up token is a SpecError; any other refusal is raised."""
    try:
        await client.workflow_service.list_workflow_executions(probe, retry=False)
    except RPCError as err:
        if err.status in (RPCStatusCode.UNKNOWN, RPCStatusCode.INVALID_ARGUMENT):
            raise SpecError([NOT_A_TOKEN]) from err
        if err.status != RPCStatusCode.RESOURCE_EXHAUSTED or busy_is_final:
            raise
        return False
    return True


def _token_check(token: bytes) -> str:
    return hashlib.sha256(token).hexdigest()[:12]
