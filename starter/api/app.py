"""``create_app``: the API assembled from its parts: one router per resource, the error
handlers, the request gates and the OpenAPI document."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata

from fastapi import FastAPI
from temporalio.client import Client

from jobctl.connection.client import load_profile
from jobctl.connection.codec import codec_from_env
from jobctl.starter import board
from jobctl.starter.api import (
    batches,
    crons,
    dlq,
    docs_page,
    errors,
    guards,
    handlers,
    health,
    jobs,
    limits,
    openapi,
)
from jobctl.starter.api import codec as codec_routes
from jobctl.starter.api.deps import ApiState, Backend

DISTRIBUTION = "jobs-scheduler"  # pyproject.toml's [project] name: the version's one home


def version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "0+unknown"


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
    named = guards.named_tokens(token, tokens)
    hosts = guards.load_allowed_hosts() if allowed_hosts is None else allowed_hosts
    codec = codec_from_env()  # a bad JOBS_ENCRYPTION_KEY fails here, at start-up
    if client is None:
        load_profile()  # and an unknown TEMPORAL_PROFILE or a missing TEMPORAL_CONFIG_FILE
    backend = Backend(client)
    app = FastAPI(
        title="jobs",
        summary="Delayed and cron jobs on Temporal",
        version=version(),
        docs_url=None,  # docs_page serves /docs from installed files, no CDN
        redoc_url=None,
    )
    app.state.jobs = ApiState(backend=backend, codec=codec, task_queue=task_queue)
    errors.install(app)
    for resource in (jobs, batches, dlq, crons, handlers, limits, codec_routes, health):
        app.include_router(resource.router)
    board.install(app, backend.client)  # GET / (the page) and GET /board (its data)
    openapi.install(app, bearer=bool(named))
    docs_page.install(app)
    guards.install(app, named, hosts)
    return app
