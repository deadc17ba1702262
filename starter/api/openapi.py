"""The API's OpenAPI document: FastAPI's, plus the bearer scheme when tokens are on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi


def schema_builder(app: FastAPI, bearer: bool) -> Callable[[], dict[str, Any]]:
    """``app.openapi``: built once, then cached on the app (FastAPI's own convention)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, summary=app.summary, routes=app.routes
            )
            if bearer:
                schema.setdefault("components", {})["securitySchemes"] = {
                    "bearer": {"type": "http", "scheme": "bearer"}
                }
                schema["security"] = [{"bearer": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    return openapi


def install(app: FastAPI, bearer: bool) -> None:
    app.openapi = schema_builder(app, bearer)  # type: ignore[method-assign]
