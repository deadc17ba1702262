"""The HTTP API: the same operations as the CLI, on the same job model and client factory.

Errors are typed and never carry a stack trace: 422 invalid input (field and reason), 404
unknown job, 409 invalid transition or a job id already taken by a different request, 413 body
over the limit (refused before parsing), 401 missing or wrong token, 503 Temporal unreachable.

``POST /codec/encode`` and ``POST /codec/decode`` are a Temporal codec server for the Web UI
and the ``temporal`` CLI (``--codec-endpoint http://host:8000/codec``): they encrypt and
decrypt ``{"payloads": [...]}`` (protobuf JSON) with the keys of :mod:`starter.codec`, behind
the same bearer token, with CORS for the origins in ``JOBS_CODEC_CORS_ORIGINS`` (comma-separated,
default ``http://localhost:8233``, the dev server's UI).

Creating is idempotent by job id: repeating a ``POST /jobs`` with the same id and the same
body answers 200 with the existing job instead of 201; the same id with a different body is 409.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import uvicorn
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from google.protobuf import json_format
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.middleware.cors import CORSMiddleware
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.client import Client

from activities.registry import load_handlers
from starter import board as job_board
from starter import dlq as dead_letters
from starter import operations, tracing
from starter.client import connect, load_profile
from starter.codec import ENCODING, KEY_ENV, KEY_ID_METADATA, DecryptionError, codec_from_env
from starter.errors import (
    InvalidTransition,
    JobExists,
    JobNotFound,
    JobsError,
    SpecError,
    TemporalUnavailable,
)
from workflows.models import (
    MAX_NOTE,
    CronReport,
    JobReport,
    JobSpec,
    JobStatus,
    OffsetDatetime,
    Overlap,
    SlotTime,
)

log = logging.getLogger("jobs.api")

TOKEN_ENV = "JOBS_API_TOKEN"
# Named tokens, "alice:tok1,bob:tok2": the name is who acts in the jobs' audit trails.
TOKENS_ENV = "JOBS_API_TOKENS"
SINGLE_TOKEN_NAME = "api"  # the actor of JOBS_API_TOKEN
ANONYMOUS = "anonymous"  # the actor when the API runs without tokens (loopback only)
ACTOR_KEY = "jobs.actor"  # where Guard leaves the caller's name in the ASGI scope
TOKEN_NAME_RE = re.compile(r"[A-Za-z0-9._@-]{1,64}")
MAX_BODY_BYTES = 320 * 1024  # the 256 KiB payload limit plus room for the rest of the spec
HANDLER_CACHE_SECONDS = 30.0
PUBLIC_PATHS = {"/healthz", *job_board.PUBLIC_PATHS}  # the board page and assets hold no data
CODEC_PREFIX = "/codec/"
CODEC_MAX_BODY_BYTES = 4 * 1024 * 1024  # a history event's payloads, base64 in JSON
CORS_ENV = "JOBS_CODEC_CORS_ORIGINS"
DEFAULT_CORS_ORIGINS = "http://localhost:8233"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class FieldProblem(BaseModel):
    field: str
    reason: str


class ErrorBody(BaseModel):
    error: Literal[
        "invalid", "not_found", "conflict", "too_large", "unauthorized", "unavailable", "internal"
    ]
    detail: str | list[FieldProblem]


class Health(BaseModel):
    temporal: Literal["ok", "unreachable"]
    detail: str = ""


class NoteBody(BaseModel):
    """The optional body of a control: why. Who (the token's name) and when (the server's
    time) are added by the API and the job; the three land in the job's audit trail."""

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


Body = TypeVar("Body", bound=NoteBody)


class Released(BaseModel):
    job_id: str
    action: Literal["requeue", "discard", "cancel"]


class CodecPayload(BaseModel):
    """One ``temporal.api.common.v1.Payload`` in protobuf JSON: bytes are base64."""

    metadata: dict[str, str] = Field(default_factory=dict)
    data: str = ""


class CodecPayloads(BaseModel):
    payloads: list[CodecPayload]


ERRORS: dict[type[JobsError], tuple[int, str]] = {
    SpecError: (422, "invalid"),
    JobNotFound: (404, "not_found"),
    JobExists: (409, "conflict"),
    InvalidTransition: (409, "conflict"),
    TemporalUnavailable: (503, "unavailable"),
    DecryptionError: (500, "internal"),  # a payload this API's keys cannot open: say which key
}


