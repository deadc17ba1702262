"""``POST /codec/encode`` and ``POST /codec/decode``: a Temporal codec server for the Web UI
and the ``temporal`` CLI (``--codec-endpoint http://host:8000/codec``). They encrypt and
decrypt ``{"payloads": [...]}`` (protobuf JSON) with the keys of :mod:`connection.codec`,
behind the same bearer token, with CORS for ``JOBS_CODEC_CORS_ORIGINS``
(:class:`starter.api.guards.CodecCors`)."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from temporalio.api.common.v1 import Payload

from jobctl.connection.codec import ENCODING, KEY_ENV, KEY_ID_METADATA, DecryptionError
from jobctl.starter.api.bodies import CodecPayloads, body_schema, payloads_response, read_payloads
from jobctl.starter.api.deps import State
from jobctl.starter.api.errors import documented_body, invalid

router = APIRouter()


@router.post(
    "/codec/encode",
    response_model=CodecPayloads,
    responses=documented_body(),
    openapi_extra=body_schema(CodecPayloads),
)
async def codec_encode(request: Request, state: State) -> JSONResponse:
    """Codec server: encrypt payloads with the current key (unchanged when encryption is
    off)."""
    payloads = await read_payloads(request)
    codec = state.codec
    return payloads_response(await codec.encode(payloads) if codec else payloads)


@router.post(
    "/codec/decode",
    response_model=CodecPayloads,
    responses=documented_body(),
    openapi_extra=body_schema(CodecPayloads),
)
async def codec_decode(request: Request, state: State) -> JSONResponse:
    """Codec server: decrypt payloads (unencrypted ones come back as they are); 422 names
    the key id of a payload these keys cannot open."""
    payloads = await read_payloads(request)
    try:
        if state.codec is not None:
            return payloads_response(await state.codec.decode(payloads))
        refuse_encrypted(payloads)
        return payloads_response(payloads)
    except DecryptionError as err:
        return invalid("payloads", str(err))


def refuse_encrypted(payloads: Sequence[Payload]) -> None:
    """Without a key, an encrypted payload cannot be opened: say which key it needs."""
    for payload in payloads:
        if payload.metadata.get("encoding") == ENCODING:
            key_id = payload.metadata.get(KEY_ID_METADATA, b"").decode("utf-8", "replace")
            raise DecryptionError(
                f"payload encrypted with key id {key_id!r}, but this API has no "
                f"encryption key ({KEY_ENV} is not set)"
            )
