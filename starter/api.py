"""The HTTP API: the same operations as the CLI, on the same job model and client factory.

Every refusal is ``{"error", "detail"}`` without a stack trace (the kinds and codes are in
:mod:`starter.api_errors`); request gates (Host allow-list, cross-site refusal, token, size)
are in :mod:`starter.api_guards`, bodies (strict JSON, ``application/json`` only) in
:mod:`starter.api_bodies`.

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
import ipaddress
import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Literal

import uvicorn
from fastapi import FastAPI, Query, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from temporalio.client import Client

from activities.registry import load_handlers
from starter import api_errors, api_guards, operations, tracing
from starter import board as job_board
from starter import dlq as dead_letters
from starter.api_bodies import (
    CodecPayloads,
    CronChange,
    NoteBody,
    PauseBody,
    body_schema,
    control_body,
    payloads_response,
    read_control,
    read_model,
    read_object,
    read_payloads,
)
from starter.api_errors import documented, documented_body, invalid
from starter.api_guards import (
    ACTOR_KEY,
    ANONYMOUS,
    TOKEN_ENV,
    load_allowed_hosts,
    load_tokens,
    named_tokens,
)
from starter.client import connect, load_profile
from starter.codec import ENCODING, KEY_ENV, KEY_ID_METADATA, DecryptionError, codec_from_env
from starter.errors import SpecError
from workflows.jobstatus import JobView
from workflows.models import MAX_NOTE, CronReport, JobReport, JobSpec, JobStatus, SlotTime

log = logging.getLogger("jobs.api")

HANDLER_CACHE_SECONDS = 30.0


class Health(BaseModel):
    temporal: Literal["ok", "unreachable"]
    detail: str = ""


class Released(BaseModel):
    job_id: str
    action: Literal["requeue", "discard", "cancel"]


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


def actor_of(request: Request) -> str:
    """Who is calling, for the audit trail: the token's name (set by ``api_guards.Guard``)."""
    return str(request.scope.get(ACTOR_KEY) or ANONYMOUS)


NOTE_QUERY = Query(
    None, max_length=MAX_NOTE, description="Why (the audit trail); or `note` in the body."
)


def create_app(
    token: str | None = None,
    client: Client | None = None,
    tokens: Mapping[str, str] | None = None,
    task_queue: str | None = None,
    allowed_hosts: list[str] | None = None,
) -> FastAPI:
    """The API. ``token`` (named ``api``) and ``tokens`` (name -> token) turn on bearer
    authentication; both default to the environment (``JOBS_API_TOKEN``, ``JOBS_API_TOKENS``).
    ``task_queue`` is where new jobs go (default ``JOBS_TASK_QUEUE``); ``allowed_hosts`` the
    ``Host`` allow-list (default: loopback names and ``JOBS_API_ALLOWED_HOSTS``)."""
    tokens = named_tokens(token, tokens)
    hosts = load_allowed_hosts() if allowed_hosts is None else allowed_hosts
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
    api_errors.install(app)

    @app.post(
        "/jobs",
        response_model=operations.Scheduled,
        status_code=201,
        responses={
            200: {
                "model": operations.Scheduled,
                "description": "identical request: the existing job",
            },
            **documented_body(409),
        },
        openapi_extra=body_schema(JobSpec),
    )
    async def create_job(request: Request) -> Any:
        """Schedule a one-shot (run_at or delay) or a cron job."""
        data = await read_object(request)
        operations.validate_spec(data, None, datetime.now(UTC))  # 422 even with Temporal down
        with tracing.schedule_span(data, carrier=request.headers) as span:  # the trace's root
            scheduled = await operations.schedule(
                await backend.client(), data, await backend.handlers(), task_queue=task_queue
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
        """Jobs and crons in a status (the one `GET /jobs/{id}` shows), newest first by
        the job's time; paged."""
        return await operations.list_jobs(
            await backend.client(), status.value if status else None, limit, page_token
        )

    @app.get("/jobs/{job_id}", response_model=JobView | CronReport, responses=documented(404))
    async def get_job(job_id: str) -> JobView | JobReport | CronReport:
        """Status and attempt history (crons: next slots and recent slots)."""
        return await operations.status(await backend.client(), job_id)

    @app.delete(
        "/jobs/{job_id}",
        response_model=Released,
        status_code=202,
        responses=documented_body(404, 409),
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
        responses=documented_body(404, 409),
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
        responses=documented_body(404, 409),
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
        responses=documented_body(404, 409),
        openapi_extra=control_body(NoteBody),
    )
    async def resume_job(
        job_id: str, request: Request, note: str | None = NOTE_QUERY
    ) -> JobReport | CronReport:
        body = await read_control(request, NoteBody, note)
        return await operations.resume(await backend.client(), job_id, body.note, actor_of(request))

    @app.patch(
        "/jobs/{job_id}",
        response_model=JobReport | CronReport,
        responses=documented_body(404, 409),
        openapi_extra=body_schema(CronChange),
    )
    async def update_cron(job_id: str, request: Request) -> JobReport | CronReport:
        """Change a cron's expression, zone or overlap policy (``note``: why)."""
        change = await read_model(request, CronChange)
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
        responses=documented_body(404, 409),
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
        responses=documented_body(404, 409),
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
        after: str | None = Query(
            None, max_length=64, description="ISO-8601 with an offset (default: now)."
        ),
        n: int = Query(5, ge=1, le=1000),
    ) -> list[SlotTime]:
        """The next slots of a cron expression, local and UTC. Schedules nothing."""
        # A string, judged by the spec's one date rule (FastAPI's datetime would take
        # "1900000000" as Unix time).
        return operations.preview_cron(expr, tz, after, n)

    @app.post(
        "/codec/encode",
        response_model=CodecPayloads,
        responses=documented_body(),
        openapi_extra=body_schema(CodecPayloads),
    )
    async def codec_encode(request: Request) -> JSONResponse:
        """Codec server: encrypt payloads with the current key (unchanged when encryption is
        off)."""
        payloads = await read_payloads(request)
        return payloads_response(await codec.encode(payloads) if codec else payloads)

    @app.post(
        "/codec/decode",
        response_model=CodecPayloads,
        responses=documented_body(),
        openapi_extra=body_schema(CodecPayloads),
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
            return invalid("payloads", str(err))

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
    api_guards.install(app, tokens, hosts)
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
    app = create_app(tokens=tokens, allowed_hosts=load_allowed_hosts(bind=host))
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    return EmbeddedServer(config) if embedded else uvicorn.Server(config)
