"""The HTTP API's one error shape, ``{"error": kind, "detail": ...}``, and the handlers that
give it to every refusal: the job library's typed errors, FastAPI's validation errors, the
router's own 404/405, and a client that went away mid-body. None carries a stack trace.

===  =======================  ==========================================================
400  bad_request              Host header not allowed, malformed request, body cut short
401  unauthorized             missing or wrong bearer token
403  forbidden                a cross-site state-changing request to a token-less API
404  not_found                unknown job or route
405  method_not_allowed       the route exists, not with this method (``Allow`` lists them)
409  conflict                 invalid transition, or a job id taken by a different request
413  too_large                body over the limit (refused before it is read)
415  unsupported_media_type   a body that is not ``Content-Type: application/json``
422  invalid                  invalid input: a list of ``{"field", "reason"}``
503  unavailable              Temporal unreachable, or busy (``Retry-After`` then says when
                              to try again)
500  internal                 a bug: the API log has the details
===  =======================  ==========================================================
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import Match

from jobctl.connection.codec import DecryptionError
from jobctl.starter.errors import (
    InvalidTransition,
    JobExists,
    JobNotFound,
    JobsError,
    SpecError,
    TemporalBusy,
    TemporalUnavailable,
)

log = logging.getLogger("jobs.api")

ErrorKind = Literal[
    "bad_request",
    "invalid",
    "not_found",
    "method_not_allowed",
    "conflict",
    "too_large",
    "unsupported_media_type",
    "unauthorized",
    "forbidden",
    "unavailable",
    "internal",
]
KINDS: dict[int, ErrorKind] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid",
    503: "unavailable",
}


METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")  # what Allow may name


class FieldProblem(BaseModel):
    field: str
    reason: str


class ErrorBody(BaseModel):
    error: ErrorKind
    detail: str | list[FieldProblem]


class UnsupportedMediaType(Exception):
    """A request body that is not declared as JSON (415)."""


ERRORS: dict[type[JobsError], tuple[int, ErrorKind]] = {
    SpecError: (422, "invalid"),
    JobNotFound: (404, "not_found"),
    JobExists: (409, "conflict"),
    InvalidTransition: (409, "conflict"),
    TemporalUnavailable: (503, "unavailable"),
    DecryptionError: (500, "internal"),  # a payload this API's keys cannot open: say which key
}


def error_response(
    status: int,
    error: str,
    detail: str | list[FieldProblem],
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = ErrorBody.model_validate({"error": error, "detail": detail})
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    headers = dict(headers) if headers else None
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=headers)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on this path (Starlette's ``Allow`` names only the
    first route that matched the path: ``PUT /jobs`` would say ``POST`` alone). Each method
    is tried against the routes, included routers' too (FastAPI matches those lazily)."""
    routes = request.app.router.routes

    def served(method: str) -> bool:
        scope = {**request.scope, "method": method}
        return any(route.matches(scope)[0] == Match.FULL for route in routes)

    return [method for method in METHODS if served(method)]


def invalid(field: str, reason: str) -> JSONResponse:
    return error_response(422, "invalid", [FieldProblem(field=field, reason=reason)])


def documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error answers a route can give (all share ErrorBody): the
    given codes plus those any route can give (Host refused, token, Temporal down)."""
    return {code: {"model": ErrorBody} for code in sorted({*codes, 400, 401, 503})}


def documented_body(*codes: int) -> dict[int | str, dict[str, Any]]:
    """:func:`documented` for a state-changing route with a JSON body: cross-site refusal,
    size limit, media type and validation come on top."""
    return documented(*codes, 403, 413, 415, 422)


def status_of(err: JobsError) -> tuple[int, ErrorKind]:
    """The answer for the nearest class in ``ERRORS`` (a ``TemporalBusy`` is a 503 as every
    ``TemporalUnavailable`` is); 500 for a JobsError nobody mapped."""
    mapped = (ERRORS[cls] for cls in type(err).__mro__ if cls in ERRORS)
    return next(mapped, (500, "internal"))


async def jobs_error(request: Request, err: JobsError) -> JSONResponse:
    status, kind = status_of(err)
    if isinstance(err, SpecError):
        problems = [FieldProblem(field=f, reason=r) for f, r in err.problems]
        return error_response(status, kind, problems)
    headers = {"Retry-After": str(err.retry_after)} if isinstance(err, TemporalBusy) else None
    return error_response(status, kind, str(err), headers=headers)


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


async def http_error(request: Request, err: HTTPException) -> JSONResponse:
    """The router's 404 (no such route) and 405 (``Allow`` kept), and any other."""
    status = err.status_code
    kind = KINDS.get(status, "bad_request" if status < 500 else "internal")
    detail = err.detail if isinstance(err.detail, str) else "refused"
    path = request.url.path[:200]
    if status == 404 and detail == "Not Found":
        detail = f"no route {path!r}"
    headers = dict(err.headers or {})
    if status == 405:
        allowed = allowed_methods(request)
        headers["Allow"] = ", ".join(allowed) or headers.get("Allow", "")
        if detail == "Method Not Allowed":
            detail = (
                f"{request.method[:20]} is not allowed on {path!r}; allowed: {headers['Allow']}"
            )
    return error_response(status, kind, detail, headers=headers)


async def media_type(request: Request, err: UnsupportedMediaType) -> JSONResponse:
    return error_response(415, "unsupported_media_type", str(err))


async def disconnected(request: Request, err: ClientDisconnect) -> JSONResponse:
    """The client closed the connection before its whole body arrived: nobody will read
    the answer, and nothing was done; no traceback, no 500."""
    log.info("%s %s: client went away mid-body", request.method, request.url.path)
    return error_response(400, "bad_request", "the connection closed before the whole body")


async def unexpected(request: Request, err: Exception) -> JSONResponse:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return error_response(500, "internal", "internal error; the API log has the details")


HANDLERS: list[tuple[type[Exception], Callable[[Request, Any], Awaitable[JSONResponse]]]] = [
    (JobsError, jobs_error),
    (RequestValidationError, request_error),
    (HTTPException, http_error),
    (UnsupportedMediaType, media_type),
    (ClientDisconnect, disconnected),
    (Exception, unexpected),
]


def install(app: FastAPI) -> None:
    """Give every refusal the ``{"error", "detail"}`` shape."""
    for kind, handler in HANDLERS:
        app.add_exception_handler(kind, handler)