def error_response(status: int, error: str, detail: str | list[FieldProblem]) -> JSONResponse:
    body = ErrorBody.model_validate({"error": error, "detail": detail})
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=headers)


def documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error answers a route can give (all share ErrorBody)."""
    return {code: {"model": ErrorBody} for code in (*codes, 401, 503)}


class Guard:
    """ASGI middleware: bearer token on every path but /healthz, and the body size limit,
    both enforced before FastAPI reads or parses anything."""

    def __init__(
        self, app: ASGIApp, token: str | None = None, tokens: Mapping[str, str] | None = None
    ):
        self.app = app
        self.token = token
        named = dict(tokens or {})
        if token:
            named.setdefault(SINGLE_TOKEN_NAME, token)
        self.tokens = [(name, secret.encode()) for name, secret in named.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        actor = self._actor(scope) if self.tokens else ANONYMOUS
        if actor is None and scope["path"] not in PUBLIC_PATHS:
            await error_response(401, "unauthorized", "missing or wrong bearer token")(
                scope, receive, send
            )
            return
        scope[ACTOR_KEY] = actor or ANONYMOUS
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        limit = CODEC_MAX_BODY_BYTES if scope["path"].startswith(CODEC_PREFIX) else MAX_BODY_BYTES
        if length is not None:
            if not length.isdigit() or int(length) > limit:
                await self._too_large(scope, receive, send, limit)
                return
            await self.app(scope, receive, send)
            return
        # No length (chunked): buffer up to the limit ourselves, then replay it to the app.
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > limit:
                await self._too_large(scope, receive, send, limit)
                return
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _actor(self, scope: Scope) -> str | None:
        """The name of the bearer token presented, or None. Every token is compared (in
        constant time), so the answer's timing does not tell which name matched."""
        for name, value in scope.get("headers") or []:
            if name == b"authorization":
                scheme, _, given = value.decode("latin-1").partition(" ")
                if scheme.lower() != "bearer":
                    return None
                secret = given.strip().encode()
                found = None
                for who, expected in self.tokens:
                    if hmac.compare_digest(secret, expected) and found is None:
                        found = who
                return found
        return None

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        response = error_response(413, "too_large", f"request body over {limit} bytes")
        await response(scope, receive, send)


