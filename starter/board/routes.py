"""The board's routes: ``GET /`` (the page), ``GET /board/{asset}`` and ``GET /board``.

The page and its assets ship in this package (``index.html``, ``board.css``, ``board.js``:
package data, so they resolve the same from a checkout or an installed wheel).
"""

from __future__ import annotations

import gzip
from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, Response
from temporalio.client import Client

from jobctl.starter.board.models import Board
from jobctl.starter.board.snapshot import BoardCache, board_ttl
from jobctl.starter.errors import JobNotFound

STATIC = Path(__file__).resolve().parent
ASSETS = {"board.js": "text/javascript", "board.css": "text/css"}
# No data in these: the page and its assets load without a token; /board itself needs one.
PUBLIC_PATHS = {"/", *(f"/board/{name}" for name in ASSETS)}
NO_CACHE = {"Cache-Control": "no-cache"}


def router(client: Callable[[], Awaitable[Client]]) -> APIRouter:
    """``GET /`` (the page), ``GET /board/{asset}`` and ``GET /board`` (the data), sharing
    one snapshot cache; ``client`` gives the API's Temporal client (connected lazily)."""
    cache = BoardCache(client, board_ttl())
    routes = APIRouter()

    @routes.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html", headers=NO_CACHE)

    @routes.get("/board", response_model=Board, response_model_exclude_none=True)
    async def board(request: Request) -> Response:
        """The job board: per column a count and the 50 newest cards (see the README)."""
        snapshot = await cache.get()
        body = snapshot.model_dump_json(exclude_none=True, exclude_defaults=False).encode()
        headers = {"Cache-Control": "no-store", "Vary": "Accept-Encoding"}
        if "gzip" in request.headers.get("accept-encoding", "") and len(body) > 1024:
            headers["Content-Encoding"] = "gzip"
            body = gzip.compress(body, compresslevel=5)
        return Response(body, media_type="application/json", headers=headers)

    @routes.get("/board/{asset}", include_in_schema=False)
    async def asset(asset: str) -> FileResponse:
        if asset not in ASSETS:
            raise JobNotFound(f"no board asset {asset!r}")
        return FileResponse(STATIC / asset, media_type=ASSETS[asset], headers=NO_CACHE)

    return routes


def install(app: FastAPI, client: Callable[[], Awaitable[Client]]) -> None:
    """Add the board's routes to ``app``."""
    app.include_router(router(client))
