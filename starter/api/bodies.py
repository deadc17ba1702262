"""Request bodies of the HTTP API: one strict reader, the control bodies, the codec payloads.

A request that carries a body must say ``Content-Type: application/json`` (a ``charset``
parameter is allowed, and must be UTF-8): anything else is 415 before a byte of it is parsed,
so a cross-site HTML form (which can only send ``text/plain``, ``multipart/form-data`` or
``application/x-www-form-urlencoded``) never reaches a route. The JSON itself is decoded by
:mod:`starter.strictjson`. Controls without a body (``POST /jobs/{id}/resume``) need no
content type.
"""

from __future__ import annotations

from email.message import Message
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse
from google.protobuf import json_format
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from temporalio.api.common.v1 import Payload, Payloads

from jobctl.starter import operations, strictjson
from jobctl.starter.api.errors import UnsupportedMediaType
from jobctl.starter.errors import SpecError
from jobctl.workflows.models import MAX_NOTE, OffsetDatetime, Overlap

JSON_MEDIA_TYPE = "application/json"


class NoteBody(BaseModel):
    """The optional body of a control: why. Who (the token's name) and when (the server's
    time) are added by the API and the job; the three land in the job's audit trail."""

    model_config = ConfigDict(extra="forbid")

    note: str | None = Field(default=None, max_length=MAX_NOTE)


class PauseBody(NoteBody):
    until: OffsetDatetime = None


class CronChange(BaseModel):
    """``PATCH /jobs/{id}``: change a cron; omitted fields stay as they are."""

    model_config = ConfigDict(extra="forbid")

    cron: str | None = None
    timezone: str | None = None
    overlap: Overlap | None = None
    note: str | None = Field(default=None, max_length=MAX_NOTE)


class BatchBody(BaseModel):
    """``POST /jobs/batch``: up to 1,000 job specs, each judged on its own (an item that is
    not a JSON object is that item's refusal, not the request's)."""

    model_config = ConfigDict(extra="forbid")

    jobs: list[Any] = Field(max_length=operations.MAX_BATCH)
    # A named batch (docs/batches.md): {"id", "on_complete"?, "on_success"?}; then the
    # request is all or nothing. Checked by operations.batch_check (every problem at once).
    batch: Any = None


Body = TypeVar("Body", bound=BaseModel)


class CodecPayload(BaseModel):
    """One ``temporal.api.common.v1.Payload`` in protobuf JSON: bytes are base64."""

    metadata: dict[str, str] = Field(default_factory=dict)
    data: str = ""


class CodecPayloads(BaseModel):
    payloads: list[CodecPayload]


def require_json(content_type: str | None) -> None:
    """415 unless the declared media type is ``application/json`` in UTF-8."""
    if content_type is None:
        raise UnsupportedMediaType(f"a request body needs Content-Type: {JSON_MEDIA_TYPE}")
    header = Message()
    header["content-type"] = content_type
    media = header.get_content_type()
    charset = str(header.get_param("charset") or "utf-8").lower()
    if media != JSON_MEDIA_TYPE or charset not in ("utf-8", "utf8"):
        raise UnsupportedMediaType(
            f"Content-Type {content_type[:100]!r} is not accepted: send {JSON_MEDIA_TYPE} (UTF-8)"
        )


async def read_json(request: Request, optional: bool = False) -> Any:
    """The body as strict JSON. No body at all is ``{}`` when ``optional`` (a control
    without a note), else refused; a JSON ``null`` is a body like any other."""
    raw = await request.body()
    if not raw:
        if optional:
            return {}
        raise SpecError([("body", "a JSON object is required")])
    require_json(request.headers.get("content-type"))
    try:
        return strictjson.loads(raw)
    except strictjson.JSONRefused as err:
        raise SpecError([("body", err.reason)]) from err


async def read_object(request: Request) -> dict[str, Any]:
    data = await read_json(request)
    if not isinstance(data, dict):
        raise SpecError([("body", "must be a JSON object")])
    return data


async def read_model(request: Request, model: type[Body]) -> Body:
    try:
        return model.model_validate(await read_object(request))
    except ValidationError as err:
        raise SpecError.from_validation(err) from err


async def read_control(request: Request, model: type[Body], note: str | None) -> Body:
    """A control's optional JSON body (empty is none), with ``note`` also accepted as a query
    parameter."""
    data = await read_json(request, optional=True)
    if not isinstance(data, dict):
        raise SpecError([("body", "must be a JSON object")])
    if note is not None:
        if data.get("note") is not None:
            raise SpecError([("note", "give it in the body or as a query parameter, not both")])
        data = {**data, "note": note}
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise SpecError.from_validation(err) from err


def body_schema(model: type[BaseModel], required: bool = True) -> dict[str, Any]:
    """OpenAPI for a body a route reads itself (with :func:`read_json`)."""
    schema = {"schema": model.model_json_schema()}
    return {"requestBody": {"required": required, "content": {JSON_MEDIA_TYPE: schema}}}


def control_body(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI for a control's optional body (read by :func:`read_control`)."""
    return body_schema(model, required=False)


async def read_payloads(request: Request) -> list[Payload]:
    data = await read_object(request)
    try:
        message = json_format.ParseDict(data, Payloads())
    except (json_format.ParseError, TypeError, ValueError) as err:
        raise SpecError([("payloads", f"not a Payloads message in protobuf JSON: {err}")]) from err
    return list(message.payloads)


def payloads_response(payloads: list[Payload]) -> JSONResponse:
    return JSONResponse(json_format.MessageToDict(Payloads(payloads=payloads)))