class CodecCors:
    """ASGI middleware outside :class:`Guard`: CORS on the codec endpoints only (the Web UI
    calls them from the browser). A preflight ``OPTIONS`` is answered here, before the token
    check, because browsers never send ``Authorization`` on a preflight."""

    def __init__(self, app: ASGIApp, origins: list[str]):
        self.app = app
        self.cors = CORSMiddleware(
            app,
            allow_origins=origins,
            allow_methods=["POST"],
            allow_headers=["authorization", "content-type", "x-namespace"],
            allow_credentials=True,  # the UI may "include cross-origin credentials"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(CODEC_PREFIX):
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def cors_origins() -> list[str]:
    """``JOBS_CODEC_CORS_ORIGINS``: comma-separated origins, default the dev server's UI."""
    raw = os.environ.get(CORS_ENV, DEFAULT_CORS_ORIGINS)
    return [origin.strip().rstrip("/") for origin in raw.split(",") if origin.strip()]


async def read_payloads(request: Request) -> list[Payload]:
    try:
        message = json_format.Parse(await request.body(), Payloads())
    except (json_format.ParseError, UnicodeDecodeError) as err:
        raise SpecError([("payloads", f"not a Payloads message in protobuf JSON: {err}")]) from err
    return list(message.payloads)


def payloads_response(payloads: list[Payload]) -> JSONResponse:
    return JSONResponse(json_format.MessageToDict(Payloads(payloads=payloads)))


class Backend:
    """The API's Temporal client (connected lazily, so the API starts even when Temporal is
    down and answers 503 until it is back) and its cache of known handler names."""

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

    async def handlers(self) -> set[str]:
        now = time.monotonic()
        if self._handlers is None or now - self._handlers[0] > HANDLER_CACHE_SECONDS:
            self._handlers = (now, await operations.known_handlers(await self.client()))
        return self._handlers[1]


async def read_object(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        data = json.loads(raw or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SpecError([("body", f"not valid JSON: {err}")]) from err
    if not isinstance(data, dict):
        raise SpecError([("body", "must be a JSON object")])
    return data


def load_tokens() -> dict[str, str]:
    """Bearer tokens by name: ``JOBS_API_TOKEN`` (named ``api``) and ``JOBS_API_TOKENS``
    (``alice:tok1,bob:tok2``). A malformed list stops the API at start-up (never echoing a
    token)."""
    tokens: dict[str, str] = {}
    single = os.environ.get(TOKEN_ENV)
    if single:
        tokens[SINGLE_TOKEN_NAME] = single
    for item in os.environ.get(TOKENS_ENV, "").split(","):
        if not item.strip():
            continue
        name, sep, secret = (part.strip() for part in item.strip().partition(":"))
        if not sep or not secret or not TOKEN_NAME_RE.fullmatch(name):
            raise SpecError(
                [
                    (
                        TOKENS_ENV,
                        "each entry must be name:token, the name 1-64 letters, digits or . _ @ -",
                    )
                ]
            )
        if name in tokens:
            taken = (
                f" ({TOKEN_ENV} is named {SINGLE_TOKEN_NAME})" if name == SINGLE_TOKEN_NAME else ""
            )
            raise SpecError([(TOKENS_ENV, f"the name {name!r} is given twice{taken}")])
        if secret in tokens.values():
            raise SpecError([(TOKENS_ENV, f"{name!r} has the same token as another name")])
        tokens[name] = secret
    return tokens


def actor_of(request: Request) -> str:
    """Who is calling, for the audit trail: the token's name (set by :class:`Guard`)."""
    return str(request.scope.get(ACTOR_KEY) or ANONYMOUS)


async def read_control(request: Request, model: type[Body], note: str | None) -> Body:
    """A control's optional JSON body (any content type; empty is none), with ``note`` also
    accepted as a query parameter."""
    raw = await request.body()
    try:
        data = json.loads(raw) if raw.strip() else None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SpecError([("body", f"not valid JSON: {err}")]) from err
    data = {} if data is None else data
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


def control_body(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI for a control's optional body (read by :func:`read_control`)."""
    schema = {"schema": model.model_json_schema()}
    return {"requestBody": {"required": False, "content": {"application/json": schema}}}


NOTE_QUERY = Query(
    None, max_length=MAX_NOTE, description="Why (the audit trail); or `note` in the body."
)


def create_app(
    token: str | None = None,
    client: Client | None = None,
    tokens: Mapping[str, str] | None = None,
) -> FastAPI:
    """The API. ``token`` (named ``api``) and ``tokens`` (name -> token) turn on bearer
    authentication; both default to the environment (``JOBS_API_TOKEN``, ``JOBS_API_TOKENS``)."""
    if token is None and tokens is None:
        tokens = load_tokens()
    else:
        tokens = {**({SINGLE_TOKEN_NAME: token} if token else {}), **(tokens or {})}
    load_handlers()  # a broken JOBS_HANDLER_MODULES fails here, at start-up, not per request
    codec = codec_from_env()  # so does a bad JOBS_ENCRYPTION_KEY
    if client is None:
        load_profile()  # and an unknown TEMPORAL_PROFILE or a missing TEMPORAL_CONFIG_FILE
    backend = Backend(client)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        yield

    app = FastAPI(
        title="jobs",
        summary="Delayed and cron jobs on Temporal",
        version="0.1.0",
        lifespan=lifespan,
    )

    @app.exception_handler(JobsError)
    async def jobs_error(request: Request, err: JobsError) -> JSONResponse:
        status, kind = ERRORS.get(type(err), (500, "internal"))
        if isinstance(err, SpecError):
            problems = [FieldProblem(field=f, reason=r) for f, r in err.problems]
            return error_response(status, kind, problems)
        return error_response(status, kind, str(err))

    @app.exception_handler(RequestValidationError)
    async def request_error(request: Request, err: RequestValidationError) -> JSONResponse:
        problems = [
            FieldProblem(
                field=".".join(
                    str(part) for part in item["loc"] if part not in ("query", "path", "body")
                )
                or "request",
                reason=str(item["msg"]),
            )
            for item in err.errors()
        ]
        return error_response(422, "invalid", problems)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, err: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_response(500, "internal", "internal error; the API log has the details")

    spec_body = {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": JobSpec.model_json_schema()}},
        }
    }

    @app.post(
        "/jobs",
        response_model=operations.Scheduled,
        status_code=201,
        responses={
            200: {
                "model": operations.Scheduled,
                "description": "identical request: the existing job",
            },
            **documented(409, 413, 422),
        },
        openapi_extra=spec_body,
    )
    async def create_job(request: Request) -> Any:
        """Schedule a one-shot (run_at or delay) or a cron job."""
        data = await read_object(request)
        operations.validate_spec(data, None, datetime.now(UTC))  # 422 even with Temporal down
        with tracing.schedule_span(data, carrier=request.headers) as span:  # the trace's root
            scheduled = await operations.schedule(
                await backend.client(), data, await backend.handlers()
            )
            span.scheduled(scheduled)
        if not scheduled.created:
            return JSONResponse(scheduled.model_dump(mode="json"), status_code=200)
        return scheduled

    @app.get("/jobs", response_model=operations.JobPage, responses=documented(422))
    async def list_jobs(
        status: JobStatus | None = None,
        limit: int = Query(50, ge=1, le=1000),
        page_token: str | None = None,
    ) -> operations.JobPage:
        """Jobs and crons, newest first, from Temporal's visibility store; paged."""
        return await operations.list_jobs(
            await backend.client(), status.value if status else None, limit, page_token
        )

    @app.get("/jobs/{job_id}", response_model=JobReport | CronReport, responses=documented(404))
    async def get_job(job_id: str) -> JobReport | CronReport:
        """Status and attempt history (crons: next slots and recent slots)."""
        return await operations.status(await backend.client(), job_id)

    @app.delete(
        "/jobs/{job_id}",
        response_model=Released,
        status_code=202,
        responses=documented(404, 409, 422),
        openapi_extra=control_body(NoteBody),
    )
    async def cancel_job(job_id: str, request: Request, note: str | None = NOTE_QUERY) -> Released:
        """Cancel a job (a running attempt is cancelled through its heartbeat) or a cron."""
        body = await read_control(request, NoteBody, note)
        await operations.cancel(await backend.client(), job_id, body.note, actor_of(request))
        return Released(job_id=job_id, action="cancel")

    @app.post(
        "/jobs/{job_id}/trigger",
        response_model=JobReport | CronReport,
        responses=documented(404, 409, 422),
        openapi_extra=control_body(NoteBody),
    )
    async def trigger_job(
        job_id: str, request: Request, note: str | None = NOTE_QUERY
    ) -> JobReport | CronReport:
        """Run a waiting job now; a cron runs one extra slot now."""
        body = await read_control(request, NoteBody, note)
        return await operations.trigger(
            await backend.client(), job_id, body.note, actor_of(request)
        )

    @app.post(
        "/jobs/{job_id}/pause",
        response_model=JobReport | CronReport,
        responses=documented(404, 409, 422),
        openapi_extra=control_body(PauseBody),
    )
    async def pause_job(
        job_id: str, request: Request, note: str | None = NOTE_QUERY
    ) -> JobReport | CronReport:
        """Hold a waiting job or a cron, optionally until a time."""
        body = await read_control(request, PauseBody, note)
        return await operations.pause(
            await backend.client(), job_id, body.until, body.note, actor_of(request)
        )

    @app.post(
        "/jobs/{job_id}/resume",
        response_model=JobReport | CronReport,
        responses=documented(404, 409, 422),
        openapi_extra=control_body(NoteBody),
    )
    async def resume_job(
        job_id: str, request: Request, note: str | None = NOTE_QUERY
    ) -> JobReport | CronReport:
        body = await read_control(request, NoteBody, note)
        return await operations.resume(await backend.client(), job_id, body.note, actor_of(request))

    @app.patch(
        "/jobs/{job_id}", response_model=JobReport | CronReport, responses=documented(404, 409, 422)
    )
    async def update_cron(
        job_id: str, change: CronChange, request: Request
    ) -> JobReport | CronReport:
        """Change a cron's expression, zone or overlap policy (``note``: why)."""
        checked = operations.cron_update(change.cron, change.timezone, change.overlap)
        return await operations.update_cron(
            await backend.client(), job_id, checked, change.note, actor_of(request)
        )

    @app.get("/dlq", response_model=dead_letters.DeadPage, responses=documented(422))
    async def list_dead(
        handler: str | None = None,
        limit: int = Query(50, ge=1, le=1000),
        page_token: str | None = None,
    ) -> dead_letters.DeadPage:
        """Parked jobs, newest first (the JobStatus="dead" visibility query)."""
        return await dead_letters.list_dead(await backend.client(), limit, page_token, handler)

    @app.post(
        "/dlq/{job_id}/requeue",
        response_model=Released,
        responses=documented(404, 409, 422),
        openapi_extra=control_body(NoteBody),
    )
    async def requeue(job_id: str, request: Request, note: str | None = NOTE_QUERY) -> Released:
        """Run a dead job again with a fresh attempt budget."""
        body = await read_control(request, NoteBody, note)
        await dead_letters.release(
            await backend.client(), job_id, "requeue", body.note, actor_of(request)
        )
        return Released(job_id=job_id, action="requeue")

    @app.post(
        "/dlq/{job_id}/discard",
        response_model=Released,
        responses=documented(404, 409, 422),
        openapi_extra=control_body(NoteBody),
    )
    async def discard(job_id: str, request: Request, note: str | None = NOTE_QUERY) -> Released:
        """End a dead job for good."""
        body = await read_control(request, NoteBody, note)
        await dead_letters.release(
            await backend.client(), job_id, "discard", body.note, actor_of(request)
        )
        return Released(job_id=job_id, action="discard")

    @app.get("/cron/preview", response_model=list[SlotTime], responses=documented(422))
    async def preview(
        expr: str = Query(..., max_length=200),
        tz: str = Query("UTC", max_length=100),
        after: datetime | None = None,
        n: int = Query(5, ge=1, le=1000),
    ) -> list[SlotTime]:
        """The next slots of a cron expression, local and UTC. Schedules nothing."""
        return operations.preview_cron(expr, tz, after.isoformat() if after else None, n)

    codec_body = {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": CodecPayloads.model_json_schema()}},
        }
    }

    @app.post(
        "/codec/encode",
        response_model=CodecPayloads,
        responses=documented(413, 422),
        openapi_extra=codec_body,
    )
    async def codec_encode(request: Request) -> JSONResponse:
        """Codec server: encrypt payloads with the current key (unchanged when encryption is
        off)."""
        payloads = await read_payloads(request)
        return payloads_response(await codec.encode(payloads) if codec else payloads)

    @app.post(
        "/codec/decode",
        response_model=CodecPayloads,
        responses=documented(413, 422),
        openapi_extra=codec_body,
    )
    async def codec_decode(request: Request) -> JSONResponse:
        """Codec server: decrypt payloads (unencrypted ones come back as they are); 422 names
        the key id of a payload these keys cannot open."""
        payloads = await read_payloads(request)
        try:
            if codec is not None:
                return payloads_response(await codec.decode(payloads))
            for payload in payloads:
                if payload.metadata.get("encoding") == ENCODING:
                    key_id = payload.metadata.get(KEY_ID_METADATA, b"").decode("utf-8", "replace")
                    raise DecryptionError(
                        f"payload encrypted with key id {key_id!r}, but this API has no "
                        f"encryption key ({KEY_ENV} is not set)"
                    )
            return payloads_response(payloads)
        except DecryptionError as err:
            return error_response(422, "invalid", [FieldProblem(field="payloads", reason=str(err))])

    @app.get("/healthz", response_model=Health, responses={503: {"model": Health}})
    async def healthz() -> Any:
        """Whether Temporal is reachable (no token needed)."""
        try:
            client = await backend.client()
            await asyncio.wait_for(client.service_client.check_health(), 5)
        except Exception as err:  # any failure here means "not reachable"
            return JSONResponse(
                Health(temporal="unreachable", detail=str(err)[:200]).model_dump(), status_code=503
            )
        return Health(temporal="ok")

    job_board.install(app, backend.client)  # GET / (the page) and GET /board (its data)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, summary=app.summary, routes=app.routes
            )
            if tokens:
                schema.setdefault("components", {})["securitySchemes"] = {
                    "bearer": {"type": "http", "scheme": "bearer"}
                }
                schema["security"] = [{"bearer": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    app.add_middleware(Guard, tokens=tokens)
    app.add_middleware(CodecCors, origins=cors_origins())  # outermost: before the token check
    return app


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | Mapping[str, str] | None) -> None:
    """Anything but loopback needs a token (``JOBS_API_TOKEN`` or ``JOBS_API_TOKENS``):
    refuse to start otherwise."""
    if not is_loopback(host) and not token:
        raise SpecError([("host", f"binding to {host} needs {TOKEN_ENV} set (a bearer token)")])


class EmbeddedServer(uvicorn.Server):
    """uvicorn inside a process that owns its signals (``jobs dev``): stop with should_exit."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def server(host: str, port: int, embedded: bool = False) -> uvicorn.Server:
    """A uvicorn server for the API; refuses a non-loopback host without a token."""
    tokens = load_tokens()
    check_binding(host, tokens)
    config = uvicorn.Config(
        create_app(tokens=tokens), host=host, port=port, log_level="warning", access_log=False
    )
    return EmbeddedServer(config) if embedded else uvicorn.Server(config)
