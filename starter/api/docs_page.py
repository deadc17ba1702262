"""``GET /docs``: the OpenAPI page, from files installed with the package.

FastAPI's own page loads Swagger UI from a CDN, so it is blank on a machine without internet.
This one serves the same page with Swagger UI's script, stylesheet and icon as the
``fastapi-offline`` package installs them (Swagger UI 5, which reads OpenAPI 3.1; under
:data:`ASSETS`, public like the board's assets: they are
the same files for everyone and hold no data; the page and the document stay behind the
token when one is set).
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs-assets"
FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png")
STATIC = resources.files("fastapi_offline") / "static"
PUBLIC_PATHS = {f"{ASSETS}/{name}" for name in FILES}


def install(app: FastAPI) -> None:
    """Serve ``/docs`` and its assets (build the app with ``docs_url=None``)."""
    app.mount(ASSETS, StaticFiles(directory=str(STATIC)), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - API",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
        )
